package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import dev.sparktrainer.model.BlockFactory;
import dev.sparktrainer.model.CustomSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link Precision#BF16} on the models users bring beside the built-in ones: a frozen backbone (a
 * fine-tuning run: frozen convolution, batch norm and linear layers under a trainable head), layer
 * norm, and a model whose output is float32 already. Each trains in bfloat16, tracks the float32
 * run within bfloat16's rounding, and a frozen weight ends where it started.
 */
class Bf16ModelsTest {
  private static final OptimizerSpec SGD = OptimizerSpec.sgd().optLearningRate(0.05f).build();
  private static final OptimizerSpec ADAMW =
      OptimizerSpec.adamW().optLearningRate(1e-2f).optWeightDecay(0.01f).build();

  /** As {@code Bf16StepTest}'s tolerance: 15% of the float32 update's norm. */
  private static final double TOLERANCE = 0.15;

  /**
   * Fine-tuning: a frozen backbone (convolution, batch norm, linear, layer norm) under a trainable
   * linear head. The backbone's batch norm still updates its running statistics in training.
   */
  public static final class FrozenBackbone implements BlockFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public Block newBlock() {
      SequentialBlock backbone =
          new SequentialBlock()
              .add(in -> new NDList(in.singletonOrThrow().reshape(-1, 1, 8, 8)))
              .add(
                  Conv2d.builder()
                      .setKernelShape(new Shape(3, 3))
                      .optPadding(new Shape(1, 1))
                      .setFilters(4)
                      .build())
              .add(BatchNorm.builder().build())
              .add(Activation::relu)
              .add(Blocks.batchFlattenBlock())
              .add(Linear.builder().setUnits(32).build())
              .add(LayerNorm.builder().build())
              .add(Activation::relu);
      backbone.freezeParameters(true);
      return new SequentialBlock().add(backbone).add(Linear.builder().setUnits(10).build());
    }
  }

  /** Layer norm between two linear layers, everything trainable. */
  public static final class WithLayerNorm implements BlockFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public Block newBlock() {
      return new SequentialBlock()
          .add(Linear.builder().setUnits(32).build())
          .add(LayerNorm.builder().build())
          .add(Activation::relu)
          .add(Linear.builder().setUnits(10).build());
    }
  }

  /**
   * Ends in a learned per-class scale of normalization type (kept float32, like layer norm's): the
   * bfloat16 logits times a float32 tensor are float32, so the model's output is float32 already.
   */
  public static final class Float32Output implements BlockFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public Block newBlock() {
      return new SequentialBlock()
          .add(Linear.builder().setUnits(32).build())
          .add(Activation::relu)
          .add(Linear.builder().setUnits(10).build())
          .add(new Scale(10));
    }
  }

  /** {@code x * scale}, scale a {@link Parameter.Type#GAMMA} parameter of ones. */
  static final class Scale extends AbstractBlock {
    private final Parameter scale;

    Scale(long n) {
      scale =
          addParameter(
              Parameter.builder()
                  .setName("scale")
                  .setType(Parameter.Type.GAMMA)
                  .optShape(new Shape(n))
                  .build());
    }

    @Override
    protected NDList forwardInternal(
        ParameterStore ps, NDList in, boolean training, PairList<String, Object> params) {
      NDArray s = ps.getValue(scale, in.head().getDevice(), training);
      return new NDList(in.head().mul(s));
    }

    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
      return inputShapes;
    }
  }

  private static ModelSpec model(String name) {
    return switch (name) {
      case "frozen" -> CustomSpec.of(new FrozenBackbone(), new Shape(64));
      case "layernorm" -> CustomSpec.of(new WithLayerNorm(), new Shape(64));
      default -> CustomSpec.of(new Float32Output(), new Shape(64));
    };
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

  @ParameterizedTest(name = "{0}")
  @ValueSource(
      strings = {
        "frozen DEVICE",
        "frozen HOST",
        "layernorm DEVICE",
        "layernorm HOST",
        "float32out DEVICE"
      })
  void trainsInBf16AndTracksFloat32(String mode) {
    ModelSpec spec = model(mode.split(" ")[0]);
    OptimizerPlacement placement = OptimizerPlacement.valueOf(mode.split(" ")[1]);
    StepScenarios.State initial =
        Bf16StepTest.run(spec, SGD, placement, Precision.FP32, null, 7, 0, 0, new double[3]);
    double[] acc32 = new double[3];
    double[] acc16 = new double[3];
    StepScenarios.State fp32 =
        Bf16StepTest.run(spec, SGD, placement, Precision.FP32, null, 7, 0, 5, acc32);
    StepScenarios.State bf16 =
        Bf16StepTest.run(spec, SGD, placement, Precision.BF16, null, 7, 0, 5, acc16);
    double err = distance(bf16.values(), fp32.values()) / distance(fp32.values(), initial.values());
    assertThat(err).as(mode + ": bf16 update error relative to fp32's").isLessThan(TOLERANCE);
    assertThat(distance(bf16.values(), fp32.values())).as(mode + ": ran in bf16").isPositive();
    assertThat(acc16[0] / acc16[2])
        .as(mode + ": mean loss")
        .isCloseTo(acc32[0] / acc32[2], org.assertj.core.data.Percentage.withPercentage(2));
    if (mode.startsWith("frozen")) {
      checkFrozen(spec, initial.values(), bf16.values());
    }
  }

  /**
   * The frozen backbone's weights are where they started, bit for bit; its batch norm's running
   * statistics moved (they are statistics, not frozen weights); the head trained.
   */
  private static void checkFrozen(ModelSpec spec, float[][] before, float[][] after) {
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7)) {
      int frozen = 0;
      for (int i = 0; i < replicas.names.length; i++) {
        Parameter p = replicas.params[0][i];
        String name = replicas.names[i];
        if (p.getType() == Parameter.Type.RUNNING_MEAN
            || p.getType() == Parameter.Type.RUNNING_VAR) {
          assertThat(after[i]).as(name + " (a statistic) moved").isNotEqualTo(before[i]);
        } else if (!p.requiresGradient()) {
          assertThat(after[i]).as(name + " (frozen)").containsExactly(before[i]);
          frozen++;
        } else {
          assertThat(after[i]).as(name + " (trainable) moved").isNotEqualTo(before[i]);
        }
      }
      // conv weight and bias, batch norm's scale and shift, linear weight and bias, layer norm's
      // scale and shift
      assertThat(frozen).as("frozen parameters").isEqualTo(8);
    }
  }

  /**
   * A frozen weight's bfloat16 copy is made once, from the values a resume restores: a bfloat16 run
   * resumed (on replicas whose own initial weights differ: seed 11) is the uninterrupted run bit
   * for bit.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"DEVICE", "HOST"})
  void aFrozenBackboneResumesBitForBit(String placementName) {
    OptimizerPlacement placement = OptimizerPlacement.valueOf(placementName);
    ModelSpec spec = model("frozen");
    StepScenarios.State whole =
        Bf16StepTest.run(spec, ADAMW, placement, Precision.BF16, null, 7, 0, 5, new double[3]);
    StepScenarios.State mid =
        Bf16StepTest.run(spec, ADAMW, placement, Precision.BF16, null, 7, 0, 3, new double[3]);
    StepScenarios.State resumed =
        Bf16StepTest.run(spec, ADAMW, placement, Precision.BF16, mid, 11, 3, 5, new double[3]);
    for (int i = 0; i < whole.values().length; i++) {
      assertThat(resumed.values()[i]).as("parameter " + i).containsExactly(whole.values()[i]);
    }
  }
}
