package dev.sparktrainer.model.sequence;

import static dev.sparktrainer.model.sequence.SequenceFixtures.assertLosses;
import static dev.sparktrainer.model.sequence.SequenceFixtures.assertParameters;
import static dev.sparktrainer.model.sequence.SequenceFixtures.batch;
import static dev.sparktrainer.model.sequence.SequenceFixtures.newStep;
import static dev.sparktrainer.model.sequence.SequenceFixtures.reference;
import static dev.sparktrainer.model.sequence.SequenceFixtures.spec;
import static dev.sparktrainer.model.sequence.SequenceFixtures.start;
import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.pytorch.jni.JniUtils;
import com.fasterxml.jackson.databind.JsonNode;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.Rings;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.TrainStep;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The flat step trains the sequence models as PyTorch eager computes their math: the fixtures in
 * {@code src/test/resources/sequence/} (written by {@code make_fixtures.py} there; the
 * Transformer's math checked there against {@code nn.TransformerEncoderLayer(norm_first=True)} with
 * {@code src_key_padding_mask}) hold initial parameters, 5 batches of variable-length sequences
 * (each padded to its own longest, one empty sequence each) and PyTorch's losses and final
 * parameters after 5 Adam steps. The step must match them within 1e-5: on one worker, and on two
 * whose halves of each batch are padded to their own (different) lengths, with backward in segments
 * overlapping the all-reduce of small buckets.
 */
class SequenceStepTest {
  private static final int STEPS = 5;

  /** Trains the fixture's steps on rows {@code [from, to)}, each padded to their own longest. */
  static double[] train(TrainStep step, ReplicaSet replicas, JsonNode ref, int from, int to) {
    double[] losses = new double[STEPS];
    for (int s = 0; s < STEPS; s++) {
      double[] acc = new double[3];
      try (Batch b = batch(replicas.manager().newSubManager(), ref, s, from, to, 0, 0)) {
        step.run(b, 1000 + s, 1e-2f, acc);
      }
      losses[s] = acc[0] / acc[2];
    }
    return losses;
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer", "transformer_gelu"})
  void oneWorkerMatchesPyTorch(String model) {
    JsonNode ref = reference(model);
    ModelSpec spec = spec(model, ref);
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, Precision.FP32, 1 << 20)) {
      start(step, replicas, ref);
      double[] losses = train(step, replicas, ref, 0, ref.get("batch").asInt());
      assertLosses(model, losses, ref.get("losses"));
      assertParameters(model, replicas, ref);
    }
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer"})
  void twoWorkersWithTheirOwnLengthsMatchPyTorch(String model) throws Exception {
    JsonNode ref = reference(model);
    ModelSpec spec = spec(model, ref);
    int half = ref.get("batch").asInt() / 2;
    ai.djl.engine.Engine.getEngine("PyTorch"); // loads the natives
    int threads = JniUtils.getNumThreads();
    List<Communicator> ring = Rings.form(2, b -> {});
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<double[]>> ranks = new ArrayList<>();
      for (int r = 0; r < 2; r++) {
        int rank = r;
        Communicator c = ring.get(r);
        ranks.add(
            pool.submit(
                () -> {
                  JniUtils.setNumThreads(threads);
                  try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
                      TrainStep step = newStep(replicas, c, Precision.FP32, 1024)) {
                    if (spec instanceof TransformerSpec) {
                      assertThat(step.segmentCount())
                          .as("backward in segments: embedding, 2 layers, head")
                          .isEqualTo(4);
                      assertThat(step.gradientBuckets()).isGreaterThan(2);
                    }
                    start(step, replicas, ref);
                    double[] losses = train(step, replicas, ref, rank * half, (rank + 1) * half);
                    assertParameters(model + " rank " + rank, replicas, ref);
                    return losses;
                  }
                }));
      }
      double[] l0 = ranks.get(0).get(180, TimeUnit.SECONDS);
      double[] l1 = ranks.get(1).get(180, TimeUnit.SECONDS);
      double[] mean = new double[STEPS];
      for (int s = 0; s < STEPS; s++) {
        mean[s] = (l0[s] + l1[s]) / 2;
      }
      assertLosses(model + " (mean of the ranks)", mean, ref.get("losses"));
      // the ranks' halves were padded to different lengths in some step
      int differing = 0;
      for (int s = 0; s < STEPS; s++) {
        try (Batch a = batch(ai.djl.ndarray.NDManager.newBaseManager(), ref, s, 0, half, 0, 0);
            Batch b =
                batch(ai.djl.ndarray.NDManager.newBaseManager(), ref, s, half, 2 * half, 0, 0)) {
          differing +=
              a.features().get(0).getShape().get(1) != b.features().get(0).getShape().get(1)
                  ? 1
                  : 0;
        }
      }
      assertThat(differing).as("steps whose ranks had different T").isPositive();
    } finally {
      pool.shutdownNow();
      ring.forEach(Communicator::close);
    }
  }
}
