package dev.sparktrainer.data;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.PipelineSource;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.convert.GroupRecordConverter;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.io.ColumnIOFactory;
import org.apache.parquet.io.RecordReader;
import org.apache.parquet.io.api.Converter;
import org.apache.parquet.io.api.GroupConverter;
import org.apache.parquet.io.api.PrimitiveConverter;
import org.apache.parquet.io.api.RecordMaterializer;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.MessageType;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * bench-pipeline's Parquet part (kept apart from {@link PipelineBenchmark}'s TFRecord measures):
 * the benchmark's TFRecord dataset written once as Parquet by Spark (snappy, default row groups),
 * then in one run
 *
 * <ol>
 *   <li>the three ways parquet-mr reads the pixels on one thread — the example {@code Group} API
 *       (the old path), a {@code RecordMaterializer} whose converters write floats, and {@link
 *       ParquetStream} (its bulk page decoder; JSON field {@code
 *       parquet_column_readers_rows_per_s}) — what the reader was chosen by;
 *   <li>the pipeline on Parquet and on TFRecord, same records, same options;
 *   <li>Spark's vectorized Parquet reader scanning the same columns on one core ({@code local[1]},
 *       a {@code noop}-sink write, so every value is decoded);
 *   <li>a DataFrame that needs staging (a filter and a computed column): staging plus the first
 *       epoch, against the plain scan's first epoch.
 * </ol>
 */
final class ParquetBenchmark {
  private static final Configuration CONF = new Configuration();

  /** The figures, best of the rounds. */
  static final class Result {
    double parquet;
    double tfrecord;
    double spark;
    double groupApi;
    double converters;
    double columnReaders;
    double stagingS;
    double stagedEpochS;
    double plainEpochS;
    long stagedRecords;
    String config;
    List<String> rounds = new ArrayList<>();

    /** JSON fields (no braces) for pipeline.jsonl. */
    String json() {
      return String.format(
          Locale.ROOT,
          "\"parquet_records_per_s\": %.0f, \"tfrecord_records_per_s\": %.0f,"
              + " \"spark_parquet_rows_per_s\": %.0f, \"parquet_config\": \"%s\", \"parquet_group_api_rows_per_s\": %.0f,"
              + " \"parquet_converters_rows_per_s\": %.0f, \"parquet_column_readers_rows_per_s\": %.0f,"
              + " \"staging_s\": %.2f, \"staged_first_epoch_s\": %.2f, \"plain_first_epoch_s\": %.2f, \"staged_records\": %d",
          parquet,
          tfrecord,
          spark,
          config,
          groupApi,
          converters,
          columnReaders,
          stagingS,
          stagedEpochS,
          plainEpochS,
          stagedRecords);
    }

    void print() {
      System.out.println();
      System.out.printf(Locale.ROOT, "%-58s %14s%n", "Parquet measure (" + config + ")", "value");
      System.out.printf(
          Locale.ROOT,
          "%-58s %14.0f%n",
          "parquet-mr Group API (old reader), 1 thread, rows/s",
          groupApi);
      System.out.printf(
          Locale.ROOT,
          "%-58s %14.0f%n",
          "parquet-mr converters into floats, 1 thread, rows/s",
          converters);
      System.out.printf(
          Locale.ROOT,
          "%-58s %14.0f%n",
          "ParquetStream (bulk page decoder), 1 thread, rows/s",
          columnReaders);
      System.out.printf(Locale.ROOT, "%-58s %14.0f%n", "pipeline on TFRecord, records/s", tfrecord);
      System.out.printf(Locale.ROOT, "%-58s %14.0f%n", "pipeline on Parquet, records/s", parquet);
      System.out.printf(
          Locale.ROOT, "%-58s %14.0f%n", "Spark vectorized Parquet scan, local[1], rows/s", spark);
      System.out.printf(
          Locale.ROOT,
          "%-58s %13.2fx  (target >= 0.8: %s)%n",
          "pipeline Parquet / pipeline TFRecord",
          parquet / tfrecord,
          parquet >= 0.8 * tfrecord ? "met" : "MISSED");
      System.out.printf(
          Locale.ROOT,
          "%-58s %13.2fx  (target >= 1.0: %s)%n",
          "pipeline Parquet / Spark 1-core scan",
          parquet / spark,
          parquet >= spark ? "met" : "MISSED");
      System.out.printf(
          Locale.ROOT,
          "%-58s %12.2f s  (%d records)%n",
          "staged DataFrame: staging (filter + computed column)",
          stagingS,
          stagedRecords);
      System.out.printf(
          Locale.ROOT, "%-58s %12.2f s%n", "staged DataFrame: first epoch", stagedEpochS);
      System.out.printf(
          Locale.ROOT,
          "%-58s %12.2f s%n",
          "staged DataFrame: staging + first epoch",
          stagingS + stagedEpochS);
      System.out.printf(
          Locale.ROOT,
          "%-58s %12.2f s%n",
          "plain Parquet scan DataFrame: first epoch",
          plainEpochS);
    }
  }

