package dev.sparktrainer.train;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import java.util.List;
import java.util.Map;

/**
 * The models of bin/bench-scaling ({@code mlp}, {@code cnn}, {@code resnet}): their specs, their
 * default per-worker batch and steps per epoch, the shape and side of their examples, and their
 * parameter counts.
 */
final class ScalingModels {
  static final List<String> MODELS = List.of("mlp", "cnn", "resnet");

  /**
   * Per-worker batch per model. ResNet: 32, the smallest batch whose backward (about 0.55 s on one
   * core here) is as long as its gradient exchange at 2.5 Gbit/s (each of the 2 ranks sends its 94
   * MB over the one shared link: 0.6 s), so that overlap can reach the efficiency target at all; at
   * 16 the exchange alone is longer than the whole 1-worker step and the efficiency stays below
   * about 0.55 however well it is hidden.
   */
  static final Map<String, Integer> BATCH = Map.of("mlp", 64, "cnn", 64, "resnet", 32);

  /**
   * Steps per epoch per model: a run of 2 epochs takes seconds (MLP) to tens of seconds (ResNet).
   */
  static final Map<String, Integer> STEPS = Map.of("mlp", 300, "cnn", 40, "resnet", 6);

  private static final int RESNET_LAYERS = 50;

  private static final int RESNET_SIDE = 36;

  private ScalingModels() {}

  static ModelSpec spec(String model) {
    return switch (model) {
      case "mlp", "cnn" -> TrainBenchmark.spec(model);
      case "resnet" -> new ResNetSpec(new long[] {1, RESNET_SIDE, RESNET_SIDE}, RESNET_LAYERS, 10);
      default ->
          throw new IllegalArgumentException(
              "Invalid model '" + model + "': expected mlp, cnn or resnet");
    };
  }

  static String describe(String model) {
    return switch (model) {
      case "mlp" -> "MLP 784-256-128-10";
      case "cnn" -> "CNN CnnSpec.of(1, 28, 28, 10)";
      default ->
          "ResNet-"
              + RESNET_LAYERS
              + " (DJL ResNetV1) on "
              + RESNET_SIDE
              + "x"
              + RESNET_SIDE
              + " (28x28 zero-padded)";
    };
  }

  /** Image side of the model's examples (28, or the padded side for ResNet). */
  static int side(String model) {
    return model.equals("resnet") ? RESNET_SIDE : 28;
  }

  static long[] featureShape(String model) {
    return switch (model) {
      case "mlp" -> new long[] {784};
      case "cnn" -> new long[] {1, 28, 28};
      default -> new long[] {1, RESNET_SIDE, RESNET_SIDE};
    };
  }

  /** All parameters of the model, those without gradients (batch-norm statistics) included. */
  static long parameterCount(ModelSpec spec) {
    try (NDManager manager = NDManager.newBaseManager()) {
      Block block = spec.newBlock();
      block.initialize(manager, DataType.FLOAT32, spec.batchInputShapes(1));
      long n = 0;
      for (Parameter p : block.getParameters().values()) {
        n += p.getArray().size();
      }
      return n;
    }
  }
}
