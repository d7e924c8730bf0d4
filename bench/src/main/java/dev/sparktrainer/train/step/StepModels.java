package dev.sparktrainer.train.step;

import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.train.TrainBenchmark;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;

/**
 * The models of bin/bench-step and their random data: the {@link ModelSpec} of {@code mlp}, {@code
 * cnn} and {@code resnet50}, the shape of a batch's features, and Gaussian features, uint8 pixels
 * and class labels generated once per process with a fixed seed, in direct memory as the input
 * pipeline hands batches over.
 */
final class StepModels {
  private StepModels() {}

  static ModelSpec spec(String model, int image) {
    return switch (model) {
      case "mlp", "cnn" -> TrainBenchmark.spec(model);
      case "resnet50" -> new ResNetSpec(new long[] {3, image, image}, 50, 1000);
      default ->
          throw new IllegalArgumentException(
              "Invalid model '" + model + "': expected mlp, cnn or resnet50");
    };
  }

  static String describe(String model, int image) {
    return switch (model) {
      case "mlp" -> "MLP 784-256-128-10 (MlpSpec.of(784, 10, 256, 128))";
      case "cnn" -> "CNN CnnSpec.of(1, 28, 28, 10)";
      default -> "ResNet-50 (DJL ResNetV1, 1000 classes) on 3x" + image + "x" + image;
    };
  }

  static long[] featureShape(String model, int image, int batch) {
    return switch (model) {
      case "mlp" -> new long[] {batch, 784};
      case "cnn" -> new long[] {batch, 1, 28, 28};
      default -> new long[] {batch, 3, image, image};
    };
  }

  static int classes(String model) {
    return model.equals("resnet50") ? 1000 : 10;
  }

  /** Gaussian features, generated once, in direct memory. */
  static ByteBuffer features(long[] shape, long seed) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    ByteBuffer b = ByteBuffer.allocateDirect(Math.toIntExact(4 * n)).order(ByteOrder.nativeOrder());
    Random r = new Random(seed);
    for (long i = 0; i < n; i++) {
      b.putFloat((float) r.nextGaussian());
    }
    return b.flip();
  }

  /** Uniform pixels 0..255, one byte each (image transfer uint8), generated once. */
  static ByteBuffer pixels(long[] shape, long seed) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    ByteBuffer b = ByteBuffer.allocateDirect(Math.toIntExact(n)).order(ByteOrder.nativeOrder());
    Random r = new Random(seed);
    for (long i = 0; i < n; i++) {
      b.put((byte) r.nextInt(256));
    }
    return b.flip();
  }

  /** Class labels as int64, as the pipeline makes them. */
  static ByteBuffer labels(int batch, int classes, long seed) {
    ByteBuffer b = ByteBuffer.allocateDirect(8 * batch).order(ByteOrder.nativeOrder());
    Random r = new Random(seed);
    for (int i = 0; i < batch; i++) {
      b.putLong(r.nextInt(classes));
    }
    return b.flip();
  }
}
