package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.ParameterStore;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.optim.OptimizerSpec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link Precision#BF16} for a user's TorchScript module, which computes with its own tensors (not
 * a parameter store): the modules in {@code src/test/resources/torchscript-bf16/} (written by
 * {@code make_modules.py} there) train in bfloat16 on a learnable problem, track the float32 run
 * within bfloat16's rounding, read as float32 whenever they are read (validation, the saved model,
 * checkpoints), and resume bit for bit.
 */
class TorchScriptBf16Test {
  private static final OptimizerSpec ADAM = OptimizerSpec.adam().optLearningRate(1e-2f).build();

  /**
   * As {@code Bf16StepTest}'s tolerance: 15% of the float32 update's norm (measured after 20 Adam
   * steps: 9.5% for the MLP, 7.0% for the CNN; Adam's normalized steps make it larger than SGD's).
   */
  private static final double TOLERANCE = 0.15;

  private static final int FEATURES = 20;
  private static final int CLASSES = 5;
  private static final int ROWS = 32;

  /** The teacher of the toy problem: the label is the argmax of {@code TEACHER x}. */
  private static final float[][] TEACHER = new float[CLASSES][FEATURES];

  static {
    Random r = new Random(42);
    for (float[] row : TEACHER) {
      for (int i = 0; i < row.length; i++) {
        row[i] = (float) r.nextGaussian();
      }
    }
  }

  static TorchScriptSpec spec(String model) {
    return TorchScriptSpec.of("src/test/resources/torchscript-bf16/" + model + ".pt");
  }

  /** A batch of the toy problem: gaussian features, labelled by the teacher. */
  static Batch batch(NDManager m, int rows, long seed) {
    Random r = new Random(seed);
    ByteBuffer x = ByteBuffer.allocateDirect(4 * rows * FEATURES).order(ByteOrder.nativeOrder());
    ByteBuffer y = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
    float[] v = new float[FEATURES];
    for (int i = 0; i < rows; i++) {
      for (int f = 0; f < FEATURES; f++) {
        v[f] = (float) r.nextGaussian();
        x.putFloat(4 * (i * FEATURES + f), v[f]);
      }
      int best = 0;
      double bestScore = Double.NEGATIVE_INFINITY;
      for (int c = 0; c < CLASSES; c++) {
        double s = 0;
        for (int f = 0; f < FEATURES; f++) {
          s += TEACHER[c][f] * v[f];
        }
        if (s > bestScore) {
          bestScore = s;
          best = c;
        }
      }
      y.putFloat(4 * i, best);
    }
    return new Batch(
        m,
        new NDList(m.create(x, new Shape(rows, FEATURES), DataType.FLOAT32)),
        m.create(y, new Shape(rows), DataType.FLOAT32),
        rows,
        null,
        true);
  }

  /** Called between steps: before step {@code s} (and once more after the last, s = to). */
  interface Between {
    void before(int s, ReplicaSet replicas, TrainStep step);
  }

  /**
   * Runs steps {@code [from, to)} of {@code model} in {@code precision} from {@code start} (null:
   * the module's own initial values); each step's mean loss into {@code losses[s]} when given.
   */
  static StepScenarios.State run(
      String model,
      OptimizerSpec opt,
      OptimizerPlacement placement,
      Precision precision,
      StepScenarios.State start,
      int from,
      int to,
      double[] losses,
      Between between) {
    try (ReplicaSet replicas = new ReplicaSet(spec(model), List.of(Device.cpu()), 7)) {
      Optimizer optimizer = opt.newOptimizer(replicas.trainableSizes());
      try (TrainStep step =
          new TrainStep(
              replicas,
              LossSpec.SOFTMAX_CROSS_ENTROPY,
              null,
              optimizer,
              placement,
              2,
              4096,
              true,
              false,
              Duration.ofSeconds(30),
              precision)) {
        if (start != null) {
          step.restore(start.values(), start.slots(), start.steps());
        }
        for (int s = from; s <= to; s++) {
          if (between != null) {
            between.before(s, replicas, step);
          }
          if (s == to) {
            break;
          }
          double[] acc = new double[3];
          try (Batch b = batch(replicas.manager().newSubManager(), ROWS, s)) {
            step.run(b, 1000 + s, opt.learningRate(s, 1), acc);
          }
          if (losses != null) {
            losses[s] = acc[0] / acc[2];
          }
        }
        float[][][] slots = new float[optimizer.slotCount()][replicas.trainable.length][];
        for (int s = 0; s < slots.length; s++) {
          for (int j = 0; j < replicas.trainable.length; j++) {
            slots[s][j] = step.updater.slot(s, j);
          }
        }
        return new StepScenarios.State(step.updater.values(), slots, optimizer.steps());
      }
    }
  }

