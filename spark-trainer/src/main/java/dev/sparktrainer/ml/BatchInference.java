package dev.sparktrainer.ml;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.training.loss.Loss;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.sequence.EmbedSpec;
import dev.sparktrainer.model.sequence.TransformerSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.metrics.EpochMetrics;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.TaskCompletionListener;

/**
 * Distributed batch inference with a {@link TrainedModel}: the model is broadcast once, each
 * executor builds its DJL block from it once (cached per JVM, shared by the executor's tasks), and
 * every partition is run through it in batches of {@code batchSize} rows — never row by row.
 *
 * <p>Why this file is long: it is one {@link Serializable} task, built on the driver and run on the
 * executors, and both halves share its fields: the driver half (the public {@code transform},
 * {@code evaluate} and {@code outputSchema}, and the schema checks that compute the column indices,
 * input shapes and image normalization) fills exactly what the executor half reads after
 * deserialization (the per-JVM model cache with its leases, batching rows into the model's inputs,
 * and turning outputs into prediction, probability and raw prediction columns or metrics). Split,
 * the shipped form and the checks that make it valid would live apart.
 *
 * <p>Feature columns may be ml Vectors (dense or sparse), arrays of numbers, or numbers; one column
 * per model input, or several columns concatenated when the model has one input (as after {@code
 * VectorAssembler}). Outputs: classification losses give {@code prediction} (the class index,
 * double), {@code probability} and {@code rawPrediction} (logits) vectors; {@code L2} gives the
 * predicted value(s) (a double for one output) and {@code rawPrediction}.
 */
public final class BatchInference implements Serializable {
  private static final long serialVersionUID = 1L;

  /**
   * Models built on this executor, by job; a few are kept (the oldest evicted first, and closed
   * once no task uses it any more).
   */
  private static final Map<String, Loaded> CACHE = new LinkedHashMap<>();

  /** Models kept per executor (tests lower it). */
  static volatile int cacheSize = 4;

  /**
   * Models built and batches run in this JVM (tests check: one build per executor, batches not
   * rows).
   */
  static final AtomicLong MODEL_LOADS = new AtomicLong();

  static final AtomicLong BATCHES = new AtomicLong();

  /** Models closed in this JVM. */
  static final AtomicLong MODEL_CLOSES = new AtomicLong();

  private final Broadcast<TrainedModel> model;
  private final String key;
  private final int[] columns;
  private final long[][] inputShapes;
  private final int batchSize;
  private final LossSpec loss;

  /**
   * Per-channel normalization of image-shaped feature columns (of {@link #columnShapes}), or null.
   */
  private ImageAugment inputMap;

  private long[][] columnShapes;

  /** A sequence model's {vocabulary size, maximum length} ({@link #sequenceInput}); else null. */
  private long[] sequence;

  /**
   * A TorchScript model's feature columns when some are int64 or sequences (each fed as in
   * training: a sequence as its values and mask); else null.
   */
  private TorchScriptSpec.Column[] typed;

  private BatchInference(
      Broadcast<TrainedModel> model,
      String key,
      int[] columns,
      long[][] inputShapes,
      int batchSize,
      LossSpec loss) {
    this.model = model;
    this.key = key;
    this.columns = columns;
    this.inputShapes = inputShapes;
    this.batchSize = batchSize;
    this.loss = loss;
  }

  /**
   * Adds the prediction columns to {@code df}.
   *
   * @param predictionCol name of the prediction column (double)
   * @param probabilityCol name of the probability vector column, or null for none (and for L2)
   * @param rawPredictionCol name of the raw output (logits) vector column, or null for none
   */
  public static Dataset<Row> transform(
      Dataset<Row> df,
      TrainedModel model,
      List<String> featureCols,
      int batchSize,
      String predictionCol,
      String probabilityCol,
      String rawPredictionCol) {
    return transform(
        df,
        model,
        featureCols,
        batchSize,
        predictionCol,
        probabilityCol,
        rawPredictionCol,
        null,
        null);
  }

