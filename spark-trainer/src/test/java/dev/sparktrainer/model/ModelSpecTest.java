package dev.sparktrainer.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.util.List;
import java.util.Map;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

class ModelSpecTest {
  /** A custom block factory that can be rebuilt from its class name. */
  public static final class TinyLinear implements BlockFactory {
    @Override
    public Block newBlock() {
      return Linear.builder().setUnits(3).build();
    }
  }

  private static Shape forward(ModelSpec spec, int batch) {
    try (NDManager m = NDManager.newBaseManager()) {
      Block b = spec.newBlock();
      b.initialize(m, DataType.FLOAT32, spec.batchInputShapes(1));
      NDList in = new NDList();
      for (Shape s : spec.batchInputShapes(batch)) {
        in.add(m.randomUniform(0, 1, s));
      }
      return b.forward(new ParameterStore(m, false), in, true).head().getShape();
    }
  }

  @Test
  void builtInModelsBuildAndRunForwardPasses() {
    assertThat(forward(MlpSpec.of(64, 10, 32, 16).with(Activation.TANH, 0.1f), 5))
        .isEqualTo(new Shape(5, 10));
    MlpSpec twoFeatures =
        new MlpSpec(new long[][] {{2, 3}, {4}}, new int[] {8}, 1, Activation.GELU, 0f);
    assertThat(forward(twoFeatures, 4)).isEqualTo(new Shape(4, 1));
    assertThat(forward(CnnSpec.of(1, 8, 8, 10), 3)).isEqualTo(new Shape(3, 10));
    assertThat(forward(new ResNetSpec(new long[] {3, 16, 16}, 20, 4), 2))
        .isEqualTo(new Shape(2, 4));
    assertThat(forward(CustomSpec.of(new TinyLinear(), new Shape(6)), 2))
        .isEqualTo(new Shape(2, 3));
  }

  /**
   * A CNN or ResNet over decoded photos ([B, H, W, C]) computes what the same parameters compute
   * channels first on the transposed batch; its saved form keeps (C, H, W) and the layout.
   */
  @Test
  void channelsLastModelsTransposeTheirInput() throws Exception {
    List<ModelSpec> chw =
        List.of(
            new CnnSpec(new long[] {3, 8, 6}, new int[] {4}, 8, 2, 0f),
            new ResNetSpec(new long[] {3, 16, 12}, 20, 4));
    for (ModelSpec first : chw) {
      ModelSpec last =
          first instanceof CnnSpec c
              ? c.withChannelsLast()
              : ((ResNetSpec) first).withChannelsLast();
      long[] d = first.inputShapes()[0].getShape();
      assertThat(last.inputShapes()[0]).isEqualTo(new Shape(d[1], d[2], d[0]));
      assertThat(last.toProperties()).containsEntry("inputLayout", "hwc");
      assertThat(last.toProperties().get("imageShape"))
          .isEqualTo(first.toProperties().get("imageShape"));
      try (NDManager m = NDManager.newBaseManager()) {
        Block a = first.build(m);
        java.io.ByteArrayOutputStream params = new java.io.ByteArrayOutputStream();
        a.saveParameters(new java.io.DataOutputStream(params));
        Block b = ModelSpec.fromProperties(last.toProperties()).restore(m, params.toByteArray());
        NDArray x = m.randomUniform(0, 1, new Shape(2, d[0], d[1], d[2]));
        NDArray want = a.forward(new ParameterStore(m, false), new NDList(x), false).head();
        NDArray got =
            b.forward(new ParameterStore(m, false), new NDList(x.transpose(0, 2, 3, 1)), false)
                .head();
        assertThat(got.getShape()).isEqualTo(want.getShape());
        assertThat(got.allClose(want, 1e-5, 1e-6, false)).as(last.toString()).isTrue();
      }
    }
  }

  @Test
  void specsAreSerializableAndRoundTripThroughProperties() throws Exception {
    List<ModelSpec> specs =
        List.of(
            MlpSpec.of(784, 10, 256, 128).with(Activation.RELU, 0.5f),
            CnnSpec.of(1, 28, 28, 10),
            new ResNetSpec(new long[] {3, 32, 32}, 18, 100),
            new CnnSpec(new long[] {3, 8, 6}, new int[] {4}, 8, 2, 0f).withChannelsLast(),
            new ResNetSpec(new long[] {3, 16, 12}, 20, 4).withChannelsLast(),
            CustomSpec.of(new TinyLinear(), new Shape(6)));
    for (ModelSpec s : specs) {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
        out.writeObject(s);
      }
      ModelSpec copy =
          (ModelSpec)
              new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray())).readObject();
      assertThat(copy.toProperties()).isEqualTo(s.toProperties());
      assertThat(ModelSpec.fromProperties(s.toProperties()).toProperties())
          .isEqualTo(s.toProperties());
    }
  }

  @Test
  void invalidSpecsFailWithTheValue() {
    assertThatThrownBy(() -> MlpSpec.of(64, 10, 0))
        .hasMessage("Invalid hidden layer size 0: expected > 0");
    assertThatThrownBy(() -> new CnnSpec(new long[] {1, 4, 4}, new int[] {8, 8, 8}, 16, 2, 0f))
        .hasMessageContaining("3 pooling stages do not fit");
    assertThatThrownBy(() -> ModelSpec.fromProperties(Map.of("type", "rnn")))
        .hasMessage(
            "Invalid model type 'rnn': expected mlp, cnn, resnet, custom, torchscript, embed or transformer");
  }

  @Test
  void lossesHandleLabelShapesAndCountCorrectPredictions() {
    try (NDManager m = NDManager.newBaseManager()) {
      NDArray logits = m.create(new float[] {2, 0, 0, 3, 1, 0}, new Shape(2, 3));
      NDArray labels = m.create(new long[] {0, 2});
      assertThat(LossSpec.SOFTMAX_CROSS_ENTROPY.correct(labels, logits)).isEqualTo(1);
      NDArray one = m.create(new float[] {3, -2, 1}, new Shape(3, 1));
      NDArray binary = m.create(new long[] {1, 0, 0});
      assertThat(LossSpec.SIGMOID_BINARY_CROSS_ENTROPY.correct(binary, one)).isEqualTo(2);
      NDArray l2 =
          LossSpec.L2.evaluate(LossSpec.L2.newLoss(), m.create(new float[] {1, -2, 1}), one);
      assertThat(l2.getFloat()).isCloseTo((4f + 0 + 0) / 2 / 3, Offset.offset(1e-6f));
    }
  }
}
