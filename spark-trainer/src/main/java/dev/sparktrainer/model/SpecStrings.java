package dev.sparktrainer.model;

import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.model.sequence.EmbedSpec;
import dev.sparktrainer.model.sequence.SequenceInput;
import dev.sparktrainer.model.sequence.TransformerSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The short text forms of models, shapes and optimizers used by the command line and the
 * Estimator's Params: {@code mlp:256,128}, {@code cnn:32,64}, {@code resnet:18}, {@code linear};
 * shapes {@code 64} or {@code 28x28x1}; optimizers {@code adam}, {@code adamw}, {@code sgd}.
 */
public final class SpecStrings {
  /** What the model forms look like, for error messages and help. */
  public static final String MODEL_FORMS =
      "mlp:H1,H2,... (e.g. mlp:256,128), linear, cnn[:F1,F2,...], resnet[:DEPTH],"
          + " embed:DIM, transformer:layers=L,dim=D,heads=H[,ff=F] (token sequences) or"
          + " torchscript:PATH (your PyTorch model; see docs/models.md)";

  /** The Transformer's form, for its error messages. */
  static final String TRANSFORMER_FORM = "transformer:layers=L,dim=D,heads=H[,ff=F]";

  private SpecStrings() {}

  /**
   * A model for features of per-example {@code shapes} (one per feature column) and {@code outputs}
   * outputs.
   *
   * @throws IllegalArgumentException naming the value and the forms allowed
   */
  public static ModelSpec model(
      String text, long[][] shapes, int outputs, Activation activation, float dropout) {
    return model(text, null, shapes, outputs, activation, dropout);
  }

  /**
   * As {@link #model(String, long[][], int, Activation, float)}, with the feature columns' names
   * (for a TorchScript model's checks against them; null: numbered).
   */
  public static ModelSpec model(
      String text,
      List<String> columns,
      long[][] shapes,
      int outputs,
      Activation activation,
      float dropout) {
    return model(text, columns, shapes, outputs, activation, dropout, null);
  }

  /**
   * The TorchScript model {@code text} ({@code torchscript:PATH}) fed from {@code columns} (float32
   * and int64 columns of fixed shapes, and sequences: two forward arguments each, values then mask;
   * see {@link TorchScriptSpec.Column}), checked against them ({@link TorchScriptSpec#check}).
   *
   * @throws IllegalArgumentException when {@code text} is not {@code torchscript:PATH}, or the
   *     module does not fit the columns (naming the argument, the column and what differs)
   */
  public static TorchScriptSpec torchScript(
      String text, List<TorchScriptSpec.Column> columns, int outputs) {
    String path = torchScriptPath(text);
    if (path == null) {
      throw new IllegalArgumentException("Invalid model '" + text + "': expected torchscript:PATH");
    }
    TorchScriptSpec spec = TorchScriptSpec.of(path).forColumns(columns);
    spec.check(null, outputs);
    return spec;
  }

  /** The path of {@code torchscript:PATH}; null for another form. */
  public static String torchScriptPath(String text) {
    if (text == null
        || !text.trim().toLowerCase(Locale.ROOT).startsWith(TorchScriptSpec.TYPE + ":")) {
      return null;
    }
    String path = text.trim().substring(TorchScriptSpec.TYPE.length() + 1).trim();
    if (path.isEmpty()) {
      throw new IllegalArgumentException(
          "Invalid model '" + text + "': torchscript:PATH needs the file's path");
    }
    return path;
  }