  private ParquetBenchmark() {}

  /**
   * Profiling aid: {@code ParquetBenchmark FILE SECONDS WAY} reads one Parquet file of the
   * benchmark's shape on this thread (WAY 0 Group API, 1 converters, 2 ParquetStream) and prints
   * rows/s.
   */
  public static void main(String[] args) throws IOException {
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(args[0])
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("pixels", 784)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    System.out.printf(
        Locale.ROOT,
        "%.0f rows/s%n",
        rate(Path.of(args[0]), spec, Double.parseDouble(args[1]), Integer.parseInt(args[2])));
  }

  /**
   * @param tfPlan the TFRecord dataset's plan (pixels[784] float, label int64)
   * @param options the pipeline options both pipelines run with
   */
  static Result run(
      Path tfData,
      DatasetPlan tfPlan,
      PipelineOptions options,
      String config,
      NDManager manager,
      double seconds,
      int roundCount)
      throws IOException {
    Result res = new Result();
    res.config = config;
    Path pq = tfData.resolveSibling(tfData.getFileName() + "-parquet");
    SparkSession spark =
        SparkSession.builder()
            .master("local[1]")
            .appName("bench-pipeline-parquet")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.parquet.enableVectorizedReader", "true")
            .config("spark.sql.parquet.enableNestedColumnVectorizedReader", "true")
            .getOrCreate();
    try {
      long t0 = System.nanoTime();
      boolean wrote = writeParquet(spark, tfData, pq, tfPlan.totalRecords());
      if (wrote) {
        System.out.printf(
            Locale.ROOT,
            "wrote the dataset as Parquet (Spark, snappy) to %s in %.1f s%n",
            pq,
            (System.nanoTime() - t0) / 1e9);
      }
      DatasetSpec pqSpec =
          tfPlan.spec().toBuilder()
              .setPaths(List.of(pq.toString()))
              .optFormat(DatasetSpec.Format.PARQUET)
              .build();
      DatasetPlan pqPlan = DatasetPlanner.plan(pqSpec, options, CONF);
      List<Path> files = new ArrayList<>();
      for (Split s : pqPlan.splits()) {
        files.add(Path.of(s.path().replaceFirst("^file:", "")));
      }
      // Warm-up, then rounds side by side; each figure is its best round.
      readerRates(files.get(0), pqSpec, seconds);
      pipelineRate(tfPlan, options, manager, 2 * seconds);
      pipelineRate(pqPlan, options, manager, 2 * seconds);
      sparkScan(spark, pq, pqPlan.totalRecords(), 2 * seconds);
      for (int round = 0; round < roundCount; round++) {
        double[] readers = readerRates(files.get(0), pqSpec, seconds);
        double t = pipelineRate(tfPlan, options, manager, seconds);
        double p = pipelineRate(pqPlan, options, manager, seconds);
        double s = sparkScan(spark, pq, pqPlan.totalRecords(), seconds);
        String line =
            String.format(
                Locale.ROOT,
                "parquet round %d: Group %.0f, converters %.0f, ParquetStream %.0f;"
                    + " pipeline TFRecord %.0f, Parquet %.0f (%.2fx), Spark local[1] %.0f (%.2fx)",
                round + 1,
                readers[0],
                readers[1],
                readers[2],
                t,
                p,
                p / t,
                s,
                p / s);
        System.out.println(line);
        res.rounds.add(line);
        res.groupApi = Math.max(res.groupApi, readers[0]);
        res.converters = Math.max(res.converters, readers[1]);
        res.columnReaders = Math.max(res.columnReaders, readers[2]);
        res.tfrecord = Math.max(res.tfrecord, t);
        res.parquet = Math.max(res.parquet, p);
        res.spark = Math.max(res.spark, s);
      }
      staging(spark, pq, pqSpec, options, manager, res);
    } finally {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
    return res;
  }

  /** Writes the TFRecord dataset as Parquet with Spark's defaults; false if it is there already. */
  private static boolean writeParquet(SparkSession spark, Path tfData, Path pq, long records)
      throws IOException {
    Path marker = pq.resolve("_" + records + "_records");
    if (Files.exists(marker)) {
      return false;
    }
    spark
        .read()
        .format("tfrecord")
        .load(tfData.toString())
        .select("pixels", "label")
        .write()
        .mode("overwrite")
        .parquet(pq.toString());
    Files.createFile(marker);
    return true;
  }

  private static double pipelineRate(
      DatasetPlan plan, PipelineOptions o, NDManager m, double seconds) {
    long t = System.nanoTime();
    long until = t + (long) (seconds * 1e9);
    long n = 0;
    try (PipelineSource p = PipelineSource.create(plan, o, null, 0, 1, m, CONF)) {
      int epoch = 0;
      do {
        Iterator<Batch> it = p.epoch(epoch++, 0);
        p.prepare(epoch);
        while (it.hasNext()) {
          try (Batch b = it.next()) {
            n += b.size();
          }
        }
      } while (System.nanoTime() < until);
    }
    return n / ((System.nanoTime() - t) / 1e9);
  }

  /** Rows/s of Spark's vectorized reader decoding the columns on one core (a noop-sink write). */
  private static double sparkScan(SparkSession spark, Path pq, long rows, double seconds) {
    long t = System.nanoTime();
    long until = t + (long) (seconds * 1e9);
    long n = 0;
    do {
      spark
          .read()
          .parquet(pq.toString())
          .select("pixels", "label")
          .write()
          .format("noop")
          .mode("overwrite")
          .save();
      n += rows;
    } while (System.nanoTime() < until);
    return n / ((System.nanoTime() - t) / 1e9);
  }

  /**
   * Staging time and first epoch of a DataFrame that needs staging, and the plain scan's first
   * epoch.
   */
  private static void staging(
      SparkSession spark, Path pq, DatasetSpec spec, PipelineOptions o, NDManager m, Result res)
      throws IOException {
    Dataset<Row> plainDf = spark.read().parquet(pq.toString());
    try (DataFrameInput plain =
        DataFrameInput.of(plainDf, spec, pq.resolveSibling("staging").toString())) {
      long t = System.nanoTime();
      firstEpoch(plain.spec(), o, m);
      res.plainEpochS = (System.nanoTime() - t) / 1e9;
    }
    Dataset<Row> engineered = plainDf.where("label < 8").selectExpr("pixels", "label % 2 AS label");
    long t = System.nanoTime();
    try (DataFrameInput staged =
        DataFrameInput.of(engineered, spec, pq.resolveSibling("staging").toString())) {
      if (!staged.staged()) {
        throw new IllegalStateException("the filtered DataFrame was not staged");
      }
      res.stagingS = (System.nanoTime() - t) / 1e9;
      t = System.nanoTime();
      res.stagedRecords = firstEpoch(staged.spec(), o, m);
      res.stagedEpochS = (System.nanoTime() - t) / 1e9;
    }
  }

  /** Plans and reads one epoch; returns the records read. */
  private static long firstEpoch(DatasetSpec spec, PipelineOptions o, NDManager m)
      throws IOException {
    DatasetPlan plan = DatasetPlanner.plan(spec, o, CONF);
    long n = 0;
    try (PipelineSource p = PipelineSource.create(plan, o, null, 0, 1, m, CONF)) {
      Iterator<Batch> it = p.epoch(0, 0);
      while (it.hasNext()) {
        try (Batch b = it.next()) {
          n += b.size();
        }
      }
    }
    return n;
  }

  // --- parquet-mr's three ways in, one thread, one file -----------------------------------------

  /**
   * Rows/s of the Group API, converters and column readers over {@code file}, each for {@code
   * seconds}.
   */
  private static double[] readerRates(Path file, DatasetSpec spec, double seconds)
      throws IOException {
    return new double[] {
      rate(file, spec, seconds, 0), rate(file, spec, seconds, 1), rate(file, spec, seconds, 2)
    };
  }

  private static double rate(Path file, DatasetSpec spec, double seconds, int way)
      throws IOException {
    long t = System.nanoTime();
    long until = t + (long) (seconds * 1e9);
    long n = 0;
    int width = spec.features().get(0).size();
    float[] out = new float[width];
    double sum = 0;
    do {
      if (way == 2) {
        Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
        ArrayPool pool = new ArrayPool(width, 2);
        try (ParquetStream s = new ParquetStream(split, spec, j -> true, CONF, pool)) {
          for (Record r = s.next(); r != null; r = s.next()) {
            sum += r.features[width - 1] + r.label;
            pool.giveAll(new float[][] {r.features}, 1);
            n++;
          }
        }
        continue;
      }
      try (ParquetFileReader reader =
          ParquetFileReader.open(
              HadoopInputFile.fromPath(new org.apache.hadoop.fs.Path(file.toString()), CONF))) {
        MessageType schema = reader.getFooter().getFileMetaData().getSchema();
        MessageType projection =
            new MessageType(schema.getName(), schema.getType("pixels"), schema.getType("label"));
        reader.setRequestedSchema(projection);
        for (PageReadStore pages = reader.readNextRowGroup();
            pages != null;
            pages = reader.readNextRowGroup()) {
          var io = new ColumnIOFactory().getColumnIO(projection, schema);
          if (way == 0) {
            RecordReader<Group> rows =
                io.getRecordReader(pages, new GroupRecordConverter(projection));
            for (long i = 0; i < pages.getRowCount(); i++) {
              Group g = rows.read();
              Group list = g.getGroup(0, 0);
              int k = list.getFieldRepetitionCount(0);
              for (int j = 0; j < k; j++) {
                out[j] = list.getGroup(0, j).getFloat(0, 0);
              }
              sum += out[width - 1] + g.getLong(1, 0);
              n++;
            }
          } else {
            FloatsMaterializer mat = new FloatsMaterializer(projection, out);
            RecordReader<Void> rows = io.getRecordReader(pages, mat);
            for (long i = 0; i < pages.getRowCount(); i++) {
              rows.read();
              sum += out[width - 1] + mat.label;
              n++;
            }
          }
        }
      }
    } while (System.nanoTime() < until);
    if (sum == 42) {
      System.out.print(""); // keeps the values alive
    }
    return n / ((System.nanoTime() - t) / 1e9);
  }

  /**
   * parquet-mr's converter API: every float leaf appends to {@code out}, the label leaf sets {@link
   * #label}.
   */
  private static final class FloatsMaterializer extends RecordMaterializer<Void> {
    private final float[] out;
    private int pos;
    long label;
    private final GroupConverter root;

    FloatsMaterializer(MessageType schema, float[] out) {
      this.out = out;
      this.root = group(schema, true);
    }

    private GroupConverter group(GroupType t, boolean top) {
      Converter[] children = new Converter[t.getFieldCount()];
      for (int i = 0; i < children.length; i++) {
        if (!t.getType(i).isPrimitive()) {
          children[i] = group(t.getType(i).asGroupType(), false);
        } else if (top) {
          children[i] =
              new PrimitiveConverter() {
                @Override
                public void addLong(long v) {
                  label = v;
                }
              };
        } else {
          children[i] =
              new PrimitiveConverter() {
                @Override
                public void addFloat(float v) {
                  out[pos++] = v;
                }
              };
        }
      }
      return new GroupConverter() {
        @Override
        public Converter getConverter(int i) {
          return children[i];
        }

        @Override
        public void start() {
          if (top) {
            pos = 0;
          }
        }

        @Override
        public void end() {}
      };
    }

    @Override
    public Void getCurrentRecord() {
      return null;
    }

    @Override
    public GroupConverter getRootConverter() {
      return root;
    }
  }
}