  /**
   * {@link #transform}, with the feature columns (of per-example {@code columnShapes}) mapped by
   * {@code inputMap}'s {@link dev.sparktrainer.data.ImageAugment#inference() inference} steps
   * first: the per-channel normalization the model was trained with.
   */
  public static Dataset<Row> transform(
      Dataset<Row> df,
      TrainedModel model,
      List<String> featureCols,
      int batchSize,
      String predictionCol,
      String probabilityCol,
      String rawPredictionCol,
      ImageAugment inputMap,
      long[][] columnShapes) {
    StructType out =
        outputSchema(
            df.schema(), model, featureCols, predictionCol, probabilityCol, rawPredictionCol);
    BatchInference job =
        prepare(df, model, featureCols, batchSize).withInputMap(inputMap, columnShapes);
    boolean probability = probabilityCol != null && model.loss().hasAccuracy();
    boolean raw = rawPredictionCol != null;
    MapPartitionsFunction<Row, Row> f = rows -> job.predict(rows, probability, raw);
    return df.mapPartitions(f, Encoders.row(out));
  }

  /**
   * The schema {@link #transform} produces, checking the feature columns first.
   *
   * @throws IllegalArgumentException naming a missing or mistyped column, or an existing output
   *     column
   */
  public static StructType outputSchema(
      StructType in,
      TrainedModel model,
      List<String> featureCols,
      String predictionCol,
      String probabilityCol,
      String rawPredictionCol) {
    checkFeatureColumns(in, featureCols);
    StructType out = in;
    boolean classification = model.loss().hasAccuracy();
    for (String[] c :
        new String[][] {
          {predictionCol, "prediction"},
          {classification ? probabilityCol : null, "probability"},
          {rawPredictionCol, "rawPrediction"}
        }) {
      if (c[0] == null) {
        continue;
      }
      if (Arrays.asList(out.fieldNames()).contains(c[0])) {
        throw new IllegalArgumentException(
            "Output column '"
                + c[0]
                + "' ("
                + c[1]
                + ") already exists in the input: choose another name or drop it");
      }
      DataType t = c[1].equals("prediction") ? DataTypes.DoubleType : SQLDataTypes.VectorType();
      out = out.add(c[0], t, c[1].equals("prediction") ? false : true);
    }
    return out;
  }

  /**
   * Loss, accuracy and count of {@code df} against {@code labelCol}, with the model's training loss
   * (the same numbers the trainer reports for validation data).
   *
   * @return {@code {"loss", "accuracy", "count"}} (accuracy NaN for L2), and for L2 also {@code
   *     "mse", "mae", "r2"}
   */
  public static Map<String, Double> evaluate(
      Dataset<Row> df,
      TrainedModel model,
      List<String> featureCols,
      String labelCol,
      int batchSize) {
    return evaluate(df, model, featureCols, labelCol, batchSize, null, null);
  }

  /**
   * {@link #evaluate}, with the feature columns mapped first as in {@link #transform}'s variant.
   */
  public static Map<String, Double> evaluate(
      Dataset<Row> df,
      TrainedModel model,
      List<String> featureCols,
      String labelCol,
      int batchSize,
      ImageAugment inputMap,
      long[][] columnShapes) {
    checkFeatureColumns(df.schema(), featureCols);
    List<String> cols = new ArrayList<>(featureCols);
    cols.add(labelCol);
    Dataset<Row> selected =
        df.selectExpr(
            cols.stream().map(c -> "`" + c.replace("`", "``") + "`").toArray(String[]::new));
    BatchInference job =
        prepare(selected, model, featureCols, batchSize).withInputMap(inputMap, columnShapes);
    int labelIndex = featureCols.size();
    FlatMapFunction<Iterator<Row>, double[]> f =
        rows -> List.of(job.evaluate(rows, labelIndex)).iterator();
    double[] sums =
        selected
            .javaRDD()
            .mapPartitions(f)
            .fold(
                new double[3 + EpochMetrics.Regression.SUMS],
                (a, b) -> {
                  double[] c = new double[a.length];
                  for (int i = 0; i < c.length; i++) {
                    c[i] = a[i] + b[i];
                  }
                  return c;
                });
    Map<String, Double> m = new LinkedHashMap<>();
    m.put("loss", sums[2] > 0 ? sums[0] / sums[2] : Double.NaN);
    m.put("accuracy", sums[2] > 0 && model.loss().hasAccuracy() ? sums[1] / sums[2] : Double.NaN);
    m.put("count", sums[2]);
    if (model.loss() == LossSpec.L2) {
      double[] r = EpochMetrics.Regression.of(sums, 3, sums[2]);
      m.put("mse", r[0]);
      m.put("mae", r[1]);
      m.put("r2", r[2]);
    }
    return m;
  }