  /**
   * As {@link #model(String, List, long[][], int, Activation, float)}, for inputs that may be token
   * sequences: the sequence models {@code embed:DIM} ({@link EmbedSpec}) and {@code
   * transformer:layers=L,dim=D,heads=H[,ff=F]} ({@link TransformerSpec}; {@code ff} defaults to
   * {@code 4 * dim}) are built for {@code sequence}'s vocabulary size and maximum length. Their
   * input is one sequence feature column, which the batches hold as two tensors, {@code ids [B, T]}
   * int64 and {@code mask [B, T]} float32, {@code T <= sequence.maxLength()}; {@code shapes} and
   * {@code columns} are not read for them (the caller checks that there is one sequence column).
   * {@code activation} is the Transformer's feed-forward activation (null: ReLU, PyTorch's default;
   * relu or gelu), {@code dropout} both models' dropout rate (0: none). The other forms ignore
   * {@code sequence}.
   *
   * @param sequence the vocabulary size and maximum length; null when the features hold no sequence
   *     column (a sequence model is then refused, naming what is missing)
   * @throws IllegalArgumentException naming the value and what is allowed
   */
  public static ModelSpec model(
      String text,
      List<String> columns,
      long[][] shapes,
      int outputs,
      Activation activation,
      float dropout,
      SequenceInput sequence) {
    ModelSpec seq = sequenceModel(text, outputs, activation, dropout, sequence);
    if (seq != null) {
      return seq;
    }
    if (text != null
        && text.trim().toLowerCase(Locale.ROOT).startsWith(TorchScriptSpec.TYPE + ":")) {
      String path = text.trim().substring(TorchScriptSpec.TYPE.length() + 1).trim();
      if (path.isEmpty()) {
        throw new IllegalArgumentException(
            "Invalid model '" + text + "': torchscript:PATH needs the file's path");
      }
      Shape[] s = new Shape[shapes.length];
      for (int i = 0; i < s.length; i++) {
        s[i] = new Shape(shapes[i]);
      }
      TorchScriptSpec spec = TorchScriptSpec.of(path, s);
      spec.check(columns, outputs);
      return spec;
    }
    String t = text == null ? "" : text.trim().toLowerCase(Locale.ROOT);
    int colon = t.indexOf(':');
    String kind = colon < 0 ? t : t.substring(0, colon);
    String args = colon < 0 ? "" : t.substring(colon + 1).trim();
    try {
      switch (kind) {
        case "mlp":
        case "linear":
          {
            int[] hidden = kind.equals("linear") ? new int[0] : ints(args, text);
            if (kind.equals("linear") && !args.isEmpty()) {
              throw invalid(text);
            }
            return new MlpSpec(
                shapes,
                hidden,
                outputs,
                activation == null ? Activation.RELU : activation,
                dropout);
          }
        case "cnn":
          {
            long[] image = image(shapes, text);
            int[] filters = args.isEmpty() ? new int[] {32, 64} : ints(args, text);
            return new CnnSpec(image, filters, 128, outputs, dropout > 0 ? dropout : 0.25f);
          }
        case "resnet":
          {
            long[] image = image(shapes, text);
            int depth = args.isEmpty() ? 18 : Integer.parseInt(args);
            return new ResNetSpec(image, depth, outputs);
          }
        default:
          throw invalid(text);
      }
    } catch (NumberFormatException e) {
      throw invalid(text);
    } catch (IllegalArgumentException e) {
      if (e.getMessage() != null && e.getMessage().startsWith("Invalid model '")) {
        throw e;
      }
      throw new IllegalArgumentException("Invalid model '" + text + "': " + e.getMessage(), e);
    }
  }

  /**
   * Whether {@code text} names a sequence model ({@code embed:...}, {@code transformer:...}), which
   * reads one column of token ids and needs a {@link SequenceInput}.
   */
  public static boolean isSequenceModel(String text) {
    if (text == null) {
      return false;
    }
    String t = text.trim();
    int colon = t.indexOf(':');
    String kind = (colon < 0 ? t : t.substring(0, colon)).trim().toLowerCase(Locale.ROOT);
    return kind.equals(EmbedSpec.TYPE) || kind.equals(TransformerSpec.TYPE);
  }