  private static double distance(float[][] a, float[][] b) {
    double sum = 0;
    for (int i = 0; i < a.length; i++) {
      for (int x = 0; x < a[i].length; x++) {
        double d = (double) a[i][x] - b[i][x];
        sum += d * d;
      }
    }
    return Math.sqrt(sum);
  }

  private static double mean(double[] v, int from, int to) {
    double s = 0;
    for (int i = from; i < to; i++) {
      s += v[i];
    }
    return s / (to - from);
  }

  /** The module's own tensor's data type, asked of libtorch (DJL caches what it saw first). */
  private static DataType nativeType(Parameter p) {
    return JniUtils.getDataType((PtNDArray) p.getArray());
  }

  private static final int STEPS = 20;

  /**
   * The module trains in bfloat16: its losses are finite and fall on the toy problem (by 14% for
   * the MLP, whose first layer is frozen, and 35% for the CNN, from the first 3 steps to the last
   * 3; per-batch losses are noisy, hence 20 steps and a 10% bar), its updates are within bfloat16's
   * rounding of the float32 run's, and it did run in bfloat16 (not the float32 result bit for bit).
   * The MLP's frozen layer ends where it started.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp DEVICE", "cnn DEVICE", "mlp HOST", "cnn HOST"})
  void trainsInBf16AndTracksFloat32(String mode) {
    String model = mode.split(" ")[0];
    OptimizerPlacement placement = OptimizerPlacement.valueOf(mode.split(" ")[1]);
    float[][] initial =
        run(model, ADAM, placement, Precision.FP32, null, 0, 0, null, null).values();
    double[] loss32 = new double[STEPS];
    double[] loss16 = new double[STEPS];
    StepScenarios.State fp32 =
        run(model, ADAM, placement, Precision.FP32, null, 0, STEPS, loss32, null);
    StepScenarios.State bf16 =
        run(model, ADAM, placement, Precision.BF16, null, 0, STEPS, loss16, null);
    for (int s = 0; s < STEPS; s++) {
      assertThat(loss16[s]).as(mode + ": bf16 loss of step " + s).isFinite();
    }
    assertThat(mean(loss16, STEPS - 3, STEPS))
        .as(mode + ": bf16 loss falls (last 3 steps against the first 3)")
        .isLessThan(0.9 * mean(loss16, 0, 3));
    double err = distance(bf16.values(), fp32.values()) / distance(fp32.values(), initial);
    assertThat(err).as(mode + ": bf16 update error relative to fp32's").isLessThan(TOLERANCE);
    assertThat(distance(bf16.values(), fp32.values())).as(mode + ": ran in bf16").isPositive();
    assertThat(mean(loss16, 0, STEPS))
        .as(mode + ": mean loss")
        .isCloseTo(mean(loss32, 0, STEPS), org.assertj.core.data.Percentage.withPercentage(2));
    if (model.equals("mlp")) {
      try (ReplicaSet replicas = new ReplicaSet(spec(model), List.of(Device.cpu()), 7)) {
        int frozen = 0;
        for (int i = 0; i < replicas.names.length; i++) {
          if (replicas.names[i].startsWith("fc0.")) {
            assertThat(bf16.values()[i]).as(replicas.names[i]).containsExactly(initial[i]);
            frozen++;
          }
        }
        assertThat(frozen).as("frozen fc0.weight and fc0.bias").isEqualTo(2);
      }
    }
  }

  /**
   * Batch norm's scale and shift (a parameter of a module that has running statistics) are typed as
   * normalization parameters, which bfloat16 keeps float32; convolution and linear weights are
   * weights.
   */
  @Test
  void batchNormParametersAreScaleAndShift() {
    try (ReplicaSet replicas = new ReplicaSet(spec("cnn"), List.of(Device.cpu()), 7)) {
      java.util.Map<String, Parameter.Type> types = new java.util.HashMap<>();
      for (int i = 0; i < replicas.names.length; i++) {
        types.put(replicas.names[i], replicas.params[0][i].getType());
      }
      assertThat(types)
          .containsEntry("bn1.weight", Parameter.Type.GAMMA)
          .containsEntry("bn1.bias", Parameter.Type.BETA)
          .containsEntry("bn2.weight", Parameter.Type.GAMMA)
          .containsEntry("bn2.bias", Parameter.Type.BETA)
          .containsEntry("conv1.weight", Parameter.Type.WEIGHT)
          .containsEntry("head.weight", Parameter.Type.WEIGHT)
          .containsEntry("head.bias", Parameter.Type.BIAS)
          .containsEntry("bn1.running_mean", Parameter.Type.RUNNING_MEAN);
    }
  }