  static BatchInference prepare(
      Dataset<Row> df, TrainedModel model, List<String> featureCols, int batchSize) {
    if (batchSize < 1) {
      throw new IllegalArgumentException("Invalid batchSize " + batchSize + ": expected >= 1");
    }
    Shape[] shapes = model.spec().inputShapes();
    long[] sequence = sequenceInput(model.spec());
    if (sequence != null && featureCols.size() != 1) {
      throw new IllegalArgumentException(
          "The model reads one column of token ids; "
              + featureCols.size()
              + " feature columns were given ("
              + featureCols
              + ")");
    }
    if (sequence != null) {
      JavaSparkContext jsc = JavaSparkContext.fromSparkContext(df.sparkSession().sparkContext());
      List<String> names = Arrays.asList(df.schema().fieldNames());
      BatchInference job =
          new BatchInference(
              jsc.broadcast(model),
              UUID.randomUUID().toString(),
              new int[] {names.indexOf(featureCols.get(0))},
              new long[][] {{sequence[1]}},
              batchSize,
              model.loss());
      job.sequence = sequence;
      return job;
    }
    if (model.spec() instanceof TorchScriptSpec ts
        && ts.columns().stream().anyMatch(c -> c.kind() != TorchScriptSpec.Column.Kind.FLOAT32)) {
      List<TorchScriptSpec.Column> cols = ts.columns();
      if (cols.size() != featureCols.size()) {
        throw new IllegalArgumentException(
            "The model reads "
                + cols.size()
                + " feature column(s) ("
                + cols.stream()
                    .map(TorchScriptSpec.Column::toString)
                    .collect(java.util.stream.Collectors.joining(", "))
                + "); "
                + featureCols.size()
                + " were given ("
                + featureCols
                + "): give one column for each, in that order");
      }
      JavaSparkContext jsc = JavaSparkContext.fromSparkContext(df.sparkSession().sparkContext());
      List<String> names = Arrays.asList(df.schema().fieldNames());
      long[][] dims = cols.stream().map(TorchScriptSpec.Column::shape).toArray(long[][]::new);
      BatchInference job =
          new BatchInference(
              jsc.broadcast(model),
              UUID.randomUUID().toString(),
              featureCols.stream().mapToInt(names::indexOf).toArray(),
              dims,
              batchSize,
              model.loss());
      job.typed = cols.toArray(new TorchScriptSpec.Column[0]);
      return job;
    }
    if (shapes.length != featureCols.size() && shapes.length != 1) {
      throw new IllegalArgumentException(
          "The model has "
              + shapes.length
              + " inputs but "
              + featureCols.size()
              + " feature columns were given ("
              + featureCols
              + "): give one column per input");
    }
    List<String> names = Arrays.asList(df.schema().fieldNames());
    int[] idx = featureCols.stream().mapToInt(names::indexOf).toArray();
    long[][] dims = new long[shapes.length][];
    for (int i = 0; i < shapes.length; i++) {
      dims[i] = shapes[i].getShape();
    }
    long values = 0;
    for (Shape s : shapes) {
      values += s.size();
    }
    if (model.normalization() != null && model.normalization().size() != values) {
      throw new IllegalArgumentException(
          "The model's normalization covers "
              + model.normalization().size()
              + " feature values, its inputs take "
              + values);
    }
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(df.sparkSession().sparkContext());
    Broadcast<TrainedModel> b = jsc.broadcast(model);
    return new BatchInference(b, UUID.randomUUID().toString(), idx, dims, batchSize, model.loss());
  }

