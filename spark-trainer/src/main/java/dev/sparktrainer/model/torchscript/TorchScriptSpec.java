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
import java.io.Serializable;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;

/**
 * The user's own PyTorch model, as a TorchScript file ({@code --model torchscript:PATH}; {@code
 * TorchScriptSpec.of(path)} in the Builder; {@code modelSpec = "torchscript:PATH"} in the
 * Estimator). The module's forward takes the feature columns in order: a float32 or int64 column as
 * one tensor ({@code [batch, ...shape]}), a sequence column as two, its values ({@code [batch, T]}:
 * int64 ids, or float32) then its mask ({@code [batch, T]} float32), T varying per batch (see
 * {@link Column}); it returns the logits {@code [batch, classes]} (or {@code [batch]} / {@code
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

  private static final String FLOAT32 = "float32";
  private static final String INT64 = "int64";

  /** A recorded dimension that varies from batch to batch (a sequence's length). */
  static final long VARIABLE = -1;

  private final TorchScriptFile file;
  private final String source;

  /** Per forward argument: the per-example shape (a sequence's: {@code [maxLength]}). */
  private final long[][] inputDims;

  /** Per forward argument: its data type, {@code float32} or {@code int64}. */
  private final String[] inputTypes;

  /** The feature columns the arguments come from ({@link #forColumns}); empty: float32 each. */
  private final List<Column> columns;

  private final List<String> bufferNames;

  /** The model's outputs per example (classes; 1 for one output); 0 until known. */
  private int outputs;

  private TorchScriptSpec(
      TorchScriptFile file,
      String source,
      long[][] inputDims,
      String[] inputTypes,
      List<Column> columns,
      List<String> bufferNames,
      int outputs) {
    this.file = file;
    this.source = source;
    this.inputDims = inputDims;
    this.inputTypes = inputTypes;
    this.columns = List.copyOf(columns);
    this.bufferNames = List.copyOf(bufferNames);
    this.outputs = outputs;
  }

  /**
   * A feature column as the batches hold it, and so the forward arguments it becomes: a float32 or
   * int64 column of a fixed shape is one argument {@code [batch, ...shape]} of its type; a sequence
   * column is two, its values ({@code [batch, T]}: int64 for token ids, float32 for a {@code seq}
   * column) then its mask ({@code [batch, T]} float32, 1 for real positions), {@code T} the batch's
   * longest sequence (at most {@code maxLength}), which varies from batch to batch.
   *
   * @param name the column's name (for messages)
   * @param kind what it holds
   * @param shape a fixed column's per-example shape; a sequence's {@code [maxLength]}
   * @param vocabSize token ids' vocabulary size ({@code [0, vocabSize)}); 0: unchecked
   */
  public record Column(String name, Kind kind, long[] shape, long vocabSize)
      implements Serializable {
    private static final long serialVersionUID = 1L;

    /** What a column holds. */
    public enum Kind {
      /** float32 values of a fixed shape: one float32 argument. */
      FLOAT32("float32"),
      /** int64 values of a fixed shape: one int64 argument. */
      INT64("int64"),
      /** A sequence of token ids ({@code COL:ids}): int64 ids, then the float32 mask. */
      IDS("ids"),
      /** A sequence of float values ({@code COL:seq}): float32 values, then the float32 mask. */
      SEQ("seq");

      private final String text;

      Kind(String text) {
        this.text = text;
      }

      /** Its name on the command line ({@code --features COL:ids}) and in properties. */
      public String text() {
        return text;
      }

      static Kind parse(String text) {
        for (Kind k : values()) {
          if (k.text.equals(text)) {
            return k;
          }
        }
        throw new IllegalArgumentException(
            "Invalid column kind '" + text + "': expected float32, int64, ids or seq");
      }
    }

    /** A float32 column of per-example {@code shape}. */
    public static Column floats(String name, long... shape) {
      return new Column(name, Kind.FLOAT32, shape, 0);
    }

    /** An int64 column of per-example {@code shape}. */
    public static Column int64(String name, long... shape) {
      return new Column(name, Kind.INT64, shape, 0);
    }

    /**
     * A column of token-id sequences of at most {@code maxLength} ids in {@code [0, vocabSize)}.
     */
    public static Column ids(String name, int maxLength, long vocabSize) {
      return new Column(name, Kind.IDS, new long[] {maxLength}, vocabSize);
    }

    /** A column of float sequences of at most {@code maxLength} values. */
    public static Column sequence(String name, int maxLength) {
      return new Column(name, Kind.SEQ, new long[] {maxLength}, 0);
    }

    public Column {
      shape = shape.clone();
    }

    @Override
    public long[] shape() {
      return shape.clone();
    }

    /** Whether it is a sequence (two arguments: values, mask). */
    public boolean sequence() {
      return kind == Kind.IDS || kind == Kind.SEQ;
    }

    /** A sequence's maximum length; 0 for a fixed shape. */
    public int maxLength() {
      return sequence() ? (int) shape[0] : 0;
    }

    @Override
    public String toString() {
      return name
          + ": "
          + (sequence()
              ? kind.text() + " [<=" + shape[0] + "]"
              : kind.text() + " " + shapeText(shape));
    }
  }

  /** One forward argument as the batches send it: from {@code column}, its {@code role}. */
  private record Arg(Column column, String role, String dtype, long[] dims) {
    boolean variable() {
      return column.sequence();
    }

    /** "feature column 'x'" + " sends its mask as" / " is". */
    String sends() {
      return "feature column '"
          + column.name()
          + "' "
          + (role == null ? "is " : "sends its " + role + " as ")
          + dtype;
    }
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
    String[] types;
    TorchScriptFile.Metadata meta = file.metadata();
    if (inputShapes.length > 0) {
      dims = new long[inputShapes.length][];
      types = new String[inputShapes.length];
      for (int i = 0; i < dims.length; i++) {
        dims[i] = inputShapes[i].getShape();
        types[i] = FLOAT32;
      }
    } else if (meta != null && !meta.inputs().isEmpty()) {
      dims = new long[meta.inputs().size()][];
      types = new String[dims.length];
      for (int i = 0; i < dims.length; i++) {
        dims[i] = meta.inputs().get(i).shape().clone();
        types[i] = meta.inputs().get(i).dtype();
      }
    } else {
      throw new IllegalArgumentException(
          "Invalid model torchscript:"
              + file.source()
              + ": the file does not record its inputs' shapes (it was not written by"
              + " python/export_torchscript.py): give them, TorchScriptSpec.of(path, new"
              + " Shape(...), ...)");
    }
    for (int i = 0; i < dims.length; i++) {
      for (int j = 0; j < dims[i].length; j++) {
        // -1: a length that varies per batch (the export helper's variable_length)
        boolean variable = dims[i][j] == VARIABLE && inputShapes.length == 0;
        if (dims[i][j] <= 0 && !variable) {
          throw new IllegalArgumentException(
              "Invalid model torchscript:"
                  + file.source()
                  + ": input shape "
                  + Arrays.toString(dims[i])
                  + " must have positive dimensions");
        }
      }
    }
    int outputs = 0;
    if (meta != null && meta.outputShape().length <= 1) {
      outputs = meta.outputShape().length == 0 ? 1 : (int) meta.outputShape()[0];
    }
    return new TorchScriptSpec(
        file,
        file.source(),
        dims,
        types,
        List.of(),
        meta == null ? List.of() : meta.buffers(),
        outputs);
  }

  /**
   * This module fed from {@code columns}, in order (see {@link Column}: a sequence column is two
   * forward arguments, its values then its mask). {@link #check} then matches the forward's
   * recorded arguments (count, data types, shapes; a sequence's must have been exported with a
   * variable length) against them; predictions feed the model what training fed it.
   */
  public TorchScriptSpec forColumns(List<Column> columns) {
    List<long[]> dims = new ArrayList<>();
    List<String> types = new ArrayList<>();
    for (Column c : columns) {
      for (Arg a : args(c)) {
        dims.add(a.dims());
        types.add(a.dtype());
      }
    }
    return new TorchScriptSpec(
        file,
        source,
        dims.toArray(new long[0][]),
        types.toArray(new String[0]),
        columns,
        bufferNames,
        outputs);
  }

  /** The feature columns it is fed from ({@link #forColumns}); empty: float32 columns, one each. */
  public List<Column> columns() {
    return columns;
  }

  /** Per forward argument, its data type: {@code float32} or {@code int64}. */
  public List<String> inputTypes() {
    return List.of(inputTypes);
  }

  private static List<Arg> args(Column c) {
    switch (c.kind()) {
      case FLOAT32:
        return List.of(new Arg(c, null, FLOAT32, c.shape()));
      case INT64:
        return List.of(new Arg(c, null, INT64, c.shape()));
      case IDS:
        return List.of(new Arg(c, "ids", INT64, c.shape()), new Arg(c, "mask", FLOAT32, c.shape()));
      default:
        return List.of(
            new Arg(c, "values", FLOAT32, c.shape()), new Arg(c, "mask", FLOAT32, c.shape()));
    }
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
   * {@code [batch, outputs]} (or {@code [batch]} for one output). Sequence columns' arguments must
   * have been exported with a variable length; forward is run with {@code T} at the maximum length
   * and at 1.
   *
   * @param columns the feature columns' names (for messages), in forward-argument order, when they
   *     are float32 columns, one argument each; ignored when the spec has its {@link #forColumns
   *     columns}
   * @param outputs the outputs the loss needs (classes; 1 for regression and binary; 0: any number
   *     of classes)
   * @throws IllegalArgumentException naming the column, the argument and what differs
   */
  public void check(List<String> columns, int outputs) {
    String what = "Invalid model torchscript:" + source + ": ";
    List<Arg> args = new ArrayList<>();
    if (!this.columns.isEmpty()) {
      for (Column c : this.columns) {
        args.addAll(args(c));
      }
    } else {
      for (int i = 0; i < inputDims.length; i++) {
        if (Arrays.stream(inputDims[i]).anyMatch(d -> d == VARIABLE)) {
          throw new IllegalArgumentException(
              what
                  + "argument "
                  + (i + 1)
                  + " of its forward was exported with a variable length (shape "
                  + shapeText(inputDims[i])
                  + "), for a sequence column, but the feature columns are not known: give them"
                  + " (TorchScriptSpec.forColumns, a DatasetSpec with the sequence column, or"
                  + " --features COL:ids)");
        }
        String name = columns != null && i < columns.size() ? columns.get(i) : "feature " + i;
        args.add(new Arg(Column.floats(name, inputDims[i]), null, FLOAT32, inputDims[i]));
      }
    }
    TorchScriptFile.Metadata meta = file == null ? null : file.metadata();
    if (meta != null && !meta.inputs().isEmpty()) {
      checkArguments(what, meta.inputs(), args);
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
      // A sequence's T varies per batch: at its maximum length, and at 1 (a module traced at one
      // length fails at another).
      boolean longer = args.stream().anyMatch(a -> a.variable() && a.dims()[0] > 1);
      for (boolean one : longer ? new boolean[] {false, true} : new boolean[] {true}) {
        NDList x = new NDList();
        StringBuilder shapes = new StringBuilder();
        for (Arg a : args) {
          long t = one ? 1 : a.dims()[0];
          long[] d = a.variable() ? new long[] {t} : a.dims();
          Shape shape = new Shape(2).addAll(new Shape(d));
          boolean mask = "mask".equals(a.role());
          x.add(
              mask
                  ? m.ones(shape)
                  : m.zeros(
                      shape,
                      INT64.equals(a.dtype())
                          ? ai.djl.ndarray.types.DataType.INT64
                          : ai.djl.ndarray.types.DataType.FLOAT32));
          shapes
              .append(shapes.length() == 0 ? "" : ", ")
              .append(a.column().name())
              .append(a.role() == null ? "" : " " + a.role())
              .append(": ")
              .append(a.variable() ? "T=" + t : shapeText(d))
              .append(INT64.equals(a.dtype()) ? " int64" : "");
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
        checkOutput(what, out.head(), outputs);
      }
    }
  }

  private void checkOutput(String what, NDArray y, int outputs) {
    long[] s = y.getShape().getShape();
    boolean ok =
        s.length >= 1
            && s[0] == 2
            && (s.length == 2 && (s[1] == outputs || outputs <= 0)
                || outputs == 1 && s.length == 1);
    if (ok) {
      this.outputs = s.length == 1 ? 1 : (int) s[1];
      return;
    }
    throw new IllegalArgumentException(
        what
            + "its output is shaped "
            + y.getShape()
            + " for a batch of 2; expected [batch, "
            + (outputs <= 0 ? "classes" : outputs)
            + "]"
            + (outputs == 1 ? " or [batch]" : outputs <= 0 ? "" : " (" + outputs + " classes)"));
  }

  /** The recorded forward arguments against what the feature columns send. */
  private static void checkArguments(
      String what, List<TorchScriptFile.Input> inputs, List<Arg> args) {
    boolean sequences = args.stream().anyMatch(Arg::variable);
    if (inputs.size() != args.size()) {
      String takes =
          what
              + "its forward takes "
              + inputs.size()
              + " input(s) ("
              + inputs.stream().map(TorchScriptFile.Input::name).collect(Collectors.joining(", "))
              + ")";
      if (!sequences) {
        throw new IllegalArgumentException(
            takes
                + " but there are "
                + args.size()
                + " feature column(s) ("
                + args.stream().map(a -> a.column().name()).collect(Collectors.joining(", "))
                + ")");
      }
      throw new IllegalArgumentException(
          takes
              + " but the feature columns send "
              + args.size()
              + " tensor(s) ("
              + args.stream()
                  .map(a -> a.column().name() + (a.role() == null ? "" : " " + a.role()))
                  .collect(Collectors.joining(", "))
              + "): a sequence column is two arguments, its "
              + "ids (or values) then its mask");
    }
    for (int i = 0; i < args.size(); i++) {
      TorchScriptFile.Input in = inputs.get(i);
      Arg a = args.get(i);
      String arg = "argument " + (i + 1) + " (" + in.name() + ") of its forward ";
      if (!a.dtype().equals(in.dtype())) {
        throw new IllegalArgumentException(what + arg + "is " + in.dtype() + " but " + a.sends());
      }
      long[] recorded = in.shape();
      if (recorded.length == 0) {
        continue; // not recorded
      }
      if (a.variable()) {
        if (recorded.length != 1 || recorded[0] != VARIABLE) {
          throw new IllegalArgumentException(
              what
                  + arg
                  + "was exported for examples shaped "
                  + shapeText(recorded)
                  + " but feature column '"
                  + a.column().name()
                  + "' is a sequence whose length T varies from batch to batch (at most "
                  + a.column().maxLength()
                  + "): its "
                  + a.role()
                  + " are [batch, T]; export the module with the sequence's arguments of a"
                  + " variable length (python/export_torchscript.py: export(...,"
                  + " variable_length=(...)), --variable-length)");
        }
        continue;
      }
      boolean same = recorded.length == a.dims().length;
      for (int j = 0; same && j < recorded.length; j++) {
        same = recorded[j] == a.dims()[j] || recorded[j] == VARIABLE;
      }
      if (!same) {
        throw new IllegalArgumentException(
            what
                + arg
                + "was exported for examples shaped "
                + shapeText(recorded)
                + " but feature column '"
                + a.column().name()
                + "' is shaped "
                + shapeText(a.dims()));
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
    if (!columns.isEmpty()) {
      m.put("inputTypes", String.join(";", inputTypes));
      m.put(
          "columns",
          columns.stream()
              .map(
                  c ->
                      c.kind().text()
                          + ":"
                          + shapeText(c.shape())
                          + ":"
                          + c.vocabSize()
                          + ":"
                          + URLEncoder.encode(c.name(), StandardCharsets.UTF_8))
              .collect(Collectors.joining(";")));
    }
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
    String[] types = new String[dims.length];
    Arrays.fill(types, FLOAT32);
    String typeText = props.get("inputTypes");
    if (typeText != null && !typeText.isBlank()) {
      types = typeText.trim().split(";");
    }
    List<Column> columns = new ArrayList<>();
    String columnText = props.get("columns");
    if (columnText != null && !columnText.isBlank()) {
      for (String c : columnText.trim().split(";")) {
        String[] f = c.split(":", 4);
        if (f.length != 4) {
          throw new IllegalArgumentException(
              "Invalid model spec: key 'columns' holds '"
                  + c
                  + "', expected KIND:SHAPE:VOCAB:NAME");
        }
        columns.add(
            new Column(
                URLDecoder.decode(f[3], StandardCharsets.UTF_8),
                Column.Kind.parse(f[0]),
                Arrays.stream(f[1].split("x")).mapToLong(Long::parseLong).toArray(),
                Long.parseLong(f[2])));
      }
    }
    if (types.length != dims.length) {
      throw new IllegalArgumentException(
          "Invalid model spec: 'inputTypes' names "
              + types.length
              + " types for "
              + dims.length
              + " inputs in "
              + props);
    }
    return new TorchScriptSpec(
        null,
        props.getOrDefault("source", "(trained model)"),
        dims,
        types,
        columns,
        buffers.isBlank() ? List.of() : List.of(buffers.split(",")),
        outputs == null ? 0 : Integer.parseInt(outputs.trim()));
  }

  @Override
  public String toString() {
    return "torchscript:" + source;
  }
}
