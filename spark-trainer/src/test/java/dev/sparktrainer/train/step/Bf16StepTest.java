package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.CustomSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.optim.OptimizerSpec;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link Precision#BF16}: the step on a bfloat16 copy of the parameters tracks the float32 step,
 * resumes from float32 checkpoints and writes checkpoints float32 resumes, and its ledger stays per
 * bucket.
 */
class Bf16StepTest {
  private static final ModelSpec MLP = MlpSpec.of(64, 10, 32, 16);
  private static final ModelSpec CNN = CnnSpec.of(1, 8, 8, 10);
  private static final ModelSpec RES =
      CustomSpec.of(new TrainStepTest.SmallResNet(), new Shape(64));

  private static final OptimizerSpec SGD = OptimizerSpec.sgd().optLearningRate(0.05f).build();
  private static final OptimizerSpec ADAMW =
      OptimizerSpec.adamW().optLearningRate(1e-2f).optWeightDecay(0.01f).build();

  private static ModelSpec model(String name) {
    return switch (name) {
      case "mlp" -> MLP;
      case "cnn" -> CNN;
      default -> RES;
    };
  }

  /**
   * Runs steps {@code [from, to)} in {@code precision} from {@code start} (null: fresh, init seed
   * 7); {@code initSeed} other than 7 makes blocks whose own initial values are wrong, so that a
   * resume that did not reach the bfloat16 copy would show.
   */
  static StepScenarios.State run(
      ModelSpec spec,
      OptimizerSpec opt,
      OptimizerPlacement placement,
      Precision precision,
      StepScenarios.State start,
      int initSeed,
      int from,
      int to,
      double[] acc) {
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), initSeed)) {
      int[] sizes = new int[replicas.trainable.length];
      for (int j = 0; j < sizes.length; j++) {
        sizes[j] = replicas.sizes[replicas.trainable[j]];
      }
      Optimizer optimizer = opt.newOptimizer(sizes);
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
        for (int s = from; s < to; s++) {
          try (Batch b = StepScenarios.batch(replicas.manager().newSubManager(), 12, 64, s)) {
            step.run(b, 1000 + s, opt.learningRate(s, 1), acc);
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

  /**
   * How far the bfloat16 run's parameters are from the float32 run's, relative to how far the
   * float32 run moved them from where both started: the error of the updates, not of the weights.
   */
  private static double relativeUpdateError(float[][] bf16, float[][] fp32, float[][] initial) {
    return distance(bf16, fp32) / distance(fp32, initial);
  }

  /**
   * The tolerance. bfloat16 keeps 8 significant bits: one rounding is off by at most 2^-9 (about
   * 2e-3, ~3e-3 relative on average per element with a few roundings). The weights, the input and
   * every layer's output and gradient are rounded, so a gradient's terms each carry a few 1e-3 of
   * error; but a weight's gradient is a sum over the batch and the layer's width of terms of both
   * signs that largely cancel, and the sum's relative error is the terms' times sum|t| / |sum t|
   * (10 to 30 here, small random-data models). Measured: 5.0% (MLP), 7.8% (CNN) of the update's
   * norm after 5 SGD steps. 15% bounds that with margin, and fails a step on stale bfloat16 weights
   * (never refreshed after the first step: 26% to 215% measured), a lost bucket or a gradient
   * applied twice (tens of % of the update and more).
   */
  private static final double TOLERANCE = 0.15;

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"mlp DEVICE", "cnn DEVICE", "res DEVICE", "res HOST", "mlp HOST"})
  void tracksFloat32WithinBfloat16Rounding(String mode) {
    ModelSpec spec = model(mode.split(" ")[0]);
    OptimizerPlacement placement = OptimizerPlacement.valueOf(mode.split(" ")[1]);
    float[][] initial =
        run(spec, SGD, placement, Precision.FP32, null, 7, 0, 0, new double[3]).values();
    double[] acc32 = new double[3];
    double[] acc16 = new double[3];
    StepScenarios.State fp32 = run(spec, SGD, placement, Precision.FP32, null, 7, 0, 5, acc32);
    StepScenarios.State bf16 = run(spec, SGD, placement, Precision.BF16, null, 7, 0, 5, acc16);
    double err = relativeUpdateError(bf16.values(), fp32.values(), initial);
    assertThat(err)
        .as(mode + ": bf16 update error relative to the fp32 update")
        .isLessThan(TOLERANCE);
    // It ran in bfloat16: not the float32 result bit for bit.
    assertThat(distance(bf16.values(), fp32.values())).as(mode + ": bf16 differs").isPositive();
    // The loss (float32 in both) agrees as closely: mean loss over the 5 steps.
    assertThat(acc16[0] / acc16[2])
        .as(mode + ": mean loss")
        .isCloseTo(acc32[0] / acc32[2], org.assertj.core.data.Percentage.withPercentage(2));
  }

  /**
   * Checkpoints hold the float32 master state: bfloat16 resumed from a bfloat16 checkpoint is the
   * uninterrupted run bit for bit (the bfloat16 copy is derived from the master, nothing else).
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"DEVICE", "HOST"})
  void bf16ResumesItsOwnCheckpointBitForBit(String placementName) {
    OptimizerPlacement placement = OptimizerPlacement.valueOf(placementName);
    StepScenarios.State whole =
        run(RES, ADAMW, placement, Precision.BF16, null, 7, 0, 5, new double[3]);
    StepScenarios.State mid =
        run(RES, ADAMW, placement, Precision.BF16, null, 7, 0, 3, new double[3]);
    StepScenarios.State resumed =
        run(RES, ADAMW, placement, Precision.BF16, mid, 11, 3, 5, new double[3]);
    for (int i = 0; i < whole.values().length; i++) {
      assertThat(resumed.values()[i]).as("parameter " + i).containsExactly(whole.values()[i]);
    }
    assertThat(resumed.steps()).isEqualTo(whole.steps());
  }

  /**
   * A float32 checkpoint resumed in bfloat16 and a bfloat16 one resumed in float32 go on from the
   * checkpoint's weights: each ends within the bfloat16 tolerance of the uninterrupted float32 run
   * (measured on the updates since the checkpoint). The resumed replicas start from other initial
   * weights (seed 11): a bfloat16 copy not refreshed from the restored master would train those.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"FP32 BF16", "BF16 FP32"})
  void resumesInTheOtherPrecision(String mode) {
    Precision first = Precision.valueOf(mode.split(" ")[0]);
    Precision then = Precision.valueOf(mode.split(" ")[1]);
    OptimizerPlacement placement = OptimizerPlacement.DEVICE;
    StepScenarios.State mid = run(RES, SGD, placement, first, null, 7, 0, 3, new double[3]);
    StepScenarios.State resumed = run(RES, SGD, placement, then, mid, 11, 3, 6, new double[3]);
    StepScenarios.State reference =
        run(RES, SGD, placement, Precision.FP32, mid, 7, 3, 6, new double[3]);
    assertThat(resumed.steps()).isEqualTo(6);
    double err = relativeUpdateError(resumed.values(), reference.values(), mid.values());
    assertThat(err).as(mode + ": update error since the checkpoint").isLessThan(TOLERANCE);
  }

  /** Runs 3 steps of ResNet-20 in {@code precision}; the ledger of the last two. */
  private static StepLedger.Totals ledger(Precision precision, int[] tensorsAndBuckets) {
    ModelSpec spec = new ResNetSpec(new long[] {1, 8, 8}, 20, 10);
    int[] sizes;
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7)) {
      sizes = new int[replicas.trainable.length];
      for (int j = 0; j < sizes.length; j++) {
        sizes[j] = replicas.sizes[replicas.trainable[j]];
      }
      try (TrainStep step =
          new TrainStep(
              replicas,
              LossSpec.SOFTMAX_CROSS_ENTROPY,
              null,
              ADAMW.newOptimizer(sizes),
              OptimizerPlacement.DEVICE,
              2,
              1 << 20,
              true,
              true,
              Duration.ofSeconds(30),
              precision)) {
        tensorsAndBuckets[0] = replicas.trainable.length;
        tensorsAndBuckets[1] = step.buckets.gradientBuckets();
        double[] acc = new double[3];
        StepLedger.Totals before = null;
        for (int s = 0; s < 3; s++) {
          if (s == 1) {
            before = step.ledger().snapshot();
          }
          try (Batch b = StepScenarios.batch(replicas.manager().newSubManager(), 8, 64, s)) {
            step.run(b, 1000 + s, 1e-3f, acc);
          }
        }
        return step.ledger().snapshot().minus(before);
      }
    }
  }

  /**
   * bfloat16 adds per step, per bucket, one refresh of the copy (write-back) and at most one cast
   * of the gradients into float32, and per step a constant: the input's cast, the output's, the
   * gradient-mode toggles. Nothing per tensor, nothing crosses to the host.
   */
  @Test
  void ledgerAddsCallsPerBucketNotPerTensor() {
    int[] tb = new int[2];
    StepLedger.Totals fp32 = ledger(Precision.FP32, tb);
    StepLedger.Totals bf16 = ledger(Precision.BF16, new int[2]);
    int tensors = tb[0];
    int buckets = tb[1];
    assertThat(tensors).as("many tensors per bucket").isGreaterThan(3 * buckets);
    assertThat(bf16.perStep(bf16.optimizerCalls())).isEqualTo(fp32.perStep(fp32.optimizerCalls()));
    assertThat(bf16.perStep(bf16.writebackCalls())).as("one refresh per bucket").isEqualTo(buckets);
    // bfloat16 gradients are gathered by a cat and cast per bucket, and zeroed per tensor (float32
    // ones are the buckets' own slices: see FlatStepTest's ledger)
    assertThat(bf16.perStep(bf16.gradientCalls()))
        .as("a cat and a cast per bucket, a zeroing per tensor")
        .isLessThanOrEqualTo(tensors + 2.0 * buckets);
    // fp32's 3 grad-mode toggles, and 5 more: the input and output casts, grad-mode toggles (fp32
    // also made its zero for the buckets' fills once, in the second step: the half below)
    assertThat(fp32.perStep(fp32.otherCalls())).isEqualTo(3.5);
    assertThat(bf16.perStep(bf16.otherCalls()))
        .as("input and output casts, grad-mode toggles")
        .isEqualTo(8.0);
    double extraAlloc =
        bf16.perStep(bf16.deviceAllocations()) - fp32.perStep(fp32.deviceAllocations());
    assertThat(extraAlloc).isBetween(2.0, 2.0 + buckets);
    assertThat(bf16.bytesToHost()).isZero();
    assertThat(bf16.bytesToDevice()).isZero();
  }
}
