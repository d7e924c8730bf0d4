package dev.sparktrainer.model.torchscript;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.training.ParameterStore;
import dev.sparktrainer.model.ModelSpec;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;

/**
 * The user's own PyTorch model, as a TorchScript file ({@code --model torchscript:PATH}; {@code
 * TorchScriptSpec.of(path)} in the Builder; {@code modelSpec = "torchscript:PATH"} in the
 * Estimator). The module's forward takes the feature columns in order, one tensor each ({@code
 * [batch, ...shape]}), and returns the logits {@code [batch, classes]} (or {@code [batch]} / {@code
 * [batch, 1]} for one output), or a tuple whose first element is that.
 *
 * <p>The file is read once, on the driver (any Hadoop file system), and its bytes travel with the
 * spec to the executors, which load the module onto their devices ({@link #build}). A trained
 * model's spec carries no file: its module, with the trained weights and buffers, is the model's
 * parameters ({@link #restore}).
 */
public final class TorchScriptSpec implements ModelSpec {
  private static final long serialVersionUID = 1L;

  /** The {@code type} of its properties, and the prefix of its text form. */
  public static final String TYPE = "torchscript";

  private final TorchScriptFile file;
  private final String source;
  private final long[][] inputDims;
  private final List<String> bufferNames;

  /** The model's outputs per example (classes; 1 for one output); 0 until known. */
  private int outputs;

  private TorchScriptSpec(
      TorchScriptFile file,
      String source,
      long[][] inputDims,
      List<String> bufferNames,
      int outputs) {
    this.file = file;
    this.source = source;
    this.inputDims = inputDims;
    this.bufferNames = List.copyOf(bufferNames);
    this.outputs = outputs;
  }

  /**
   * The module at {@code path}, its inputs shaped as the export helper recorded them.
   *
   * @throws IllegalArgumentException when the file is not a TorchScript file, or carries no input
   *     shapes (saved without {@code python/export_torchscript.py}: give them, {@link #of(String,
   *     Shape...)})
   */
  public static TorchScriptSpec of(String path) {
    return of(TorchScriptFile.read(path, hadoopConf()), new Shape[0]);
  }

  /** The module at {@code path}, taking features of these per-example shapes. */
  public static TorchScriptSpec of(String path, Shape... inputShapes) {
    return of(TorchScriptFile.read(path, hadoopConf()), inputShapes);
  }

  /**
   * The module of {@code file}, taking features of these per-example shapes (none: those the export
   * helper recorded).
   */
  public static TorchScriptSpec of(TorchScriptFile file, Shape... inputShapes) {
    long[][] dims;
    TorchScriptFile.Metadata meta = file.metadata();
    if (inputShapes.length > 0) {
      dims = new long[inputShapes.length][];
      for (int i = 0; i < dims.length; i++) {
        dims[i] = inputShapes[i].getShape();
      }
    } else if (meta != null && !meta.inputs().isEmpty()) {
      dims = new long[meta.inputs().size()][];
      for (int i = 0; i < dims.length; i++) {
        dims[i] = meta.inputs().get(i).shape().clone();
      }
    } else {
      throw new IllegalArgumentException(
          "Invalid model torchscript:"
              + file.source()
              + ": the file does not record its inputs' shapes (it was not written by"
              + " python/export_torchscript.py): give them, TorchScriptSpec.of(path, new"
              + " Shape(...), ...)");
    }
    for (long[] d : dims) {
      for (long x : d) {
        if (x <= 0) {
          throw new IllegalArgumentException(
              "Invalid model torchscript:"
                  + file.source()
                  + ": input shape "
                  + Arrays.toString(d)
                  + " must have positive dimensions");
        }
      }
    }
    int outputs = 0;
    if (meta != null && meta.outputShape().length <= 1) {
      outputs = meta.outputShape().length == 0 ? 1 : (int) meta.outputShape()[0];
    }
    return new TorchScriptSpec(
        file, file.source(), dims, meta == null ? List.of() : meta.buffers(), outputs);
  }

  /** The Hadoop configuration of the active Spark session, or the default one. */
  static Configuration hadoopConf() {
    try {
      return org.apache.spark.sql.SparkSession.getActiveSession()
          .map(s -> s.sparkContext().hadoopConfiguration())
          .getOrElse(Configuration::new);
    } catch (RuntimeException | LinkageError e) {
      return new Configuration();
    }
  }

