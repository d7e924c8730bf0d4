package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.ParameterStore;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.Rings;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.torchscript.TorchScriptBlock;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
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
 * The flat step trains a user's TorchScript module as PyTorch eager trains it: the fixtures in
 * {@code src/test/resources/torchscript/} (written by {@code make_fixtures.py} there, with PyTorch)
 * hold, for each module, 5 steps of fixed inputs and the losses, final parameters and final
 * batch-norm statistics of PyTorch's {@code torch.optim.Adam} on them, with 1 worker and with 2
 * (each half a batch, gradients and statistics averaged). The step must match them within 1e-5.
 */
class TorchScriptStepTest {
  private static final double TOLERANCE = 1e-5;

  static File fixture(String name) {
    return new File("src/test/resources/torchscript/" + name);
  }

  static JsonNode reference(String model) {
    try {
      return new ObjectMapper().readTree(fixture(model + ".json"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static TorchScriptSpec spec(String model) {
    return TorchScriptSpec.of(fixture(model + ".pt").getPath());
  }

  /** Step {@code s}'s batch of the fixture, rows {@code [from, to)}. */
  static Batch batch(NDManager m, JsonNode ref, int s, int from, int to) {
    JsonNode step = ref.get("steps").get(s);
    NDList x = new NDList();
    for (JsonNode in : step.get("inputs")) {
      long[] shape = new long[in.get("shape").size()];
      for (int i = 0; i < shape.length; i++) {
        shape[i] = in.get("shape").get(i).asLong();
      }
      int rows = (int) shape[0];
      int per = in.get("data").size() / rows;
      float[] v = new float[(to - from) * per];
      for (int i = 0; i < v.length; i++) {
        v[i] = (float) in.get("data").get(from * per + i).asDouble();
      }
      shape[0] = to - from;
      x.add(m.create(v, new Shape(shape)));
    }
    float[] y = new float[to - from];
    for (int i = 0; i < y.length; i++) {
      y[i] = (float) step.get("labels").get(from + i).asDouble();
    }
    return new Batch(m, x, m.create(y, new Shape(y.length)), y.length, null, false);
  }

  static LossSpec loss(JsonNode ref) {
    return LossSpec.parse(ref.get("loss").asText());
  }

  static TrainStep newStep(ReplicaSet replicas, Communicator comm, LossSpec loss) {
    OptimizerSpec opt = OptimizerSpec.adam().optLearningRate(1e-2f).build();
    return new TrainStep(
        replicas,
        loss,
        comm,
        opt.newOptimizer(replicas.trainableSizes()),
        OptimizerPlacement.DEVICE,
        2,
        1 << 20,
        false,
        false,
        Duration.ofSeconds(30),
        Precision.FP32);
  }

  /** Trains steps {@code [0, steps)} on rows {@code [from, to)} of each batch; the losses. */
  static double[] train(
      TrainStep step, ReplicaSet replicas, JsonNode ref, int steps, int from, int to) {
    double[] losses = new double[steps];
    for (int s = 0; s < steps; s++) {
      double[] acc = new double[3];
      try (Batch b = batch(replicas.manager().newSubManager(), ref, s, from, to)) {
        step.run(b, 1000 + s, 1e-2f, acc);
      }
      losses[s] = acc[0] / acc[2];
    }
    return losses;
  }

  /** The final values against the reference's parameters and float buffers, by name. */
  static void assertMatches(String what, ReplicaSet replicas, JsonNode expected) {
    float[][] values = replicas.readValues();
    List<String> names = replicas.parameterNames();
    int checked = 0;
    for (int i = 0; i < names.size(); i++) {
      JsonNode ref =
          expected.get("parameters").has(names.get(i))
              ? expected.get("parameters").get(names.get(i))
              : expected.get("buffers").get(names.get(i));
      assertThat(ref).as(what + ": the reference has " + names.get(i)).isNotNull();
      assertThat(values[i]).as(what + ": size of " + names.get(i)).hasSize(ref.size());
      for (int j = 0; j < values[i].length; j++) {
        double r = ref.get(j).asDouble();
        assertThat(Math.abs(values[i][j] - r))
            .as(what + ": " + names.get(i) + "[" + j + "] = " + values[i][j] + ", PyTorch " + r)
            .isLessThanOrEqualTo(TOLERANCE * Math.max(1, Math.abs(r)));
      }
      checked++;
    }
    assertThat(checked)
        .as(what + ": every parameter and float buffer of the reference")
        .isEqualTo(expected.get("parameters").size() + expected.get("buffers").size());
  }

  static void assertLosses(String what, double[] got, JsonNode expected) {
    for (int s = 0; s < got.length; s++) {
      double r = expected.get(s).asDouble();
      assertThat(Math.abs(got[s] - r))
          .as(what + ": loss of step " + s + " = " + got[s] + ", PyTorch " + r)
          .isLessThanOrEqualTo(TOLERANCE * Math.max(1, Math.abs(r)));
    }
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp", "cnn_bn", "residual", "two_input", "traced_mlp", "regressor"})
  void oneWorkerMatchesPyTorchEager(String model) {
    JsonNode ref = reference(model);
    int rows = ref.get("batch").asInt();
    try (ReplicaSet replicas = new ReplicaSet(spec(model), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, loss(ref))) {
      double[] losses = train(step, replicas, ref, 5, 0, rows);
      assertLosses(model, losses, ref.get("workers").get("1").get("losses"));
      assertMatches(model, replicas, ref.get("workers").get("1"));
    }
  }

  /**
   * The host placement (optimizer on the host) and gradient accumulation (two micro-batches of 4
   * rows making each step of 8) train the module as one batch of 8 does in PyTorch (modules without
   * batch norm: a micro-batch normalizes with its own statistics, as in PyTorch).
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp host", "two_input host", "mlp accumulate", "two_input accumulate"})
  void hostPlacementAndAccumulationMatchPyTorch(String mode) {
    String model = mode.split(" ")[0];
    boolean host = mode.endsWith("host");
    JsonNode ref = reference(model);
    int rows = ref.get("batch").asInt();
    OptimizerSpec opt = OptimizerSpec.adam().optLearningRate(1e-2f).build();
    try (ReplicaSet replicas = new ReplicaSet(spec(model), List.of(Device.cpu()), 7);
        TrainStep step =
            new TrainStep(
                replicas,
                loss(ref),
                null,
                opt.newOptimizer(replicas.trainableSizes()),
                host ? OptimizerPlacement.HOST : OptimizerPlacement.DEVICE,
                2,
                1 << 20,
                false,
                false,
                Duration.ofSeconds(30),
                Precision.FP32)) {
      double[] losses = new double[5];
      for (int s = 0; s < 5; s++) {
        double[] acc = new double[3];
        if (host) {
          try (Batch b = batch(replicas.manager().newSubManager(), ref, s, 0, rows)) {
            step.run(b, 1000 + s, 1e-2f, acc);
          }
        } else {
          for (int m = 0; m < 2; m++) {
            try (Batch b =
                batch(
                    replicas.manager().newSubManager(), ref, s, m * rows / 2, (m + 1) * rows / 2)) {
              step.accumulate(b, 1000 + s, acc, m, 2);
            }
          }
          step.update(1e-2f);
        }
        losses[s] = acc[0] / acc[2];
      }
      assertLosses(mode, losses, ref.get("workers").get("1").get("losses"));
      assertMatches(mode, replicas, ref.get("workers").get("1"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp", "cnn_bn", "residual", "two_input"})
  void twoWorkersMatchPyTorchsDataParallelSteps(String model) throws Exception {
    JsonNode ref = reference(model);
    int half = ref.get("batch").asInt() / 2;
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
                  try (ReplicaSet replicas = new ReplicaSet(spec(model), List.of(Device.cpu()), 7);
                      TrainStep step = newStep(replicas, c, loss(ref))) {
                    double[] losses = train(step, replicas, ref, 5, rank * half, (rank + 1) * half);
                    assertMatches(model + " rank " + rank, replicas, ref.get("workers").get("2"));
                    return losses;
                  }
                }));
      }
      double[] l0 = ranks.get(0).get(120, TimeUnit.SECONDS);
      double[] l1 = ranks.get(1).get(120, TimeUnit.SECONDS);
      double[] mean = new double[l0.length];
      for (int s = 0; s < mean.length; s++) {
        mean[s] = (l0[s] + l1[s]) / 2;
      }
      assertLosses(model + " (mean of the ranks)", mean, ref.get("workers").get("2").get("losses"));
    } finally {
      pool.shutdownNow();
      ring.forEach(Communicator::close);
    }
  }

  /**
   * Training forwards run in train mode and eval forwards in eval mode, whatever mode the module
   * was saved in: eval outputs equal PyTorch's eval outputs before training; two training forwards
   * of the same input differ (dropout active) and move the batch-norm statistics; eval forwards
   * again are deterministic and leave the statistics alone.
   */
  @Test
  void trainingForwardsRunInTrainModeAndEvalForwardsInEvalMode() {
    JsonNode ref = reference("cnn_bn_dropout");
    try (NDManager m = NDManager.newBaseManager(Device.cpu());
        TorchScriptBlock block = (TorchScriptBlock) spec("cnn_bn_dropout").build(m)) {
      ParameterStore store = new ParameterStore(m, false);
      int rows = ref.get("batch").asInt();
      NDList x;
      try (Batch b = batch(m.newSubManager(), ref, 0, 0, rows)) {
        x = new NDList(b.features().get(0).duplicate());
        x.attach(m);
      }
      NDArray runningMean = block.getParameters().get("bn.running_mean").getArray();
      float[] statsBefore = runningMean.toFloatArray();
      float[] eval1 = block.forward(store, x, false).head().toFloatArray();
      JsonNode expected = ref.get("eval_outputs_before").get("data");
      for (int i = 0; i < eval1.length; i++) {
        assertThat((double) eval1[i])
            .isCloseTo(expected.get(i).asDouble(), org.assertj.core.data.Offset.offset(1e-5));
      }
      assertThat(runningMean.toFloatArray())
          .as("eval leaves the statistics")
          .containsExactly(statsBefore);
      assertThat(block.training()).isFalse();
      float[] train1 = block.forward(store, x, true).head().toFloatArray();
      assertThat(block.training()).isTrue();
      float[] train2 = block.forward(store, x, true).head().toFloatArray();
      assertThat(train1).as("dropout is active in training forwards").isNotEqualTo(train2);
      assertThat(runningMean.toFloatArray())
          .as("training forwards update batch norm's statistics")
          .isNotEqualTo(statsBefore);
      float[] stats = runningMean.toFloatArray();
      float[] eval2 = block.forward(store, x, false).head().toFloatArray();
      float[] eval3 = block.forward(store, x, false).head().toFloatArray();
      assertThat(eval2).as("eval forwards are deterministic").containsExactly(eval3);
      assertThat(runningMean.toFloatArray()).containsExactly(stats);
    }
  }

  /**
   * A module saved in eval mode (cnn_bn_dropout.pt is) trains in train mode from its first step:
   * DJL's block believes a loaded module is training and would leave it in eval mode until the
   * first eval forward, training with frozen batch-norm statistics and dropout off.
   */
  @Test
  void aModuleSavedInEvalModeTrainsInTrainModeFromTheFirstStep() {
    JsonNode ref = reference("cnn_bn_dropout");
    int rows = ref.get("batch").asInt();
    try (ReplicaSet replicas = new ReplicaSet(spec("cnn_bn_dropout"), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, LossSpec.SOFTMAX_CROSS_ENTROPY)) {
      int mean = replicas.parameterNames().indexOf("bn.running_mean");
      float[] before = replicas.readValues()[mean];
      try (Batch b = batch(replicas.manager().newSubManager(), ref, 0, 0, rows)) {
        step.run(b, 1000, 1e-2f, new double[3]);
      }
      assertThat(replicas.readValues()[mean])
          .as("the first training step updates batch norm's running mean")
          .isNotEqualTo(before);
      assertThat(((TorchScriptBlock) replicas.blocks[0]).training()).isTrue();
    }
  }

  /**
   * A run resumed from the state after step 3 (parameters, batch-norm statistics, optimizer slots
   * and step count: what a checkpoint holds) ends bit for bit where the uninterrupted run ends.
   */
  @Test
  void resumesBitForBitWithTheBuffers() {
    JsonNode ref = reference("cnn_bn");
    int rows = ref.get("batch").asInt();
    float[][] end;
    float[][] midValues;
    float[][][] midSlots;
    long midSteps;
    try (ReplicaSet replicas = new ReplicaSet(spec("cnn_bn"), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, loss(ref))) {
      train(step, replicas, ref, 3, 0, rows);
      midValues = step.parameterValues();
      midSlots = step.optimizerSlots();
      midSteps = step.optimizerSteps();
      for (int s = 3; s < 5; s++) {
        try (Batch b = batch(replicas.manager().newSubManager(), ref, s, 0, rows)) {
          step.run(b, 1000 + s, 1e-2f, new double[3]);
        }
      }
      end = step.parameterValues();
    }
    try (ReplicaSet replicas = new ReplicaSet(spec("cnn_bn"), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, loss(ref))) {
      step.restore(midValues, midSlots, midSteps);
      for (int s = 3; s < 5; s++) {
        try (Batch b = batch(replicas.manager().newSubManager(), ref, s, 0, rows)) {
          step.run(b, 1000 + s, 1e-2f, new double[3]);
        }
      }
      float[][] resumed = step.parameterValues();
      List<String> names = replicas.parameterNames();
      assertThat(names).contains("bn.running_mean", "bn.running_var");
      for (int i = 0; i < end.length; i++) {
        assertThat(resumed[i]).as(names.get(i)).containsExactly(end[i]);
      }
    }
  }

  /**
   * The trained module saved ({@code saveParameters}: the module with its weights and buffers) and
   * loaded again predicts what the trained replica predicts, and its TorchScript file (the saved
   * model's model.pt) is one libtorch loads.
   */
  @Test
  void theSavedModulePredictsAsTheTrainedOne() throws Exception {
    JsonNode ref = reference("cnn_bn");
    int rows = ref.get("batch").asInt();
    try (ReplicaSet replicas = new ReplicaSet(spec("cnn_bn"), List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, loss(ref))) {
      train(step, replicas, ref, 5, 0, rows);
      byte[] saved = replicas.saveParameters();
      try (NDManager m = NDManager.newBaseManager(Device.cpu());
          Batch b = batch(m.newSubManager(), ref, 0, 0, rows)) {
        float[] trained =
            replicas
                .blocks[0]
                .forward(replicas.stores[0], b.features(), false)
                .head()
                .toFloatArray();
        TorchScriptSpec restoredSpec =
            TorchScriptSpec.fromProperties(spec("cnn_bn").toProperties());
        try (TorchScriptBlock restored = (TorchScriptBlock) restoredSpec.restore(m, saved)) {
          float[] got =
              restored
                  .forward(new ParameterStore(m, false), b.features(), false)
                  .head()
                  .toFloatArray();
          assertThat(got).containsExactly(trained);
          assertThat(restored.getParameters().keys()).isEqualTo(replicas.parameterNames());
        }
        dev.sparktrainer.model.torchscript.TorchScriptFile file =
            dev.sparktrainer.model.torchscript.TorchScriptFile.parse(
                "model.pt", TorchScriptSpec.moduleOf(saved));
        try (TorchScriptBlock plain =
            (TorchScriptBlock) TorchScriptSpec.of(file, new Shape(1, 8, 8)).build(m)) {
          float[] got =
              plain
                  .forward(new ParameterStore(m, false), b.features(), false)
                  .head()
                  .toFloatArray();
          assertThat(got).containsExactly(trained);
        }
      }
    }
  }
}