  /**
   * A sequence model's {vocabulary size, maximum length}: its one feature column holds token ids
   * (an array of integers), fed as ids and mask padded to the batch's longest; null for others.
   */
  private static long[] sequenceInput(ModelSpec spec) {
    if (spec instanceof EmbedSpec e) {
      return new long[] {e.vocabSize(), e.maxLength()};
    }
    if (spec instanceof TransformerSpec t) {
      return new long[] {t.vocabSize(), t.maxLength()};
    }
    return null;
  }

  /**
   * A batch of token-id rows as the trainer's batches hold them: ids {@code [n, T]} int64 padded
   * (with 0) to the longest row, at most the maximum length (longer rows are cut to it, as in
   * training), and the mask {@code [n, T]} float32.
   */
  private NDList sequenceInputs(NDManager scope, List<Row> rows) {
    int n = rows.size();
    int max = (int) sequence[1];
    long[][] ids = new long[n][];
    int t = 1;
    for (int r = 0; r < n; r++) {
      ids[r] = Features.ids(rows.get(r), columns[0], sequence[0]);
      t = Math.max(t, Math.min(ids[r].length, max));
    }
    long[] flat = new long[n * t];
    float[] mask = new float[n * t];
    for (int r = 0; r < n; r++) {
      int m = Math.min(ids[r].length, max);
      System.arraycopy(ids[r], 0, flat, r * t, m);
      java.util.Arrays.fill(mask, r * t, r * t + m, 1f);
    }
    return new NDList(scope.create(flat, new Shape(n, t)), scope.create(mask, new Shape(n, t)));
  }

  /**
   * A batch for a TorchScript model's {@link #typed} columns, as the trainer's batches hold them:
   * float32 and int64 columns {@code [n, ...shape]}; a sequence column as its values {@code [n, T]}
   * (int64 ids, or float32) padded with 0 to the longest row, at most the maximum length (longer
   * rows are cut to it, as in training), then its mask {@code [n, T]} float32.
   */
  private NDList typedInputs(NDManager scope, List<Row> rows) {
    int n = rows.size();
    NDList out = new NDList();
    for (int i = 0; i < typed.length; i++) {
      TorchScriptSpec.Column c = typed[i];
      int col = columns[i];
      long vocab = c.vocabSize() > 0 ? c.vocabSize() : Long.MAX_VALUE;
      switch (c.kind()) {
        case IDS:
        case SEQ:
          {
            int max = c.maxLength();
            long[][] ids = new long[n][];
            float[][] values = new float[n][];
            int[] lengths = new int[n];
            int t = 1;
            for (int r = 0; r < n; r++) {
              if (c.kind() == TorchScriptSpec.Column.Kind.IDS) {
                ids[r] = Features.ids(rows.get(r), col, vocab);
                lengths[r] = Math.min(ids[r].length, max);
              } else {
                int size =
                    rows.get(r).isNullAt(col) ? 0 : Features.copy(rows.get(r), col, null, 0, -1);
                values[r] = new float[size];
                if (size > 0) {
                  Features.copy(rows.get(r), col, values[r], 0, size);
                }
                lengths[r] = Math.min(size, max);
              }
              t = Math.max(t, lengths[r]);
            }
            float[] mask = new float[n * t];
            for (int r = 0; r < n; r++) {
              Arrays.fill(mask, r * t, r * t + lengths[r], 1f);
            }
            if (c.kind() == TorchScriptSpec.Column.Kind.IDS) {
              long[] flat = new long[n * t];
              for (int r = 0; r < n; r++) {
                System.arraycopy(ids[r], 0, flat, r * t, lengths[r]);
              }
              out.add(scope.create(flat, new Shape(n, t)));
            } else {
              float[] flat = new float[n * t];
              for (int r = 0; r < n; r++) {
                System.arraycopy(values[r], 0, flat, r * t, lengths[r]);
              }
              out.add(scope.create(flat, new Shape(n, t)));
            }
            out.add(scope.create(mask, new Shape(n, t)));
            break;
          }
        case INT64:
          {
            int size = inputSize(i);
            long[] flat = new long[n * size];
            for (int r = 0; r < n; r++) {
              long[] v = Features.ids(rows.get(r), col, vocab);
              Features.checkSize(rows.get(r), col, v.length, size);
              System.arraycopy(v, 0, flat, r * size, size);
            }
            out.add(scope.create(flat, new Shape(n).addAll(new Shape(inputShapes[i]))));
            break;
          }
        default:
          {
            int size = inputSize(i);
            float[] buf = new float[n * size];
            for (int r = 0; r < n; r++) {
              int got = Features.copy(rows.get(r), col, buf, r * size, size);
              Features.checkSize(rows.get(r), col, got, size);
              if (inputMap != null) {
                inputMap.applyInference(buf, r * size, columnShapes[i]);
              }
            }
            out.add(scope.create(buf, new Shape(n).addAll(new Shape(inputShapes[i]))));
          }
      }
    }
    return out;
  }

