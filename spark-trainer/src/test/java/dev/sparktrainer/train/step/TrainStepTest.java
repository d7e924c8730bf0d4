package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.BlockFactory;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.CustomSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The reworked step on one worker: backward cut into segments gives the gradients of one whole
 * backward, for sequential models with dropout and batch norm (MLP, CNN, a residual network with
 * batch norm, DJL's ResNet), and the two optimizer placements agree.
 */
class TrainStepTest {
  /**
   * A small residual network: conv, batch norm, a residual unit (a ParallelBlock), dropout, a head.
   */
  public static final class SmallResNet implements BlockFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public Block newBlock() {
      SequentialBlock unit =
          new SequentialBlock()
              .add(
                  Conv2d.builder()
                      .setKernelShape(new Shape(3, 3))
                      .optPadding(new Shape(1, 1))
                      .setFilters(8)
                      .optBias(false)
                      .build())
              .add(BatchNorm.builder().build())
              .add(Activation::relu);
      ParallelBlock residual =
          new ParallelBlock(
              list ->
                  new NDList(list.get(0).singletonOrThrow().add(list.get(1).singletonOrThrow())),
              List.of(unit, Blocks.identityBlock()));
      return new SequentialBlock()
          .add(in -> new NDList(in.singletonOrThrow().reshape(-1, 1, 8, 8)))
          .add(
              Conv2d.builder()
                  .setKernelShape(new Shape(3, 3))
                  .optPadding(new Shape(1, 1))
                  .setFilters(8)
                  .optBias(false)
                  .build())
          .add(BatchNorm.builder().build())
          .add(Activation::relu)
          .add(residual)
          .add(Blocks.batchFlattenBlock())
          .add(Dropout.builder().optRate(0.3f).build())
          .add(Linear.builder().setUnits(10).build());
    }
  }

  /**
   * A model whose gradients fill one bucket has nothing to overlap its all-reduce with: asked for
   * segments, the step runs backward whole (segments would only cost) and reduces on the training
   * thread; the result is the same.
   */
  @Test
  void oneBucketRunsBackwardWhole() {
    ModelSpec spec = MlpSpec.of(64, 10, 32, 16);
    OptimizerSpec opt = OptimizerSpec.adam().build();
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7)) {
      int[] sizes = replicas.trainableSizes();
      for (int bytes : new int[] {1 << 20, 2048}) {
        try (TrainStep step =
            new TrainStep(
                replicas,
                LossSpec.SOFTMAX_CROSS_ENTROPY,
                null,
                opt.newOptimizer(sizes),
                OptimizerPlacement.DEVICE,
                2,
                bytes,
                true,
                true,
                Duration.ofSeconds(30))) {
          if (bytes == 1 << 20) {
            assertThat(step.gradientBuckets()).isEqualTo(1);
            assertThat(step.segmentCount()).as("one bucket: backward whole").isEqualTo(1);
          } else {
            assertThat(step.gradientBuckets()).isEqualTo(2);
            assertThat(step.segmentCount()).as("two buckets: segments").isGreaterThan(1);
          }
        }
      }
    }
  }

  static Stream<Arguments> models() {
    return Stream.of(
        Arguments.of(
            "mlp",
            MlpSpec.of(64, 10, 32, 16).with(dev.sparktrainer.model.Activation.RELU, 0.2f),
            64),
        Arguments.of("cnn", CnnSpec.of(1, 8, 8, 10), 64),
        Arguments.of("residual+batchnorm", CustomSpec.of(new SmallResNet(), new Shape(64)), 64),
        Arguments.of("resnet20", new ResNetSpec(new long[] {1, 8, 8}, 20, 10), 64));
  }

  private static Batch batch(NDManager m, int rows, int features, long seed) {
    Random r = new Random(seed);
    float[] x = new float[rows * features];
    float[] y = new float[rows];
    for (int i = 0; i < x.length; i++) {
      x[i] = (float) r.nextGaussian();
    }
    for (int i = 0; i < rows; i++) {
      y[i] = r.nextInt(10);
    }
    return new Batch(
        m, new NDList(m.create(x, new Shape(rows, features))), m.create(y, new Shape(rows)), rows);
  }

  /**
   * Runs {@code steps} steps; returns the arena after the last (the raw gradients, size 1) and the
   * values.
   */
  private static float[][] run(
      ModelSpec spec,
      int features,
      boolean segmented,
      OptimizerPlacement placement,
      int devices,
      int steps) {
    return run(
        spec,
        features,
        segmented,
        placement,
        devices,
        steps,
        OptimizerSpec.adam().optLearningRate(1e-2f).build());
  }

  private static float[][] run(
      ModelSpec spec,
      int features,
      boolean segmented,
      OptimizerPlacement placement,
      int devices,
      int steps,
      OptimizerSpec opt) {
    return run(spec, features, segmented, placement, devices, steps, opt, 12);
  }

  private static float[][] run(
      ModelSpec spec,
      int features,
      boolean segmented,
      OptimizerPlacement placement,
      int devices,
      int steps,
      OptimizerSpec opt,
      int rows) {
    try (ReplicaSet replicas =
        new ReplicaSet(spec, Collections.nCopies(devices, Device.cpu()), 7)) {
      int[] sizes = new int[replicas.trainable.length];
      for (int j = 0; j < sizes.length; j++) {
        sizes[j] = replicas.sizes[replicas.trainable[j]];
      }
      try (TrainStep step =
          new TrainStep(
              replicas,
              LossSpec.SOFTMAX_CROSS_ENTROPY,
              null,
              opt.newOptimizer(sizes),
              placement,
              2,
              2048, // 2 KB buckets: every model here has several (the MLP two)
              true,
              segmented,
              Duration.ofSeconds(30))) {
        if (segmented && !(spec instanceof MlpSpec mlp && mlp.hidden().length == 0)) {
          assertThat(step.gradientBuckets()).as("buckets of " + spec).isGreaterThan(1);
          assertThat(step.segmentCount()).as("segments of " + spec).isGreaterThan(1);
        }
        double[] acc = new double[3];
        for (int s = 0; s < steps; s++) {
          try (Batch b = batch(replicas.manager().newSubManager(), rows, features, s)) {
            step.run(b, 1000 + s, 1e-2f, acc);
          }
        }
        float[] arena = step.gradients();
        float[][] values = replicas.readValues();
        float[][] out = new float[values.length + 2][];
        out[0] = arena;
        out[1] = new float[] {(float) acc[0], (float) acc[1]};
        System.arraycopy(values, 0, out, 2, values.length);
        return out;
      }
    }
  }

  private static double maxRelDiff(float[][] a, float[][] b) {
    double max = 0;
    for (int i = 0; i < a.length; i++) {
      assertThat(a[i]).hasSameSizeAs(b[i]);
      for (int k = 0; k < a[i].length; k++) {
        double d = Math.abs(a[i][k] - b[i][k]) / Math.max(1e-3, Math.abs(b[i][k]));
        max = Math.max(max, d);
      }
    }
    return max;
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("models")
  void segmentedBackwardEqualsWholeBackward(String name, ModelSpec spec, int features) {
    float[][] whole = run(spec, features, false, OptimizerPlacement.HOST, 1, 3);
    float[][] segmented = run(spec, features, true, OptimizerPlacement.HOST, 1, 3);
    // Gradients of the third step (after two updates), the losses, and the parameters (batch-norm
    // statistics included) after three steps.
    assertThat(maxRelDiff(segmented, whole)).as(name).isLessThan(1e-4);
    assertThat(whole[0]).as("gradients are not all zero").isNotEqualTo(new float[whole[0].length]);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("models")
  void devicePlacementEqualsHostPlacement(String name, ModelSpec spec, int features) {
    // Same operations in the same order, but the engine's kernels round differently from Java's
    // loop
    // in the last bits; Adam normalises a near-zero gradient to a full step, which would magnify
    // that noise, so compare Adam on gradients that are not noise, and SGD everywhere.
    for (OptimizerSpec opt :
        List.of(
            OptimizerSpec.sgd()
                .optLearningRate(0.05f)
                .optMomentum(0.9f)
                .optWeightDecay(1e-3f)
                .build(),
            OptimizerSpec.adamW().optLearningRate(1e-3f).optWeightDecay(0.01f).build())) {
      float[][] host = run(spec, features, true, OptimizerPlacement.HOST, 1, 3, opt);
      float[][] device = run(spec, features, true, OptimizerPlacement.DEVICE, 1, 3, opt);
      assertThat(maxRelDiff(device, host)).as(name + " " + opt).isLessThan(1e-3);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("models")
  void twoDevicesPerWorkerSegmentedEqualsWhole(String name, ModelSpec spec, int features) {
    float[][] whole = run(spec, features, false, OptimizerPlacement.DEVICE, 2, 2);
    float[][] segmented = run(spec, features, true, OptimizerPlacement.DEVICE, 2, 2);
    assertThat(maxRelDiff(segmented, whole)).as(name).isLessThan(1e-4);
  }

  @Test
  void statisticsAreAveragedOverTheReplicasThatRan() {
    // One row on three replicas: two of them run nothing. The batch-norm statistics are the one
    // replica's, not diluted by the idle ones (averaging over all three would divide by 3).
    ModelSpec spec = CustomSpec.of(new SmallResNet(), new Shape(64));
    OptimizerSpec sgd = OptimizerSpec.sgd().optLearningRate(0.05f).build();
    float[][] three = run(spec, 64, false, OptimizerPlacement.HOST, 3, 2, sgd, 1);
    float[][] one = run(spec, 64, false, OptimizerPlacement.HOST, 1, 2, sgd, 1);
    assertThat(maxRelDiff(three, one)).isLessThan(1e-6);
  }
}
