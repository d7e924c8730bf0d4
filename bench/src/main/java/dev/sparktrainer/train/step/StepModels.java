package dev.sparktrainer.train.step;

import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.model.sequence.EmbedSpec;
import dev.sparktrainer.model.sequence.SequenceInput;
import dev.sparktrainer.model.sequence.TransformerSpec;
import dev.sparktrainer.model.torchscript.TorchScriptFile;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.train.TrainBenchmark;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * The models of bin/bench-step and their random data: the {@link ModelSpec} of {@code mlp}, {@code
 * cnn} and {@code resnet50}, the shape of a batch's features, and Gaussian features, uint8 pixels
 * and class labels generated once per process with a fixed seed, in direct memory as the input
 * pipeline hands batches over.
 *
 * <p>TorchScript models: the presets {@code ts-mlp}, {@code ts-cnn} and {@code ts-resnet50} are
 * bin/torch-step.py's own eager modules (its {@code build()}, seed 0) written as TorchScript by
 * python/export_torchscript.py ({@link StepTorchScripts}), with the shapes, batch and defaults of
 * the built-in model of the same name; {@code torchscript:FILE} is any exported file (one float
 * input, a classifier's output), its shapes from the file's metadata.
 */
final class StepModels {
  /** The TorchScript presets: bin/torch-step.py's modules, scripted. */
  static final List<String> PRESETS = List.of("ts-mlp", "ts-cnn", "ts-resnet50");

  /** The prefix of a TorchScript file given by its path. */
  static final String FILE_PREFIX = TorchScriptSpec.TYPE + ":";

  /** The sequence models: batches of token ids and a mask, padded to a length of their own. */
  static final List<String> SEQUENCE = List.of("embed", "transformer");

  /** The sequence models' vocabulary, longest sequence and classes. */
  static final SequenceInput SEQUENCE_INPUT = new SequenceInput(30000, 300);

  static final int SEQUENCE_CLASSES = 4;

  /**
   * The padded length T of the sequence models' batches, step after step (cyclically); the same
   * table is in bin/torch-step.py. Each is the longest of 32 lengths drawn like real text
   * (log-normal: median 18, 95th percentile 125, at most 300; numpy seed 32), as a batch padded to
   * its own longest gets them; mean 203. Row {@code i} of a batch of {@code b} rows is {@code
   * max(1, T (i + 1) / b)} long (the mask), which changes no cost on either side: both compute on
   * all T positions.
   */
  static final int[] SEQUENCE_T = {
    300, 300, 91, 147, 300, 300, 96, 219, 180, 150, 241, 99, 300, 195, 203, 123
  };

  private StepModels() {}

  /** Whether {@code model} is a sequence model (ids and mask of varying length). */
  static boolean sequence(String model) {
    return SEQUENCE.contains(model);
  }

  /**
   * The sequence models' batches, one per entry of {@link #SEQUENCE_T}: ids (uniform in [1, V))
   * int64 and mask float32, {@code [batch, T]}, in direct memory, generated once.
   */
  static ByteBuffer[][] sequenceBatches(int batch, long seed) {
    Random r = new Random(seed);
    ByteBuffer[][] out = new ByteBuffer[SEQUENCE_T.length][];
    for (int s = 0; s < out.length; s++) {
      int t = SEQUENCE_T[s];
      ByteBuffer ids = ByteBuffer.allocateDirect(8 * batch * t).order(ByteOrder.nativeOrder());
      ByteBuffer mask = ByteBuffer.allocateDirect(4 * batch * t).order(ByteOrder.nativeOrder());
      for (int i = 0; i < batch; i++) {
        int n = Math.max(1, t * (i + 1) / batch);
        for (int j = 0; j < t; j++) {
          ids.putLong(j < n ? 1 + r.nextInt((int) SEQUENCE_INPUT.vocabSize() - 1) : 0);
          mask.putFloat(j < n ? 1f : 0f);
        }
      }
      out[s] = new ByteBuffer[] {ids.flip(), mask.flip()};
    }
    return out;
  }

  /** Whether {@code model} is a TorchScript one: a preset or {@code torchscript:FILE}. */
  static boolean torchScript(String model) {
    return PRESETS.contains(model) || model.startsWith(FILE_PREFIX);
  }

  /**
   * The built-in model whose shapes, defaults and PyTorch eager module {@code model} has ({@code
   * ts-mlp}: {@code mlp}); null for {@code torchscript:FILE}.
   */
  static String base(String model) {
    if (PRESETS.contains(model)) {
      return model.substring(3);
    }
    return model.startsWith(FILE_PREFIX) ? null : model;
  }

  /** A name fit for a file (logs): {@code torchscript:/a/b.pt} becomes {@code ts_b.pt}. */
  static String fileName(String model) {
    String m =
        model.startsWith(FILE_PREFIX)
            ? "ts_" + Path.of(model.substring(FILE_PREFIX.length())).getFileName()
            : model;
    return m.replaceAll("[^A-Za-z0-9._-]", "_");
  }

  /**
   * The model's spec; a TorchScript one's from {@code file}, as {@code TorchScriptSpec.of(file)}
   * makes it, read without Hadoop's file system (the GPU machine's class path has no Hadoop).
   */
  static ModelSpec spec(String model, int image, String file) throws java.io.IOException {
    if (torchScript(model)) {
      return TorchScriptSpec.of(
          TorchScriptFile.parse(file, java.nio.file.Files.readAllBytes(Path.of(file))));
    }
    return spec(model, image);
  }

  /**
   * The shape of a batch's features: a built-in model's (or a preset's) as always, else the
   * TorchScript file's one input.
   */
  static long[] featureShape(String model, int image, int batch, ModelSpec spec) {
    String base = base(model);
    if (base != null) {
      return featureShape(base, image, batch);
    }
    ai.djl.ndarray.types.Shape[] in = spec.inputShapes();
    if (in.length != 1) {
      throw new IllegalArgumentException(
          "Invalid model "
              + model
              + ": the benchmark feeds one float input; this module takes "
              + in.length);
    }
    long[] d = in[0].getShape();
    long[] shape = new long[d.length + 1];
    shape[0] = batch;
    System.arraycopy(d, 0, shape, 1, d.length);
    return shape;
  }

  /** The number of classes: a built-in model's, or the TorchScript file's output width. */
  static int classes(String model, ModelSpec spec) {
    String base = base(model);
    if (base != null) {
      return classes(base);
    }
    TorchScriptFile.Metadata meta = ((TorchScriptSpec) spec).file().metadata();
    long[] out = meta == null ? null : meta.outputShape();
    if (out == null || out.length != 1) {
      throw new IllegalArgumentException(
          "Invalid model "
              + model
              + ": the benchmark trains a classifier ([batch, classes] output, softmax cross"
              + " entropy); this file's output is "
              + (out == null ? "not recorded" : java.util.Arrays.toString(out)));
    }
    return Math.toIntExact(out[0]);
  }

  static ModelSpec spec(String model, int image) {
    return switch (model) {
      case "mlp", "cnn" -> TrainBenchmark.spec(model);
      case "resnet50" -> new ResNetSpec(new long[] {3, image, image}, 50, 1000);
      case "embed" -> EmbedSpec.of(SEQUENCE_INPUT, 64, SEQUENCE_CLASSES);
      case "transformer" -> TransformerSpec.of(SEQUENCE_INPUT, 2, 128, 4, SEQUENCE_CLASSES);
      default ->
          throw new IllegalArgumentException(
              "Invalid model '" + model + "': expected mlp, cnn, resnet50, embed or transformer");
    };
  }

  static String describe(String model, int image, String file) {
    if (torchScript(model)) {
      String base = base(model);
      return "TorchScript "
          + file
          + (base == null
              ? ""
              : " (bin/torch-step.py's "
                  + base
                  + (base.equals("resnet50") ? ", torchvision, 3x" + image + "x" + image : "")
                  + ", scripted)");
    }
    return switch (model) {
      case "mlp" -> "MLP 784-256-128-10 (MlpSpec.of(784, 10, 256, 128))";
      case "cnn" -> "CNN CnnSpec.of(1, 28, 28, 10)";
      case "embed" -> "embedding bag embed:64 (V 30000, 4 classes), T per batch 91..300";
      case "transformer" ->
          "Transformer layers=2,dim=128,heads=4,ff=512 (V 30000, L 300, 4 classes), T per batch"
              + " 91..300";
      default -> "ResNet-50 (DJL ResNetV1, 1000 classes) on 3x" + image + "x" + image;
    };
  }

  static long[] featureShape(String model, int image, int batch) {
    return switch (model) {
      case "mlp" -> new long[] {batch, 784};
      case "cnn" -> new long[] {batch, 1, 28, 28};
      case "embed", "transformer" -> new long[] {batch, SEQUENCE_INPUT.maxLength()};
      default -> new long[] {batch, 3, image, image};
    };
  }

  static int classes(String model) {
    return model.equals("resnet50") ? 1000 : sequence(model) ? SEQUENCE_CLASSES : 10;
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
