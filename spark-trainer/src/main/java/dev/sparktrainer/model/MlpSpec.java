package dev.sparktrainer.model;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.Dropout;
import java.util.Locale;
import java.util.Map;

/**
 * A multi-layer perceptron: every feature tensor flattened and concatenated, then {@code hidden}
 * fully connected layers with {@code activation} (and dropout when {@code dropout > 0}), then a
 * linear output layer of {@code outputs} units (logits).
 *
 * @param inputDims per-example shape of each feature tensor (DJL's {@code Shape} is not
 *     serializable)
 * @param hidden sizes of the hidden layers, in order
 * @param outputs number of outputs (classes, or 1 for binary / regression)
 * @param activation activation after every hidden layer
 * @param dropout dropout rate after every hidden activation, 0 for none
 */
public record MlpSpec(
    long[][] inputDims, int[] hidden, int outputs, Activation activation, float dropout)
    implements ModelSpec {
  private static final long serialVersionUID = 1L;
  static final String TYPE = "mlp";

  /** Validates the values. */
  public MlpSpec {
    inputDims = Specs.copy(inputDims);
    Specs.checkShapes(Specs.toShapes(inputDims));
    hidden = hidden.clone();
    for (int h : hidden) {
      if (h <= 0) {
        throw new IllegalArgumentException("Invalid hidden layer size " + h + ": expected > 0");
      }
    }
    if (outputs <= 0) {
      throw new IllegalArgumentException("Invalid outputs " + outputs + ": expected > 0");
    }
    if (activation == null) {
      throw new IllegalArgumentException(
          "Invalid activation null: expected relu, tanh, sigmoid or gelu");
    }
    if (!(dropout >= 0 && dropout < 1)) {
      throw new IllegalArgumentException(
          "Invalid dropout " + dropout + ": expected 0 <= dropout < 1");
    }
  }

  /** An MLP over one flat feature vector of {@code inputSize} values, ReLU, no dropout. */
  public static MlpSpec of(long inputSize, int outputs, int... hidden) {
    return new MlpSpec(new long[][] {{inputSize}}, hidden, outputs, Activation.RELU, 0f);
  }

  /** This spec with another activation and dropout rate. */
  public MlpSpec with(Activation activation, float dropout) {
    return new MlpSpec(inputDims, hidden, outputs, activation, dropout);
  }

  @Override
  public Shape[] inputShapes() {
    return Specs.toShapes(inputDims);
  }

  @Override
  public Block newBlock() {
    SequentialBlock net = new SequentialBlock();
    net.add(new LambdaBlock(MlpSpec::flattenConcat, "flatten"));
    for (int h : hidden) {
      net.add(Linear.builder().setUnits(h).build());
      net.add(activation.block());
      if (dropout > 0) {
        net.add(Dropout.builder().optRate(dropout).build());
      }
    }
    net.add(Linear.builder().setUnits(outputs).build());
    return net;
  }

  static NDList flattenConcat(NDList in) {
    if (in.size() == 1) {
      NDArray x = in.singletonOrThrow();
      return new NDList(x.getShape().dimension() == 2 ? x : x.reshape(x.getShape().get(0), -1));
    }
    NDList flat = new NDList(in.size());
    for (NDArray x : in) {
      flat.add(x.reshape(x.getShape().get(0), -1));
    }
    return new NDList(NDArrays.concat(flat, 1));
  }

  @Override
  public Map<String, String> toProperties() {
    Map<String, String> m = ModelSpec.newProperties(TYPE);
    m.put("inputShapes", Specs.formatShapes(inputShapes()));
    m.put("hidden", Specs.formatInts(hidden));
    m.put("outputs", Integer.toString(outputs));
    m.put("activation", activation.name().toLowerCase(Locale.ROOT));
    m.put("dropout", Float.toString(dropout));
    return m;
  }

  static MlpSpec fromProperties(Map<String, String> p) {
    return new MlpSpec(
        Specs.toDims(Specs.parseShapes(Specs.required(p, "inputShapes"))),
        Specs.parseInts(p.getOrDefault("hidden", "")),
        Integer.parseInt(Specs.required(p, "outputs")),
        Activation.parse(p.getOrDefault("activation", "relu")),
        Float.parseFloat(p.getOrDefault("dropout", "0")));
  }
}