  /** A sequence model for {@code text}, or null if it names another kind. */
  private static ModelSpec sequenceModel(
      String text, int outputs, Activation activation, float dropout, SequenceInput sequence) {
    if (text == null) {
      return null;
    }
    String t = text.trim();
    int colon = t.indexOf(':');
    String kind = (colon < 0 ? t : t.substring(0, colon)).trim().toLowerCase(Locale.ROOT);
    if (!kind.equals(EmbedSpec.TYPE) && !kind.equals(TransformerSpec.TYPE)) {
      return null;
    }
    String args = colon < 0 ? "" : t.substring(colon + 1).trim();
    String form = kind.equals(EmbedSpec.TYPE) ? "embed:DIM (e.g. embed:64)" : TRANSFORMER_FORM;
    if (sequence == null) {
      throw new IllegalArgumentException(
          "Invalid model '"
              + text
              + "': "
              + kind
              + " needs a sequence feature column, with the vocabulary size and the maximum"
              + " sequence length");
    }
    if (kind.equals(EmbedSpec.TYPE)) {
      if (args.isEmpty()) {
        throw new IllegalArgumentException(
            "Invalid model '" + text + "': missing the embedding size: expected " + form);
      }
      int dim = positiveInt(text, "the embedding size", args, form);
      return new EmbedSpec(sequence.vocabSize(), sequence.maxLength(), dim, outputs, dropout);
    }
    Map<String, Integer> kv = new LinkedHashMap<>();
    if (!args.isEmpty()) {
      for (String part : args.split(",")) {
        int eq = part.indexOf('=');
        String key = (eq < 0 ? part : part.substring(0, eq)).trim().toLowerCase(Locale.ROOT);
        if (!List.of("layers", "dim", "heads", "ff").contains(key)) {
          throw new IllegalArgumentException(
              "Invalid model '"
                  + text
                  + "': unknown key '"
                  + key
                  + "': expected layers, dim, heads and optionally ff ("
                  + form
                  + ")");
        }
        if (eq < 0) {
          throw new IllegalArgumentException(
              "Invalid model '" + text + "': " + key + " needs a value: expected " + form);
        }
        if (kv.put(key, positiveInt(text, key, part.substring(eq + 1).trim(), form)) != null) {
          throw new IllegalArgumentException(
              "Invalid model '" + text + "': " + key + " is given twice");
        }
      }
    }
    for (String key : List.of("layers", "dim", "heads")) {
      if (!kv.containsKey(key)) {
        throw new IllegalArgumentException(
            "Invalid model '" + text + "': missing " + key + ": expected " + form);
      }
    }
    int dim = kv.get("dim");
    int heads = kv.get("heads");
    if (dim % heads != 0) {
      throw new IllegalArgumentException(
          "Invalid model '"
              + text
              + "': heads="
              + heads
              + " does not divide dim="
              + dim
              + " (each head gets dim / heads values)");
    }
    Activation act = activation == null ? Activation.RELU : activation;
    if (act != Activation.RELU && act != Activation.GELU) {
      throw new IllegalArgumentException(
          "Invalid activation '"
              + act.name().toLowerCase(Locale.ROOT)
              + "' for model '"
              + text
              + "': a Transformer's feed-forward takes relu or gelu");
    }
    return new TransformerSpec(
        sequence.vocabSize(),
        sequence.maxLength(),
        kv.get("layers"),
        dim,
        heads,
        kv.getOrDefault("ff", 4 * dim),
        outputs,
        act,
        dropout);
  }

  private static int positiveInt(String text, String what, String value, String form) {
    try {
      int v = Integer.parseInt(value);
      if (v > 0) {
        return v;
      }
    } catch (NumberFormatException e) {
      // the message below
    }
    throw new IllegalArgumentException(
        "Invalid model '"
            + text
            + "': "
            + what
            + " '"
            + value
            + "' is not a positive integer: expected "
            + form);
  }

  private static long[] image(long[][] shapes, String text) {
    if (shapes.length != 1 || shapes[0].length != 3) {
      throw new IllegalArgumentException(
          "Invalid model '"
              + text
              + "': a CNN needs one feature column shaped"
              + " CxHxW (e.g. --features pixels:1x28x28), got "
              + shapesString(shapes));
    }
    return shapes[0];
  }

