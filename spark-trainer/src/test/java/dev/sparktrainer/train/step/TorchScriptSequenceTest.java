package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.step.TorchScriptStepTest.assertLosses;
import static dev.sparktrainer.train.step.TorchScriptStepTest.assertMatches;
import static dev.sparktrainer.train.step.TorchScriptStepTest.newStep;
import static dev.sparktrainer.train.step.TorchScriptStepTest.reference;
import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.ParameterStore;
import com.fasterxml.jackson.databind.JsonNode;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.Rings;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.torchscript.TorchScriptBlock;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A TorchScript module that reads a sequence column: its forward takes the column's two tensors,
 * {@code ids [B, T]} int64 then {@code mask [B, T]} float32, T the batch's (or the rank's) longest
 * sequence. {@code text_classifier.pt} (an embedding averaged over the real positions, a linear
 * head; written by {@code src/test/resources/torchscript/make_sequence_fixtures.py} with PyTorch)
 * trains as PyTorch trains it on the same batches, within 1e-5, on one worker and on two whose
 * halves are padded to their own lengths; padding never changes a logit; bf16 leaves the ids int64.
 */
class TorchScriptSequenceTest {
  private static final String MODEL = "text_classifier";
  private static final int STEPS = 5;

  static TorchScriptSpec spec(JsonNode ref) {
    return TorchScriptSpec.of(TorchScriptStepTest.fixture(MODEL + ".pt").getPath())
        .forColumns(
            List.of(
                TorchScriptSpec.Column.ids(
                    "tokens", ref.get("max_length").asInt(), ref.get("vocab").asLong())));
  }

  /**
   * Rows {@code [from, to)} of step {@code s}, padded to {@code width} positions (0: to the rows'
   * own longest, at least 1) with pad id {@code padId}, as the input pipeline batches them.
   */
  static Batch batch(NDManager m, JsonNode ref, int s, int from, int to, int width, long padId) {
    JsonNode step = ref.get("steps").get(s);
    int rows = to - from;
    int[] lengths = new int[rows];
    int longest = 1;
    for (int i = 0; i < rows; i++) {
      for (JsonNode v : step.get("mask").get(from + i)) {
        lengths[i] += v.asDouble() > 0 ? 1 : 0;
      }
      longest = Math.max(longest, lengths[i]);
    }
    int t = width == 0 ? longest : width;
    ByteBuffer ids = ByteBuffer.allocateDirect(8 * rows * t).order(ByteOrder.nativeOrder());
    ByteBuffer mask = ByteBuffer.allocateDirect(4 * rows * t).order(ByteOrder.nativeOrder());
    ByteBuffer labels = ByteBuffer.allocateDirect(8 * rows).order(ByteOrder.nativeOrder());
    for (int i = 0; i < rows; i++) {
      for (int j = 0; j < t; j++) {
        boolean real = j < lengths[i];
        ids.putLong(real ? step.get("ids").get(from + i).get(j).asLong() : padId);
        mask.putFloat(real ? 1f : 0f);
      }
      labels.putLong(step.get("labels").get(from + i).asLong());
    }
    ids.flip();
    mask.flip();
    labels.flip();
    NDList x =
        new NDList(
            m.create(ids, new Shape(rows, t), DataType.INT64),
            m.create(mask, new Shape(rows, t), DataType.FLOAT32));
    return new Batch(m, x, m.create(labels, new Shape(rows), DataType.INT64), rows, null, true);
  }

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

  @Test
  void oneWorkerMatchesPyTorch() {
    JsonNode ref = reference(MODEL);
    try (ReplicaSet replicas = new ReplicaSet(spec(ref), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, LossSpec.SOFTMAX_CROSS_ENTROPY)) {
      double[] losses = train(step, replicas, ref, 0, ref.get("batch").asInt());
      assertLosses(MODEL, losses, ref.get("workers").get("1").get("losses"));
      assertMatches(MODEL, replicas, ref.get("workers").get("1"));
    }
  }