  /** The file (null for a trained model's spec, whose module is in its parameters). */
  public TorchScriptFile file() {
    return file;
  }

  /** The model's outputs per example (classes; 1 for one output), or 0 while unknown. */
  public int outputs() {
    return outputs;
  }

  /** Where the module was read from. */
  public String source() {
    return source;
  }

  @Override
  public Shape[] inputShapes() {
    Shape[] out = new Shape[inputDims.length];
    for (int i = 0; i < out.length; i++) {
      out[i] = new Shape(inputDims[i]);
    }
    return out;
  }

  /**
   * Not available: a TorchScript module is loaded onto a device ({@link #build}).
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Block newBlock() {
    throw new UnsupportedOperationException(
        "A TorchScript model is loaded onto a device: use build(manager)");
  }

  @Override
  public Block build(NDManager manager) {
    if (file == null) {
      throw new IllegalStateException(
          "The spec of trained TorchScript model "
              + source
              + " has no file: its module is in the model's parameters (restore)");
    }
    return TorchScriptBlock.load((PtNDManager) manager, file);
  }

  /**
   * The module saved in {@code parameters} ({@code PtSymbolBlock.saveParameters}: a version byte,
   * the length, the TorchScript file), with its trained weights and buffers.
   */
  @Override
  public Block restore(NDManager manager, byte[] parameters) throws MalformedModelException {
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(parameters))) {
      in.readByte();
      long size = in.readLong();
      if (size != parameters.length - 9L) {
        throw new MalformedModelException(
            "The TorchScript model's parameters hold "
                + (parameters.length - 9L)
                + " bytes of module, their header says "
                + size);
      }
    } catch (IOException e) {
      throw new MalformedModelException("The TorchScript model's parameters are truncated", e);
    }
    byte[] module = moduleOf(parameters);
    TorchScriptBlock block = TorchScriptBlock.load((PtNDManager) manager, module, source);
    block.setBufferNames(bufferNames);
    return block;
  }

  /** The TorchScript file inside saved parameters (see {@link #restore}). */
  public static byte[] moduleOf(byte[] parameters) {
    return Arrays.copyOfRange(parameters, 9, parameters.length);
  }

  /**
   * Checks the module against the data before training, on the driver: its inputs (count, shapes
   * and data types where the export helper recorded them) against the feature columns, that some
   * parameter requires a gradient, and, on a batch of 2 zeros, that forward runs and its output is
   * {@code [batch, outputs]} (or {@code [batch]} for one output).
   *
   * @param columns the feature columns' names (for messages), in forward-argument order
   * @param outputs the outputs the loss needs (classes; 1 for regression and binary; 0: any number
   *     of classes)
   * @throws IllegalArgumentException naming the column, the argument and what differs
   */
  public void check(List<String> columns, int outputs) {
    String what = "Invalid model torchscript:" + source + ": ";
    List<String> cols = new ArrayList<>(columns == null ? List.of() : columns);
    while (cols.size() < inputDims.length) {
      cols.add("feature " + cols.size());
    }
    TorchScriptFile.Metadata meta = file == null ? null : file.metadata();
    if (meta != null && !meta.inputs().isEmpty()) {
      if (meta.inputs().size() != inputDims.length) {
        throw new IllegalArgumentException(
            what
                + "its forward takes "
                + meta.inputs().size()
                + " input(s) ("
                + meta.inputs().stream()
                    .map(TorchScriptFile.Input::name)
                    .collect(Collectors.joining(", "))
                + ") but there are "
                + inputDims.length
                + " feature column(s) ("
                + String.join(", ", cols.subList(0, inputDims.length))
                + ")");
      }
      for (int i = 0; i < inputDims.length; i++) {
        TorchScriptFile.Input in = meta.inputs().get(i);
        if (!"float32".equals(in.dtype())) {
          throw new IllegalArgumentException(
              what
                  + "argument "
                  + (i + 1)
                  + " ("
                  + in.name()
                  + ") of its forward is "
                  + in.dtype()
                  + " but feature column '"
                  + cols.get(i)
                  + "' is float32");
        }
        if (in.shape().length > 0 && !Arrays.equals(in.shape(), inputDims[i])) {
          throw new IllegalArgumentException(
              what
                  + "argument "
                  + (i + 1)
                  + " ("
                  + in.name()
                  + ") of its forward was exported for examples shaped "
                  + shapeText(in.shape())
                  + " but feature column '"
                  + cols.get(i)
                  + "' is shaped "
                  + shapeText(inputDims[i]));
        }
      }
    }
    try (NDManager m = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        TorchScriptBlock block = (TorchScriptBlock) build(m)) {
      int trainable = 0;
      int params = 0;
      for (Parameter p : block.getParameters().values()) {
        if (p.getType() != Parameter.Type.RUNNING_MEAN
            && p.getType() != Parameter.Type.RUNNING_VAR) {
          params++;
        }
        trainable += p.requiresGradient() ? 1 : 0;
      }
      if (trainable == 0) {
        throw new IllegalArgumentException(
            what
                + "no parameter requires a gradient ("
                + params
                + " parameter(s), all frozen): there is nothing to train");
      }
      NDList x = new NDList();
      StringBuilder shapes = new StringBuilder();
      for (int i = 0; i < inputDims.length; i++) {
        x.add(m.zeros(new Shape(2).addAll(new Shape(inputDims[i]))));
        shapes
            .append(i == 0 ? "" : ", ")
            .append(cols.get(i))
            .append(": ")
            .append(shapeText(inputDims[i]));
      }
      NDList out;
      try {
        out = block.forward(new ParameterStore(m, false), x, false);
      } catch (EngineException e) {
        throw new IllegalArgumentException(
            what
                + "its forward fails on a batch of 2 examples shaped like the feature columns ("
                + shapes
                + "): "
                + TorchScriptBlock.firstLine(e.getMessage()),
            e);
      }
      if (out.isEmpty()) {
        throw new IllegalArgumentException(what + "its forward returns no tensor");
      }
      NDArray y = out.head();
      long[] s = y.getShape().getShape();
      boolean ok =
          s.length >= 1
              && s[0] == 2
              && (s.length == 2 && (s[1] == outputs || outputs <= 0)
                  || outputs == 1 && s.length == 1);
      if (ok) {
        this.outputs = s.length == 1 ? 1 : (int) s[1];
      }
      if (!ok) {
        throw new IllegalArgumentException(
            what
                + "its output is shaped "
                + y.getShape()
                + " for a batch of 2; expected [batch, "
                + (outputs <= 0 ? "classes" : outputs)
                + "]"
                + (outputs == 1
                    ? " or [batch]"
                    : outputs <= 0 ? "" : " (" + outputs + " classes)"));
      }
    }
  }

  private static String shapeText(long[] dims) {
    return Arrays.stream(dims).mapToObj(Long::toString).collect(Collectors.joining("x"));
  }

  @Override
  public Map<String, String> toProperties() {
    Map<String, String> m = ModelSpec.newProperties(TYPE);
    m.put("source", source);
    m.put(
        "inputShapes",
        Arrays.stream(inputDims).map(TorchScriptSpec::shapeText).collect(Collectors.joining(";")));
    m.put("buffers", String.join(",", bufferNames));
    if (outputs > 0) {
      m.put("outputs", Integer.toString(outputs));
    }
    return m;
  }

  /** A trained model's spec, from {@link #toProperties()}: its module is in the parameters. */
  public static TorchScriptSpec fromProperties(Map<String, String> props) {
    String shapes = props.get("inputShapes");
    if (shapes == null || shapes.isBlank()) {
      throw new IllegalArgumentException(
          "Invalid model spec: missing key 'inputShapes' in " + props);
    }
    String[] parts = shapes.trim().split(";");
    long[][] dims = new long[parts.length][];
    for (int i = 0; i < parts.length; i++) {
      dims[i] = Arrays.stream(parts[i].split("x")).mapToLong(Long::parseLong).toArray();
    }
    String buffers = props.getOrDefault("buffers", "");
    String outputs = props.get("outputs");
    return new TorchScriptSpec(
        null,
        props.getOrDefault("source", "(trained model)"),
        dims,
        buffers.isBlank() ? List.of() : List.of(buffers.split(",")),
        outputs == null ? 0 : Integer.parseInt(outputs.trim()));
  }

  @Override
  public String toString() {
    return "torchscript:" + source;
  }
}