  private static IllegalArgumentException invalid(String text) {
    return new IllegalArgumentException("Invalid model '" + text + "': expected " + MODEL_FORMS);
  }

  private static int[] ints(String args, String text) {
    if (args.isEmpty()) {
      return new int[0];
    }
    int[] out =
        Arrays.stream(args.split(",")).map(String::trim).mapToInt(Integer::parseInt).toArray();
    for (int v : out) {
      if (v <= 0) {
        throw invalid(text);
      }
    }
    return out;
  }

  /**
   * A readable one-line description, e.g. {@code mlp(inputShapes=64, hidden=128,64, outputs=10,
   * activation=relu)}.
   */
  public static String describe(ModelSpec spec) {
    Map<String, String> p = new LinkedHashMap<>(spec.toProperties());
    String type = p.remove("type");
    p.values().removeIf(v -> v == null || v.isEmpty());
    if ("0.0".equals(p.get("dropout"))) {
      p.remove("dropout");
    }
    StringBuilder sb = new StringBuilder(type).append('(');
    boolean first = true;
    for (Map.Entry<String, String> e : p.entrySet()) {
      sb.append(first ? "" : ", ").append(e.getKey()).append('=').append(e.getValue());
      first = false;
    }
    return sb.append(')').toString();
  }

  /** Parses {@code 64}, {@code 28x28x1} (or {@code 28,28,1}) into dimensions. */
  public static long[] shape(String text) {
    try {
      long[] dims =
          Arrays.stream(text.trim().split("[x,]"))
              .map(String::trim)
              .mapToLong(Long::parseLong)
              .toArray();
      for (long d : dims) {
        if (d <= 0) {
          throw new NumberFormatException();
        }
      }
      if (dims.length == 0) {
        throw new NumberFormatException();
      }
      return dims;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "Invalid shape '" + text + "': expected positive sizes like 64 or 28x28x1");
    }
  }

  /** {@code 64}, {@code 1x8x8}; several shapes joined with {@code ;}. */
  public static String shapesString(long[][] shapes) {
    StringBuilder sb = new StringBuilder();
    for (long[] s : shapes) {
      if (sb.length() > 0) {
        sb.append(';');
      }
      sb.append(shapeString(s));
    }
    return sb.toString();
  }

  public static String shapeString(long[] s) {
    StringBuilder sb = new StringBuilder();
    for (long d : s) {
      if (sb.length() > 0) {
        sb.append('x');
      }
      sb.append(d);
    }
    return sb.toString();
  }

  /**
   * An optimizer: {@code adam}, {@code adamw} or {@code sgd} (SGD with {@code momentum}), with the
   * learning rate, optional warm-up steps and a cosine decay over {@code decaySteps} (0: constant).
   */
  public static OptimizerSpec optimizer(
      String name,
      float learningRate,
      float momentum,
      float weightDecay,
      long warmupSteps,
      long decaySteps) {
    OptimizerSpec.Builder b;
    switch (name == null ? "" : name.trim().toLowerCase(Locale.ROOT)) {
      case "adam":
        b = OptimizerSpec.adam();
        break;
      case "adamw":
        b = OptimizerSpec.adamW();
        break;
      case "sgd":
        b = OptimizerSpec.sgd().optMomentum(momentum);
        break;
      default:
        throw new IllegalArgumentException(
            "Invalid optimizer '" + name + "': expected adam, adamw or sgd");
    }
    b.optLearningRate(learningRate);
    if (weightDecay > 0) {
      b.optWeightDecay(weightDecay);
    }
    if (warmupSteps > 0) {
      b.optWarmupSteps(warmupSteps);
    }
    if (decaySteps > 0) {
      b.optCosineDecay(decaySteps, 0f);
    }
    return b.build();
  }
}