  @Test
  void twoWorkersWithTheirOwnLengthsMatchPyTorch() throws Exception {
    JsonNode ref = reference(MODEL);
    int half = ref.get("batch").asInt() / 2;
    int differing = 0;
    try (NDManager m = NDManager.newBaseManager(Device.cpu())) {
      for (int s = 0; s < STEPS; s++) {
        try (Batch a = batch(m.newSubManager(), ref, s, 0, half, 0, 0);
            Batch b = batch(m.newSubManager(), ref, s, half, 2 * half, 0, 0)) {
          differing +=
              a.features().get(0).getShape().get(1) != b.features().get(0).getShape().get(1)
                  ? 1
                  : 0;
        }
      }
    }
    assertThat(differing).as("steps whose ranks have different T").isPositive();
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
                  try (ReplicaSet replicas = new ReplicaSet(spec(ref), List.of(Device.cpu()), 7);
                      TrainStep step = newStep(replicas, c, LossSpec.SOFTMAX_CROSS_ENTROPY)) {
                    double[] losses = train(step, replicas, ref, rank * half, (rank + 1) * half);
                    assertMatches(MODEL + " rank " + rank, replicas, ref.get("workers").get("2"));
                    return losses;
                  }
                }));
      }
      double[] l0 = ranks.get(0).get(120, TimeUnit.SECONDS);
      double[] l1 = ranks.get(1).get(120, TimeUnit.SECONDS);
      double[] mean = new double[STEPS];
      for (int s = 0; s < STEPS; s++) {
        mean[s] = (l0[s] + l1[s]) / 2;
      }
      assertLosses(MODEL + " (mean of the ranks)", mean, ref.get("workers").get("2").get("losses"));
    } finally {
      pool.shutdownNow();
      ring.forEach(Communicator::close);
    }
  }

  /**
   * Eval logits equal PyTorch's; padding further with other ids changes none; a real position
   * masked out changes its row's (the module reads the mask the trainer sends).
   */
  @Test
  void theMaskDecidesAndPaddingChangesNoLogit() {
    JsonNode ref = reference(MODEL);
    int rows = ref.get("batch").asInt();
    JsonNode expected = ref.get("eval_outputs_before").get("data");
    try (NDManager m = NDManager.newBaseManager(Device.cpu());
        TorchScriptBlock block = (TorchScriptBlock) spec(ref).build(m)) {
      ParameterStore store = new ParameterStore(m, false);
      float[] own;
      float[] wide;
      try (Batch b = batch(m.newSubManager(), ref, 0, 0, rows, 0, 0)) {
        own = block.forward(store, b.features(), false).head().toFloatArray();
      }
      int longest = ref.get("steps").get(0).get("ids").get(0).size();
      try (Batch b = batch(m.newSubManager(), ref, 0, 0, rows, longest + 5, 13)) {
        wide = block.forward(store, b.features(), false).head().toFloatArray();
      }
      assertThat(own).hasSize(expected.size());
      for (int i = 0; i < own.length; i++) {
        double e = expected.get(i).asDouble();
        assertThat((double) Math.abs(own[i] - e))
            .as("logit " + i + " against PyTorch")
            .isLessThan(1e-5);
        assertThat((double) Math.abs(wide[i] - own[i]))
            .as("logit " + i + " padded with 5 more positions of id 13")
            .isLessThan(1e-6);
      }
      // the first row with two or more real tokens, its first masked out
      int row = -1;
      JsonNode masks = ref.get("steps").get(0).get("mask");
      for (int i = 0; i < rows && row < 0; i++) {
        row = masks.get(i).size() > 1 && masks.get(i).get(1).asDouble() > 0 ? i : -1;
      }
      assertThat(row).isNotNegative();
      try (Batch b = batch(m.newSubManager(), ref, 0, 0, rows, 0, 0)) {
        NDArray mask = b.features().get(1);
        mask.set(new ai.djl.ndarray.index.NDIndex(row + ", 0"), 0f);
        float[] masked = block.forward(store, b.features(), false).head().toFloatArray();
        int classes = own.length / rows;
        boolean changed = false;
        for (int i = 0; i < own.length; i++) {
          if (i / classes == row) {
            changed |= Math.abs(masked[i] - own[i]) > 1e-4;
          } else {
            assertThat(masked[i]).as("logit " + i + " of another row").isEqualTo(own[i]);
          }
        }
        assertThat(changed)
            .as("masking a real token of row " + row + " changes its logits")
            .isTrue();
      }
    }
  }

  /**
   * In {@code --precision bf16} the ids stay int64 (an embedding refuses other indices) while the
   * mask, like every float input, is cast: the losses of 5 steps track the float32 run's.
   */
  @Test
  void bf16KeepsTheIdsInt64AndTracksFloat32() {
    JsonNode ref = reference(MODEL);
    int rows = ref.get("batch").asInt();
    double[][] losses = new double[2][];
    for (Precision p : List.of(Precision.FP32, Precision.BF16)) {
      OptimizerSpec opt = OptimizerSpec.adam().optLearningRate(1e-2f).build();
      try (ReplicaSet replicas = new ReplicaSet(spec(ref), List.of(Device.cpu()), 7);
          TrainStep step =
              new TrainStep(
                  replicas,
                  LossSpec.SOFTMAX_CROSS_ENTROPY,
                  null,
                  opt.newOptimizer(replicas.trainableSizes()),
                  OptimizerPlacement.DEVICE,
                  2,
                  1 << 20,
                  false,
                  false,
                  Duration.ofSeconds(30),
                  p)) {
        losses[p == Precision.FP32 ? 0 : 1] = train(step, replicas, ref, 0, rows);
      }
    }
    for (int s = 0; s < STEPS; s++) {
      assertThat(losses[1][s]).as("bf16 loss of step " + s).isFinite();
      assertThat(Math.abs(losses[1][s] - losses[0][s]))
          .as("bf16 loss of step " + s + " " + losses[1][s] + ", float32 " + losses[0][s])
          .isLessThan(0.02 * Math.abs(losses[0][s]));
    }
    assertThat(losses[1]).as("bf16 computes in bfloat16").isNotEqualTo(losses[0]);
  }
}