  private BatchInference withInputMap(ImageAugment map, long[][] shapes) {
    if (map != null && (shapes == null || shapes.length != columns.length)) {
      throw new IllegalArgumentException(
          "An input map needs the shape of each of the " + columns.length + " feature columns");
    }
    this.inputMap = map;
    this.columnShapes = shapes;
    return this;
  }

  static void checkFeatureColumns(StructType schema, List<String> featureCols) {
    if (featureCols.isEmpty()) {
      throw new IllegalArgumentException("No feature column given");
    }
    List<String> names = Arrays.asList(schema.fieldNames());
    for (String c : featureCols) {
      if (!names.contains(c)) {
        throw new IllegalArgumentException(
            "No feature column '"
                + c
                + "' in the data (columns: "
                + String.join(", ", names)
                + ")");
      }
      DataType t = schema.apply(c).dataType();
      if (!isFeatureType(t)) {
        throw new IllegalArgumentException(
            "Feature column '"
                + c
                + "' has type "
                + t.simpleString()
                + ": expected an ml Vector, an array of numbers or a number");
      }
    }
  }

  /** A number, a boolean, an array of numbers or an ml Vector. */
  public static boolean isFeatureType(DataType t) {
    return t instanceof NumericType
        || t instanceof BooleanType
        || (t instanceof ArrayType && ((ArrayType) t).elementType() instanceof NumericType)
        || t.sameType(SQLDataTypes.VectorType());
  }

  // ---- executor side ----

  /**
   * A model built on this executor. Tasks lease it: the cache may evict it while tasks still run
   * forward on it, and it is closed only when it is both evicted and idle.
   */
  private static final class Loaded {
    final NDManager manager;
    final Block block;

    /** Applied to the features before the model, as in training; null for none. */
    final Normalization normalization;

    /** Tasks using it, and whether the cache dropped it: guarded by {@link #CACHE}. */
    private int users;

    private boolean evicted;

    Loaded(TrainedModel m) {
      if (System.getProperty("ai.djl.offline") == null) {
        System.setProperty("ai.djl.offline", "true"); // never download at run time
      }
      manager = NDManager.newBaseManager();
      block = m.newBlock(manager);
      normalization = m.normalization();
      MODEL_LOADS.incrementAndGet();
    }

    /** Under the cache's lock. */
    void closeIfUnused() {
      if (evicted && users == 0) {
        manager.close();
        MODEL_CLOSES.incrementAndGet();
      }
    }
  }

  /** One task's use of a cached model, given back exactly once. */
  private static final class Lease {
    final Loaded model;
    private final AtomicBoolean released = new AtomicBoolean();

    Lease(Loaded model) {
      this.model = model;
    }

    void release() {
      if (released.compareAndSet(false, true)) {
        synchronized (CACHE) {
          model.users--;
          model.closeIfUnused();
        }
      }
    }
  }

