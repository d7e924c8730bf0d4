package dev.sparktrainer.model.sequence;

import static dev.sparktrainer.model.sequence.SequenceFixtures.newStep;
import static dev.sparktrainer.model.sequence.SequenceFixtures.randomBatch;
import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.pytorch.jni.JniUtils;
import com.fasterxml.jackson.databind.JsonNode;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.Rings;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.TrainStep;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link Precision#BF16} trains the sequence models: forward and backward on bfloat16 copies of the
 * weights (layer norm's scale and shift float32), float32 master weights. Its SGD update from the
 * same parameters and batch is within 15% (of the float32 update's norm) of the float32 step's, as
 * {@code Bf16StepTest} requires of the other models; and Adam in bf16 fits a fixed batch (the loss
 * falls), with every length changing from step to step.
 */
class SequenceBf16Test {
  private static final double TOLERANCE = 0.15;

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer"})
  void theBf16UpdateIsCloseToTheFp32One(String name) {
    ModelSpec spec = SequenceMaskingTest.model(name);
    OptimizerSpec sgd = OptimizerSpec.sgd().optLearningRate(0.5f).build();
    float[][][] delta = new float[2][][];
    Precision[] precisions = {Precision.FP32, Precision.BF16};
    for (int v = 0; v < 2; v++) {
      try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
          TrainStep step = newStep(replicas, null, precisions[v], 1 << 20, sgd)) {
        float[][] before = step.parameterValues();
        try (Batch b = randomBatch(replicas.manager().newSubManager(), 16, 12, 40, 3, 1)) {
          step.run(b, 1000, 0.5f, new double[3]);
        }
        float[][] after = step.parameterValues();
        for (int i = 0; i < after.length; i++) {
          for (int j = 0; j < after[i].length; j++) {
            after[i][j] -= before[i][j];
          }
        }
        delta[v] = after;
      }
    }
    double err = 0;
    double norm = 0;
    for (int i = 0; i < delta[0].length; i++) {
      for (int j = 0; j < delta[0][i].length; j++) {
        double d = delta[1][i][j] - delta[0][i][j];
        err += d * d;
        norm += (double) delta[0][i][j] * delta[0][i][j];
      }
    }
    assertThat(norm).as("the float32 step moves the parameters").isPositive();
    assertThat(Math.sqrt(err / norm))
        .as(name + ": bf16 update error relative to fp32's")
        .isLessThan(TOLERANCE);
  }

  /**
   * Two workers in bf16, each half of the fixtures' batches padded to its own length, backward in
   * segments (the mask and the attention bias travel between them in bfloat16): the ranks end with
   * bit-identical parameters, and the mean loss follows PyTorch's float32 losses within bf16's
   * error.
   */
  @Test
  void twoWorkersInBf16WithTheirOwnLengths() throws Exception {
    JsonNode ref = SequenceFixtures.reference("transformer");
    ModelSpec spec = SequenceFixtures.spec("transformer", ref);
    int half = ref.get("batch").asInt() / 2;
    ai.djl.engine.Engine.getEngine("PyTorch"); // loads the natives
    int threads = JniUtils.getNumThreads();
    List<Communicator> ring = Rings.form(2, b -> {});
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<Object[]>> ranks = new ArrayList<>();
      for (int r = 0; r < 2; r++) {
        int rank = r;
        Communicator c = ring.get(r);
        ranks.add(
            pool.submit(
                () -> {
                  JniUtils.setNumThreads(threads);
                  try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
                      TrainStep step = newStep(replicas, c, Precision.BF16, 1024)) {
                    assertThat(step.segmentCount()).isEqualTo(4);
                    SequenceFixtures.start(step, replicas, ref);
                    double[] losses =
                        SequenceStepTest.train(step, replicas, ref, rank * half, (rank + 1) * half);
                    return new Object[] {losses, replicas.hash()};
                  }
                }));
      }
      Object[] r0 = ranks.get(0).get(180, TimeUnit.SECONDS);
      Object[] r1 = ranks.get(1).get(180, TimeUnit.SECONDS);
      assertThat((byte[]) r1[1]).as("the ranks' parameters, bit for bit").isEqualTo(r0[1]);
      JsonNode expected = ref.get("losses");
      for (int s = 0; s < expected.size(); s++) {
        double mean = (((double[]) r0[0])[s] + ((double[]) r1[0])[s]) / 2;
        assertThat(mean)
            .as("bf16 loss of step " + s)
            .isCloseTo(expected.get(s).asDouble(), org.assertj.core.data.Offset.offset(0.05));
      }
    } finally {
      pool.shutdownNow();
      ring.forEach(Communicator::close);
    }
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer"})
  void bf16FitsAFixedBatch(String name) {
    ModelSpec spec = SequenceMaskingTest.model(name);
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, Precision.BF16, 1 << 20)) {
      double first = 0;
      double last = 0;
      for (int s = 0; s < 40; s++) {
        double[] acc = new double[3];
        // the same 16 sequences (up to 12 long), padded to another length every step
        try (Batch b =
            randomBatch(replicas.manager().newSubManager(), 16, 12, 40, 3, 1, 12 + s % 5)) {
          step.run(b, 1000 + s, 1e-2f, acc);
        }
        double loss = acc[0] / acc[2];
        assertThat(Double.isFinite(loss)).isTrue();
        if (s == 0) {
          first = loss;
        }
        last = loss;
      }
      assertThat(last).as(name + ": loss after 40 bf16 steps vs the first").isLessThan(0.7 * first);
    }
  }
}
