package dev.sparktrainer.model.sequence;

import static dev.sparktrainer.model.sequence.SequenceFixtures.batch;
import static dev.sparktrainer.model.sequence.SequenceFixtures.newStep;
import static dev.sparktrainer.model.sequence.SequenceFixtures.randomBatch;
import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.StepLedger;
import dev.sparktrainer.train.step.TrainStep;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The padding contract: positions whose mask is 0 change nothing, whatever ids they hold and
 * however many there are; an empty sequence gives finite outputs and a finite step; and a step
 * costs the same engine calls and transfers whatever the batch's length.
 */
class SequenceMaskingTest {
  static final SequenceInput INPUT = new SequenceInput(40, 16);

  static ModelSpec model(String name) {
    return name.equals("embed")
        ? EmbedSpec.of(INPUT, 8, 3)
        : new TransformerSpec(40, 16, 2, 8, 2, 16, 3, Activation.GELU, 0f);
  }

  /** Rows of lengths 3, 5, 0 and 1 with random ids, padded to {@code t} with id {@code pad}. */
  static Batch padded(NDManager m, int t, long pad) {
    int[] lengths = {3, 5, 0, 1};
    long[][] ids = new long[lengths.length][t];
    float[][] mask = new float[lengths.length][t];
    for (int i = 0; i < lengths.length; i++) {
      for (int j = 0; j < t; j++) {
        long id = 1 + new Random(100 * i + j).nextInt(39); // the same real ids whatever t is
        ids[i][j] = j < lengths[i] ? id : pad;
        mask[i][j] = j < lengths[i] ? 1 : 0;
      }
    }
    return batch(m, ids, mask, new long[] {0, 1, 2, 1});
  }

  static float[] logits(Block block, NDManager m, Batch b, boolean training) {
    return block
        .forward(new ParameterStore(m, false), b.features(), training)
        .head()
        .toFloatArray();
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer"})
  void paddingChangesNoOutputAndAnEmptySequenceIsFinite(String name) {
    try (NDManager m = NDManager.newBaseManager(Device.cpu())) {
      m.getEngine().setRandomSeed(5);
      Block block = model(name).build(m);
      for (boolean training : new boolean[] {false, true}) {
        float[] shortest;
        try (Batch b = padded(m.newSubManager(), 5, 0)) {
          shortest = logits(block, m, b, training);
        }
        assertThat(shortest).hasSize(12);
        for (float v : shortest) {
          assertThat(Float.isFinite(v)).as("finite logits, an empty sequence among them").isTrue();
        }
        for (long pad : new long[] {0, 7, 39}) {
          try (Batch b = padded(m.newSubManager(), 16, pad)) {
            float[] longer = logits(block, m, b, training);
            for (int i = 0; i < shortest.length; i++) {
              assertThat(Math.abs(longer[i] - shortest[i]))
                  .as("logit %d, padded to 16 with id %d (training %s)", i, pad, training)
                  .isLessThanOrEqualTo(1e-6f);
            }
          }
        }
      }
    }
  }

  /**
   * Training on a batch padded further (with other ids in the padding) gives the same parameters,
   * within the rounding of sums over more positions (1e-5 after 3 Adam steps).
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer"})
  void paddingChangesNoGradient(String name) {
    float[][][] after = new float[2][][];
    int[] widths = {5, 13};
    for (int v = 0; v < 2; v++) {
      try (ReplicaSet replicas = new ReplicaSet(model(name), List.of(Device.cpu()), 7);
          TrainStep step = newStep(replicas, null, Precision.FP32, 1 << 20)) {
        for (int s = 0; s < 3; s++) {
          double[] acc = new double[3];
          try (Batch b = padded(replicas.manager().newSubManager(), widths[v], 11)) {
            step.run(b, 1000 + s, 1e-2f, acc);
          }
          assertThat(Double.isFinite(acc[0])).as("finite loss").isTrue();
        }
        after[v] = step.parameterValues();
      }
    }
    for (int i = 0; i < after[0].length; i++) {
      for (int j = 0; j < after[0][i].length; j++) {
        assertThat(Float.isFinite(after[1][i][j])).isTrue();
        assertThat(Math.abs(after[1][i][j] - after[0][i][j]))
            .as("parameter %d[%d]", i, j)
            .isLessThanOrEqualTo(1e-5f); // Adam turns sums' rounding into this after 3 steps
      }
    }
  }

  /**
   * The step's ledger per step does not depend on the batch's length: the same engine calls,
   * allocations and transfers for T = 16, 3, 9, 1; nothing crosses to the host on one worker, and
   * nothing is written back (parameters are views of the flat state).
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed fp32", "transformer fp32", "transformer bf16"})
  void theLedgerDoesNotDependOnTheLength(String mode) {
    String name = mode.split(" ")[0];
    Precision precision = mode.endsWith("bf16") ? Precision.BF16 : Precision.FP32;
    int[] lengths = {16, 3, 9, 1, 12, 5};
    try (ReplicaSet replicas = new ReplicaSet(model(name), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, precision, 1 << 20)) {
      StepLedger.Totals first = null;
      for (int s = 0; s < lengths.length; s++) {
        StepLedger.Totals before = step.ledger().snapshot();
        try (Batch b = randomBatch(replicas.manager().newSubManager(), 6, lengths[s], 40, 3, s)) {
          step.run(b, 1000 + s, 1e-2f, new double[3]);
        }
        StepLedger.Totals one = step.ledger().snapshot().minus(before);
        if (s == 2) {
          first = one; // from the third step on (the first two make what later ones keep)
        } else if (s > 2) {
          assertThat(one).as("the ledger of a step with T = " + lengths[s]).isEqualTo(first);
        }
      }
      assertThat(first.writebackCalls())
          .as("parameters are views")
          .isEqualTo(precision == Precision.BF16 ? step.gradientBuckets() : 0);
      assertThat(first.bytesToHost()).isZero();
      assertThat(first.bytesToDevice()).isZero();
      assertThat(first.heapUploads()).isZero();
    }
  }
}