  /**
   * After bfloat16 steps the module reads as float32: the saved module (what the trained model
   * holds) restores with float32 parameters equal to the master weights, and its eval forward gives
   * what the trained replica's eval forward gives, bit for bit. Training goes on after that, and
   * once the step is closed the module's own tensors are float32 again.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp", "cnn"})
  void theTrainedModuleIsFloat32(String model) throws Exception {
    try (ReplicaSet replicas = new ReplicaSet(spec(model), List.of(Device.cpu()), 7)) {
      TorchScriptSpec spec = spec(model);
      try (TrainStep step =
          new TrainStep(
              replicas,
              LossSpec.SOFTMAX_CROSS_ENTROPY,
              null,
              ADAM.newOptimizer(replicas.trainableSizes()),
              OptimizerPlacement.DEVICE,
              2,
              4096,
              true,
              false,
              Duration.ofSeconds(30),
              Precision.BF16)) {
        for (int s = 0; s < 3; s++) {
          try (Batch b = batch(replicas.manager().newSubManager(), ROWS, s)) {
            step.run(b, 1000 + s, 1e-2f, new double[3]);
          }
        }
        boolean anyBf16 = false;
        for (Parameter p : replicas.params[0]) {
          anyBf16 |= nativeType(p) != DataType.FLOAT32;
        }
        assertThat(anyBf16).as("the module computes in bfloat16 while it trains").isTrue();

        byte[] saved = replicas.saveParameters();
        float[][] master = step.parameterValues();
        try (NDManager m = NDManager.newBaseManager(Device.cpu());
            Batch x = batch(replicas.manager().newSubManager(), ROWS, 99)) {
          Block restored = spec.restore(m, saved);
          List<Parameter> params = restored.getParameters().values();
          assertThat(params).hasSize(master.length);
          for (int i = 0; i < params.size(); i++) {
            assertThat(nativeType(params.get(i))).as(replicas.names[i]).isEqualTo(DataType.FLOAT32);
            assertThat(params.get(i).getArray().toFloatArray())
                .as(replicas.names[i] + " saved = master")
                .containsExactly(master[i]);
          }
          NDArray fromSaved =
              restored.forward(new ParameterStore(m, false), x.features(), false).head();
          NDArray fromReplica =
              replicas.blocks[0].forward(replicas.stores[0], x.features(), false).head();
          assertThat(fromSaved.getDataType()).isEqualTo(DataType.FLOAT32);
          assertThat(fromReplica.toFloatArray()).containsExactly(fromSaved.toFloatArray());
        }
        double[] acc = new double[3];
        try (Batch b = batch(replicas.manager().newSubManager(), ROWS, 3)) {
          step.run(b, 1003, 1e-2f, acc);
        }
        assertThat(acc[0] / acc[2]).as("training goes on in bfloat16").isFinite();
      }
      for (Parameter p : replicas.params[0]) {
        assertThat(nativeType(p))
            .as(p.getName() + " after the step closed")
            .isEqualTo(DataType.FLOAT32);
      }
    }
  }

  /**
   * Validation between steps (an eval forward of the replica, as at an epoch's end) runs on the
   * float32 weights and changes nothing: the run with validations ends bit for bit where the run
   * without ends. In bfloat16 it pays exactly two switches per validation (to float32 and back),
   * none in the steps between; in float32 none. (An eval forward of a module that has trained once
   * ran, under DJL's inference mode, into TorchScript's differentiable subgraphs: "Inference
   * tensors cannot be saved for backward", in float32 too.)
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp BF16", "cnn BF16", "mlp FP32", "cnn FP32"})
  void validationBetweenStepsRunsInFloat32AndSwitchesBack(String mode) {
    String model = mode.split(" ")[0];
    Precision precision = Precision.valueOf(mode.split(" ")[1]);
    long[] calls = new long[2];
    StepScenarios.State plain =
        run(
            model,
            ADAM,
            OptimizerPlacement.DEVICE,
            precision,
            null,
            0,
            6,
            null,
            (s, replicas, step) -> {
              if (s == 6) {
                calls[0] = step.ledger().snapshot().otherCalls();
              }
            });
    double[] validation = new double[2];
    StepScenarios.State validated =
        run(
            model,
            ADAM,
            OptimizerPlacement.DEVICE,
            precision,
            null,
            0,
            6,
            null,
            (s, replicas, step) -> {
              if (s == 6) {
                calls[1] = step.ledger().snapshot().otherCalls();
              }
              if (s == 2 || s == 4) {
                double[] acc = new double[3];
                LossSpec loss = LossSpec.SOFTMAX_CROSS_ENTROPY;
                try (Batch b = batch(replicas.manager().newSubManager(), ROWS, 500 + s)) {
                  replicas.evaluate(b, loss, loss.newLoss(), acc);
                }
                validation[s / 2 - 1] = acc[0] / acc[2];
              }
            });
    assertThat(validation[0]).as("validation loss before step 2").isFinite();
    assertThat(validation[1]).as("validation loss before step 4").isFinite();
    for (int i = 0; i < plain.values().length; i++) {
      assertThat(validated.values()[i]).as("parameter " + i).containsExactly(plain.values()[i]);
    }
    assertThat(calls[1] - calls[0])
        .as("switches of the module's tensors")
        .isEqualTo(precision == Precision.BF16 ? 4 : 0);
  }

  /**
   * A bfloat16 run resumed from its own checkpoint state is the uninterrupted run bit for bit. The
   * resumed replicas first take a step of their own (the module then computes in bfloat16 and holds
   * other values): the restore must reach the master weights, the statistics and the frozen
   * weights' bfloat16 copies through that.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp DEVICE", "cnn DEVICE", "mlp HOST", "cnn HOST"})
  void resumesBitForBit(String mode) {
    String model = mode.split(" ")[0];
    OptimizerPlacement placement = OptimizerPlacement.valueOf(mode.split(" ")[1]);
    StepScenarios.State whole = run(model, ADAM, placement, Precision.BF16, null, 0, 5, null, null);
    StepScenarios.State mid = run(model, ADAM, placement, Precision.BF16, null, 0, 3, null, null);
    StepScenarios.State resumed =
        run(
            model,
            ADAM,
            placement,
            Precision.BF16,
            null,
            3,
            5,
            null,
            (s, replicas, step) -> {
              if (s == 3) {
                try (Batch b = batch(replicas.manager().newSubManager(), ROWS, 77)) {
                  step.run(b, 77, 0.1f, new double[3]);
                }
                step.restore(mid.values(), mid.slots(), mid.steps());
              }
            });
    for (int i = 0; i < whole.values().length; i++) {
      assertThat(resumed.values()[i]).as("parameter " + i).containsExactly(whole.values()[i]);
    }
    assertThat(resumed.steps()).isEqualTo(whole.steps());
  }

  /**
   * What bfloat16 adds to a TorchScript module's step is what it adds to the built-in models' (per
   * bucket, plus the input's and output's casts), and no switch of the module's tensors.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp", "cnn"})
  void ledgerAddsNoSwitchesPerStep(String model) {
    StepLedger.Totals[] totals = new StepLedger.Totals[2];
    int[] buckets = new int[1];
    int[] tensors = new int[1];
    for (Precision p : Precision.values()) {
      StepLedger.Totals[] at = new StepLedger.Totals[1];
      run(
          model,
          ADAM,
          OptimizerPlacement.DEVICE,
          p,
          null,
          0,
          4,
          null,
          (s, replicas, step) -> {
            if (s == 2) {
              at[0] = step.ledger().snapshot();
            } else if (s == 4) {
              totals[p.ordinal()] = step.ledger().snapshot().minus(at[0]);
              buckets[0] = step.gradientBuckets();
              tensors[0] = replicas.trainable.length;
            }
          });
    }
    StepLedger.Totals fp32 = totals[0];
    StepLedger.Totals bf16 = totals[1];
    assertThat(bf16.perStep(bf16.optimizerCalls())).isEqualTo(fp32.perStep(fp32.optimizerCalls()));
    assertThat(bf16.perStep(bf16.writebackCalls()))
        .as("one refresh per bucket")
        .isEqualTo(buckets[0]);
    // bfloat16 gradients: a cat and a cast per bucket, a zeroing per tensor (as the built-ins')
    assertThat(bf16.perStep(bf16.gradientCalls()))
        .as("a cat and a cast per bucket, a zeroing per tensor")
        .isLessThanOrEqualTo(tensors[0] + 2.0 * buckets[0]);
    // the input's and output's casts and the refresh's grad-mode toggles: no switch
    assertThat(bf16.perStep(bf16.otherCalls()) - fp32.perStep(fp32.otherCalls()))
        .as("other calls bf16 adds")
        .isEqualTo(5.0);
    assertThat(bf16.bytesToHost()).isZero();
    assertThat(bf16.bytesToDevice()).isZero();
  }

  /**
   * Two replicas on one worker: each replica's module is switched on its own, the replicas stay
   * bit-identical through bfloat16 steps, and both modules are float32 again once the step closes.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp", "cnn"})
  void twoReplicasStayIdentical(String model) {
    try (ReplicaSet replicas =
        new ReplicaSet(spec(model), List.of(Device.cpu(), Device.cpu()), 7)) {
      try (TrainStep step =
          new TrainStep(
              replicas,
              LossSpec.SOFTMAX_CROSS_ENTROPY,
              null,
              ADAM.newOptimizer(replicas.trainableSizes()),
              OptimizerPlacement.DEVICE,
              2,
              4096,
              true,
              false,
              Duration.ofSeconds(30),
              Precision.BF16)) {
        double[] acc = new double[3];
        for (int s = 0; s < 4; s++) {
          try (Batch b = batch(replicas.manager().newSubManager(), ROWS, s)) {
            step.run(b, 1000 + s, 1e-2f, acc);
          }
        }
        assertThat(acc[0] / acc[2]).isFinite();
        for (int d = 0; d < 2; d++) {
          boolean anyBf16 = false;
          for (Parameter p : replicas.params[d]) {
            anyBf16 |= nativeType(p) != DataType.FLOAT32;
          }
          assertThat(anyBf16).as("replica " + d + " computes in bfloat16").isTrue();
        }
        assertThat(replicas.hash()).as("replicas agree (the hash throws if not)").isNotNull();
      }
      for (int d = 0; d < 2; d++) {
        for (Parameter p : replicas.params[d]) {
          assertThat(nativeType(p))
              .as("replica " + d + " " + p.getName())
              .isEqualTo(DataType.FLOAT32);
        }
      }
    }
  }
}