  /** This job's model, built once per executor, leased to the caller (who must release it). */
  private Lease lease() {
    synchronized (CACHE) {
      Loaded l = CACHE.get(key);
      if (l == null) {
        l = new Loaded(model.value());
        CACHE.put(key, l);
        Iterator<Map.Entry<String, Loaded>> it = CACHE.entrySet().iterator();
        while (CACHE.size() > cacheSize) {
          Loaded oldest = it.next().getValue();
          if (oldest == l) {
            break;
          }
          it.remove();
          oldest.evicted = true;
          oldest.closeIfUnused(); // a model still running in another task is closed when that task
          // ends
        }
      }
      l.users++;
      return new Lease(l);
    }
  }

  /**
   * A lease released when the task ends (however it ends) or, outside a Spark task, by the caller.
   */
  private Lease taskLease() {
    Lease lease = lease();
    TaskContext task = TaskContext.get();
    if (task != null) {
      task.addTaskCompletionListener((TaskCompletionListener) ctx -> lease.release());
    }
    return lease;
  }

  private static long product(long[] shape) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    return n;
  }

  private int inputSize(int i) {
    long n = 1;
    for (long d : inputShapes[i]) {
      n *= d;
    }
    return Math.toIntExact(n);
  }

  /** Model outputs of a batch of rows: {@code [rows, outputs]} floats, row-major. */
  private float[] forward(Loaded m, List<Row> rows, int[] outputs) {
    int n = rows.size();
    BATCHES.incrementAndGet();
    try (NDManager scope = m.manager.newSubManager()) {
      NDList inputs = new NDList(inputShapes.length);
      if (sequence != null) {
        inputs = sequenceInputs(scope, rows);
      } else if (typed != null) {
        inputs = typedInputs(scope, rows);
      } else if (inputShapes.length == columns.length) {
        int first = 0;
        for (int i = 0; i < columns.length; i++) {
          int size = inputSize(i);
          float[] buf = new float[n * size];
          for (int r = 0; r < n; r++) {
            int got = Features.copy(rows.get(r), columns[i], buf, r * size, size);
            Features.checkSize(rows.get(r), columns[i], got, size);
            if (inputMap != null) {
              inputMap.applyInference(buf, r * size, columnShapes[i]);
            }
          }
          if (m.normalization != null) {
            m.normalization.apply(buf, 0, n, size, first);
          }
          first += size;
          inputs.add(scope.create(buf, new Shape(n).addAll(new Shape(inputShapes[i]))));
        }
      } else {
        int size = inputSize(0);
        float[] buf = new float[n * size];
        for (int r = 0; r < n; r++) {
          int at = 0;
          for (int j = 0; j < columns.length; j++) {
            int from = at;
            at += Features.copy(rows.get(r), columns[j], buf, r * size + at, size - at);
            if (inputMap != null && at - from == product(columnShapes[j])) {
              inputMap.applyInference(buf, r * size + from, columnShapes[j]);
            }
          }
          Features.checkSize(rows.get(r), -1, at, size);
        }
        if (m.normalization != null) {
          m.normalization.apply(buf, 0, n, size, 0);
        }
        inputs.add(scope.create(buf, new Shape(n).addAll(new Shape(inputShapes[0]))));
      }
      NDArray out = m.block.forward(new ParameterStore(scope, false), inputs, false).head();
      outputs[0] = out.getShape().dimension() == 1 ? 1 : Math.toIntExact(out.getShape().size() / n);
      return out.toFloatArray();
    }
  }

  Iterator<Row> predict(Iterator<Row> rows, boolean probability, boolean raw) {
    Lease lease = taskLease();
    Loaded m = lease.model;
    return new Iterator<Row>() {
      private final List<Row> out = new ArrayList<>();
      private int next;

      @Override
      public boolean hasNext() {
        if (next < out.size()) {
          return true;
        }
        out.clear();
        next = 0;
        List<Row> batch = new ArrayList<>(batchSize);
        while (batch.size() < batchSize && rows.hasNext()) {
          batch.add(rows.next());
        }
        if (batch.isEmpty()) {
          lease.release(); // all rows done: the model may go if the cache dropped it
          return false;
        }
        int[] k = new int[1];
        float[] y;
        try {
          y = forward(m, batch, k);
        } catch (RuntimeException | Error e) {
          lease.release();
          throw e;
        }
        for (int r = 0; r < batch.size(); r++) {
          out.add(outputRow(batch.get(r), y, r * k[0], k[0], probability, raw));
        }
        return true;
      }

      @Override
      public Row next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return out.get(next++);
      }
    };
  }

  private Row outputRow(Row in, float[] y, int off, int k, boolean probability, boolean raw) {
    List<Object> values = new ArrayList<>(in.size() + 3);
    for (int i = 0; i < in.size(); i++) {
      values.add(in.get(i));
    }
    double[] logits = new double[k];
    for (int j = 0; j < k; j++) {
      logits[j] = y[off + j];
    }
    switch (loss) {
      case SOFTMAX_CROSS_ENTROPY:
        {
          double[] p = softmax(logits);
          values.add((double) argMax(p));
          if (probability) {
            values.add(Vectors.dense(p));
          }
          break;
        }
      case SIGMOID_BINARY_CROSS_ENTROPY:
        {
          double p1 = 1 / (1 + Math.exp(-logits[0]));
          values.add(p1 > 0.5 ? 1.0 : 0.0);
          if (probability) {
            values.add(Vectors.dense(1 - p1, p1));
          }
          break;
        }
      default:
        values.add(logits[0]);
    }
    if (raw) {
      values.add((Vector) Vectors.dense(logits));
    }
    return RowFactory.create(values.toArray());
  }

  private double[] evaluate(Iterator<Row> rows, int labelIndex) {
    Lease lease = taskLease();
    try {
      return evaluate(lease.model, rows, labelIndex);
    } finally {
      lease.release();
    }
  }

  private double[] evaluate(Loaded m, Iterator<Row> rows, int labelIndex) {
    Loss l = loss.newLoss();
    double[] sums = new double[3 + EpochMetrics.Regression.SUMS];
    List<Row> batch = new ArrayList<>(batchSize);
    while (rows.hasNext()) {
      batch.clear();
      while (batch.size() < batchSize && rows.hasNext()) {
        batch.add(rows.next());
      }
      int[] k = new int[1];
      float[] y = forward(m, batch, k);
      int n = batch.size();
      try (NDManager scope = m.manager.newSubManager()) {
        NDArray pred = scope.create(y, new Shape(n, k[0]));
        NDArray labels;
        if (loss == LossSpec.SOFTMAX_CROSS_ENTROPY) {
          long[] lab = new long[n];
          for (int r = 0; r < n; r++) {
            lab[r] = Features.classLabel(batch.get(r), labelIndex, k[0]);
          }
          labels = scope.create(lab);
        } else {
          float[] lab = new float[n];
          for (int r = 0; r < n; r++) {
            lab[r] = (float) Features.number(batch.get(r), labelIndex);
          }
          labels = scope.create(lab);
          if (loss == LossSpec.L2 && k[0] == 1) {
            EpochMetrics.Regression.addSums(lab, y, sums, 3);
          }
        }
        sums[0] += loss.evaluate(l, labels, pred).getFloat() * (double) n;
        sums[1] += loss.correct(labels, pred);
        sums[2] += n;
      }
    }
    return sums;
  }

  static double[] softmax(double[] z) {
    double max = Double.NEGATIVE_INFINITY;
    for (double v : z) {
      max = Math.max(max, v);
    }
    double sum = 0;
    double[] p = new double[z.length];
    for (int i = 0; i < z.length; i++) {
      p[i] = Math.exp(z[i] - max);
      sum += p[i];
    }
    for (int i = 0; i < p.length; i++) {
      p[i] /= sum;
    }
    return p;
  }

  static int argMax(double[] p) {
    int best = 0;
    for (int i = 1; i < p.length; i++) {
      if (p[i] > p[best]) {
        best = i;
      }
    }
    return best;
  }
}
