package dev.sparktrainer.it.bench;

import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.Serializable;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;
import org.tensorflow.example.Example;
import org.tensorflow.example.Feature;
import org.tensorflow.hadoop.io.TFRecordFileInputFormat;
import scala.collection.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code bin/bench-tfrecord}: reading TFRecord files four ways, side by side, on the same data and
 * the same Spark session.
 *
 * <ol>
 *   <li>{@code framing}: our {@link TFRecordReader} alone (framing + both CRC-32C checks), one
 *       thread.
 *   <li>{@code datasource}: {@code spark.read.format("tfrecord")} with the dataset's schema.
 *   <li>{@code tensorflow-hadoop}: what spark-tensorflow-connector and spark-tfrecord do: {@code
 *       newAPIHadoopFile} with tensorflow-hadoop's {@code TFRecordFileInputFormat}, protobuf's
 *       {@code Example.parseFrom}, one {@code Row} per record decoded like the connector's {@code
 *       DefaultTfRecordRowDecoder}, {@code createDataFrame(rdd, schema)}.
 *   <li>{@code parquet}: the same rows as Parquet (written once, snappy), Spark's built-in reader.
 * </ol>
 *
 * <p>Every Spark path is materialised the same way: {@code df.queryExecution().toRdd()} (the
 * physical plan's {@code InternalRow}s: for the columnar scans, datasource and Parquet, after
 * Spark's generated ColumnarToRow) and a per-partition pass that reads every value of every column
 * (each float of each array, each byte of each string, 8 bytes at a time) into a cheap
 * Fletcher-style checksum per row, summed over rows (order-independent). The three checksums must
 * agree, which also proves the three paths produced identical values. Paths run interleaved (the
 * order rotates every round) after warm-up rounds; the median of the timed rounds is reported.
 * Files are read from the page cache (warm-up reads them).
 */
public final class TFRecordBenchmark {
  private static final int DATA_VERSION = 1;
  private static final double MB = 1e6;
  private static final double FRAMING_TARGET_MB_S = 2000;
  private static final double SPEEDUP_TARGET = 3.0;
  private static final double PARQUET_TIME_TARGET = 1.5;

  private static final String[] PATHS = {"framing", "datasource", "tensorflow-hadoop", "parquet"};

  private TFRecordBenchmark() {}

  // ---------------------------------------------------------------------------------------------
  // Options

  private static final class Options {
    Path dataDir = Path.of("target/bench/data");
    Path out = Path.of("target/bench/tfrecord.jsonl");
    long totalMb = 400;
    int runs = 7;
    int warmups = 2;
    int files = 8;
    String master = "local[2]";
    boolean quick;
    List<String> datasets = List.of("mnist", "text");
    List<String> paths = List.of(PATHS);

    static Options parse(String[] args) {
      Options o = new Options();
      String env = System.getenv("BENCH_TFRECORD_MB");
      if (env != null && !env.isBlank()) {
        o.totalMb = Long.parseLong(env.trim());
      }
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        switch (a) {
          case "--quick":
            o.quick = true;
            o.totalMb = 20;
            o.runs = 3;
            o.warmups = 1;
            o.files = 4;
            break;
          case "--size-mb":
            o.totalMb = Long.parseLong(args[++i]);
            break;
          case "--runs":
            o.runs = Integer.parseInt(args[++i]);
            break;
          case "--warmups":
            o.warmups = Integer.parseInt(args[++i]);
            break;
          case "--files":
            o.files = Integer.parseInt(args[++i]);
            break;
          case "--master":
            o.master = args[++i];
            break;
          case "--data":
            o.dataDir = Path.of(args[++i]);
            break;
          case "--out":
            o.out = Path.of(args[++i]);
            break;
          case "--datasets":
            o.datasets = Arrays.asList(args[++i].split(","));
            break;
          case "--paths":
            o.paths = Arrays.asList(args[++i].split(","));
            break;
          case "-h":
          case "--help":
            System.out.println(
                "usage: bench-tfrecord [--quick] [--size-mb N (half per dataset, default 400; env BENCH_TFRECORD_MB)]"
                    + " [--runs N (>=3, default 7)] [--warmups N] [--files N per dataset] [--master local[2]]"
                    + " [--datasets mnist,text] [--paths "
                    + String.join(",", PATHS)
                    + " (a subset, e.g. to"
                    + " profile one)] [--data DIR] [--out FILE.jsonl]");
            System.exit(0);
            break;
          default:
            throw new IllegalArgumentException("Unknown argument '" + a + "': see --help");
        }
      }
      if (o.runs < 3) {
        throw new IllegalArgumentException(
            "Invalid --runs " + o.runs + ": expected at least 3 (the median of 3+)");
      }
      if (o.totalMb < 1 || o.files < 1 || o.warmups < 0) {
        throw new IllegalArgumentException(
            "Invalid --size-mb, --files or --warmups: expected positive numbers");
      }
      for (String d : o.datasets) {
        if (!d.equals("mnist") && !d.equals("text")) {
          throw new IllegalArgumentException("Invalid dataset '" + d + "': expected mnist or text");
        }
      }
      for (String p : o.paths) {
        if (!List.of(PATHS).contains(p)) {
          throw new IllegalArgumentException(
              "Invalid path '" + p + "': expected some of " + String.join(", ", PATHS));
        }
      }
      return o;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Datasets

  /** One dataset: TFRecord files, the same rows as Parquet, and their schema. */
  private static final class Data {
    final String name;
    final StructType schema;
    final Path tfDir;
    final Path parquetDir;
    long rows;
    long tfBytes;
    long parquetBytes;

    Data(String name, StructType schema, Path root) {
      this.name = name;
      this.schema = schema;
      this.tfDir = root.resolve(name).resolve("tfrecord");
      this.parquetDir = root.resolve(name).resolve("parquet");
    }
  }

  private static final StructType MNIST =
      new StructType()
          .add("label", DataTypes.LongType)
          .add("pixels", DataTypes.createArrayType(DataTypes.FloatType, false));

  private static final StructType TEXT =
      new StructType()
          .add("id", DataTypes.LongType)
          .add("label", DataTypes.LongType)
          .add("title", DataTypes.StringType)
          .add("body", DataTypes.StringType)
          .add("tags", DataTypes.createArrayType(DataTypes.StringType, false));

  /** Writes the dataset's TFRecord files unless a manifest says they are already there. */
  private static void generate(Data d, long bytesTarget, int files) throws IOException {
    Path manifest = d.tfDir.resolve("_manifest.properties");
    String wanted = "v" + DATA_VERSION + " " + bytesTarget + " bytes in " + files + " files";
    if (Files.exists(manifest)) {
      Properties p = new Properties();
      try (InputStream in = Files.newInputStream(manifest)) {
        p.load(in);
      }
      if (wanted.equals(p.getProperty("spec"))) {
        d.rows = Long.parseLong(p.getProperty("rows"));
        d.tfBytes = Long.parseLong(p.getProperty("bytes"));
        return;
      }
    }
    deleteRecursively(d.tfDir);
    deleteRecursively(d.parquetDir);
    Files.createDirectories(d.tfDir);
    long perFile = Math.max(1, bytesTarget / files);
    ExampleEncoder enc = new ExampleEncoder();
    long rows = 0;
    long bytes = 0;
    long t0 = System.nanoTime();
    Words words = d.name.equals("text") ? new Words(new Random(7)) : null;
    for (int f = 0; f < files; f++) {
      Random rnd = new Random(1_000L * DATA_VERSION + 31L * f + d.name.hashCode()); // deterministic
      Path file = d.tfDir.resolve(String.format(Locale.ROOT, "part-%05d.tfrecord", f));
      try (TFRecordWriter w =
          new TFRecordWriter(
              new BufferedOutputStream(new FileOutputStream(file.toFile()), 1 << 20))) {
        while (w.bytesWritten() < perFile) {
          enc.reset();
          if (words == null) {
            mnistRecord(enc, rnd);
          } else {
            textRecord(enc, rnd, words, rows);
          }
          w.write(enc.finishExample());
          rows++;
        }
        bytes += w.bytesWritten();
      }
    }
    d.rows = rows;
    d.tfBytes = bytes;
    Properties p = new Properties();
    p.setProperty("spec", wanted);
    p.setProperty("rows", Long.toString(rows));
    p.setProperty("bytes", Long.toString(bytes));
    try (OutputStream out = Files.newOutputStream(manifest)) {
      p.store(out, "written by TFRecordBenchmark; delete to regenerate");
    }
    System.err.printf(
        Locale.ROOT,
        "generated %s: %,d records, %.1f MB in %d files (%.1f s)%n",
        d.name,
        rows,
        bytes / MB,
        files,
        (System.nanoTime() - t0) / 1e9);
  }

  private static final byte[] PIXELS = "pixels".getBytes(StandardCharsets.UTF_8);
  private static final byte[] LABEL = "label".getBytes(StandardCharsets.UTF_8);
  private static final float[] pixelBuf = new float[784];

  /** MNIST-like: a 28x28 image (about a fifth of the pixels ink, in 1/255 steps) and a label. */
  private static void mnistRecord(ExampleEncoder enc, Random rnd) {
    Arrays.fill(pixelBuf, 0f);
    int cx = 8 + rnd.nextInt(12);
    int cy = 8 + rnd.nextInt(12);
    for (int y = 0; y < 28; y++) {
      for (int x = 0; x < 28; x++) {
        int dx = x - cx;
        int dy = y - cy;
        if (dx * dx + dy * dy < 40 && rnd.nextInt(10) < 8) {
          pixelBuf[y * 28 + x] = (1 + rnd.nextInt(255)) / 255f;
        }
      }
    }
    enc.beginFeature(PIXELS, FeatureKind.FLOAT);
    enc.addFloats(pixelBuf, 0, 784);
    enc.endFeature();
    enc.beginFeature(LABEL, FeatureKind.INT64);
    enc.addInt64(rnd.nextInt(10));
    enc.endFeature();
  }

  /** A Zipf-ish vocabulary of pseudo-words (some non-ASCII). */
  private static final class Words {
    final byte[][] words = new byte[5000][];

    Words(Random rnd) {
      String letters = "etaoinshrdlucmfwypvbgkjqxzéüß";
      for (int i = 0; i < words.length; i++) {
        StringBuilder sb = new StringBuilder();
        int n = 2 + rnd.nextInt(9);
        for (int j = 0; j < n; j++) {
          sb.append(
              letters.charAt(
                  Math.min(letters.length() - 1, (int) (Math.abs(rnd.nextGaussian()) * 8))));
        }
        words[i] = sb.toString().getBytes(StandardCharsets.UTF_8);
      }
    }

    byte[] pick(Random rnd) {
      return words[
          (int)
              Math.min(words.length - 1, Math.floor(Math.pow(rnd.nextDouble(), 3) * words.length))];
    }

    byte[] sentence(Random rnd, int n) {
      ByteArrayOutputStream b = new ByteArrayOutputStream(n * 8);
      for (int i = 0; i < n; i++) {
        if (i > 0) {
          b.write(' ');
        }
        b.writeBytes(pick(rnd));
      }
      return b.toByteArray();
    }
  }

  private static final byte[] ID = "id".getBytes(StandardCharsets.UTF_8);
  private static final byte[] TITLE = "title".getBytes(StandardCharsets.UTF_8);
  private static final byte[] BODY = "body".getBytes(StandardCharsets.UTF_8);
  private static final byte[] TAGS = "tags".getBytes(StandardCharsets.UTF_8);

  /** Text-like: id, label, a title, a body of 50-300 words, 0-5 tags. */
  private static void textRecord(ExampleEncoder enc, Random rnd, Words words, long id) {
    enc.beginFeature(ID, FeatureKind.INT64);
    enc.addInt64(id);
    enc.endFeature();
    enc.beginFeature(LABEL, FeatureKind.INT64);
    enc.addInt64(rnd.nextInt(20));
    enc.endFeature();
    enc.beginFeature(TITLE, FeatureKind.BYTES);
    enc.addBytes(words.sentence(rnd, 3 + rnd.nextInt(8)));
    enc.endFeature();
    enc.beginFeature(BODY, FeatureKind.BYTES);
    enc.addBytes(words.sentence(rnd, 50 + rnd.nextInt(251)));
    enc.endFeature();
    enc.beginFeature(TAGS, FeatureKind.BYTES);
    int tags = rnd.nextInt(6);
    for (int i = 0; i < tags; i++) {
      enc.addBytes(words.pick(rnd));
    }
    enc.endFeature();
  }

  /** Writes the rows as Parquet once (Spark's defaults: snappy, vectorised reading). */
  private static void toParquet(SparkSession spark, Data d) throws IOException {
    Path done = d.parquetDir.resolve("_SUCCESS");
    if (!Files.exists(done)) {
      spark
          .read()
          .format("tfrecord")
          .schema(d.schema)
          .load(d.tfDir.toString())
          .write()
          .mode("overwrite")
          .parquet(d.parquetDir.toString());
    }
    d.parquetBytes = sizeOf(d.parquetDir, ".parquet");
  }

  // ---------------------------------------------------------------------------------------------
  // The four paths

  /** Path 1: framing and CRCs only, one thread over all files. Returns {records, checksum}. */
  private static long[] framing(Data d) throws IOException {
    long records = 0;
    long sum = 0;
    for (Path file : listFiles(d.tfDir, ".tfrecord")) {
      try (TFRecordReader r =
          TFRecordReader.of(new FileInputStream(file.toFile()), file.toString())) {
        while (r.next()) {
          records++;
          sum += r.dataLength();
        }
      }
    }
    return new long[] {records, sum};
  }

  private static Dataset<Row> datasource(SparkSession spark, Data d) {
    return spark.read().format("tfrecord").schema(d.schema).load(d.tfDir.toString());
  }

  private static Dataset<Row> parquet(SparkSession spark, Data d) {
    return spark.read().parquet(d.parquetDir.toString()).select(columns(d.schema));
  }

  /**
   * What the connectors do: Hadoop input format, protobuf parse, a Row per record, createDataFrame.
   */
  private static Dataset<Row> tensorflowHadoop(SparkSession spark, Data d) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    ConnectorRowDecoder decoder = new ConnectorRowDecoder(d.schema);
    JavaRDD<Row> rows =
        jsc.newAPIHadoopFile(
                d.tfDir.toString(),
                TFRecordFileInputFormat.class,
                BytesWritable.class,
                NullWritable.class,
                jsc.hadoopConfiguration())
            .map(kv -> decoder.decode(Example.parseFrom(bytesOf(kv._1()))));
    return spark.createDataFrame(rows, d.schema);
  }

  private static byte[] bytesOf(BytesWritable w) {
    byte[] b = w.getBytes();
    return b.length == w.getLength() ? b : w.copyBytes();
  }

  /**
   * spark-tensorflow-connector's {@code DefaultTfRecordRowDecoder}, in Java: every field of the
   * schema looked up in the feature map and converted (scalars take the head of the list, arrays
   * become a list of boxed values, bytes become Strings); a missing feature is null.
   */
  static final class ConnectorRowDecoder implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String[] names;
    private final DataType[] types;

    ConnectorRowDecoder(StructType schema) {
      names = schema.fieldNames();
      types = Arrays.stream(schema.fields()).map(StructField::dataType).toArray(DataType[]::new);
    }

    Row decode(Example example) {
      Map<String, Feature> features = example.getFeatures().getFeatureMap();
      Object[] values = new Object[names.length];
      for (int i = 0; i < names.length; i++) {
        Feature f = features.get(names[i]);
        values[i] = f == null ? null : convert(f, types[i], names[i]);
      }
      return RowFactory.create(values);
    }

    private static Object convert(Feature f, DataType t, String name) {
      if (t == DataTypes.LongType) {
        return f.getInt64List().getValue(0);
      } else if (t == DataTypes.FloatType) {
        return f.getFloatList().getValue(0);
      } else if (t == DataTypes.StringType) {
        return f.getBytesList().getValue(0).toStringUtf8();
      } else if (t instanceof ArrayType) {
        DataType e = ((ArrayType) t).elementType();
        if (e == DataTypes.FloatType) {
          return seq(f.getFloatList().getValueList().stream().map(Float::floatValue));
        } else if (e == DataTypes.LongType) {
          return seq(f.getInt64List().getValueList().stream().map(Long::longValue));
        } else if (e == DataTypes.StringType) {
          return seq(f.getBytesList().getValueList().stream().map(b -> b.toStringUtf8()));
        }
      }
      throw new IllegalArgumentException("Unsupported column " + name + " " + t.simpleString());
    }

    /**
     * A Scala Seq, as the connector's `asScala.map(...)` builds and Spark's Row encoder expects.
     */
    private static <T> Seq<T> seq(Stream<T> values) {
      return CollectionConverters.asScala(values.collect(Collectors.toList()));
    }
  }

  /**
   * The one way every Spark path is materialised: the physical plan's {@code InternalRow}s, every
   * value of every column read into an order-independent checksum. Returns {rows, checksum}.
   */
  private static long[] materialise(Dataset<Row> df) {
    RowChecksum fn = new RowChecksum(df.schema());
    return df.queryExecution()
        .toRdd()
        .toJavaRDD()
        .mapPartitions(fn)
        .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1]});
  }

  static final class RowChecksum implements FlatMapFunction<Iterator<InternalRow>, long[]> {
    private static final long serialVersionUID = 1L;
    private static final int LONG = 0;
    private static final int FLOAT = 1;
    private static final int STRING = 2;
    private static final int ARRAY = 8;
    private final int[] kinds;

    RowChecksum(StructType schema) {
      kinds = new int[schema.length()];
      for (int i = 0; i < kinds.length; i++) {
        DataType t = schema.fields()[i].dataType();
        boolean array = t instanceof ArrayType;
        DataType e = array ? ((ArrayType) t).elementType() : t;
        int k =
            e == DataTypes.LongType
                ? LONG
                : e == DataTypes.FloatType ? FLOAT : e == DataTypes.StringType ? STRING : -1;
        if (k < 0) {
          throw new IllegalArgumentException("Unsupported column type " + t.simpleString());
        }
        kinds[i] = array ? k | ARRAY : k;
      }
    }

    @Override
    public Iterator<long[]> call(Iterator<InternalRow> rows) {
      long n = 0;
      long sum = 0;
      while (rows.hasNext()) {
        InternalRow row = rows.next();
        long h = 17;
        for (int i = 0; i < kinds.length; i++) {
          h = h * 31 + (row.isNullAt(i) ? 0x5bd1e995L : value(row, i, kinds[i]));
        }
        sum += h * 0x9E3779B97F4A7C15L;
        n++;
      }
      return List.of(new long[] {n, sum}).iterator();
    }

    /**
     * Reads every byte of {@code s}, 8 at a time, into a Fletcher-style sum (two running sums: one
     * cycle per word, order-sensitive): cheap, so the time measured is the reader's, not a hash's.
     */
    private static long touch(UTF8String s) {
      Object base = s.getBaseObject();
      long off = s.getBaseOffset();
      int n = s.numBytes();
      long a = n;
      long b = 0;
      int i = 0;
      for (; i + 8 <= n; i += 8) {
        a += Platform.getLong(base, off + i);
        b += a;
      }
      for (; i < n; i++) {
        a += Platform.getByte(base, off + i);
        b += a;
      }
      return a * 31 + b;
    }

    private static long value(InternalRow row, int i, int kind) {
      switch (kind) {
        case LONG:
          return row.getLong(i);
        case FLOAT:
          return Float.floatToRawIntBits(row.getFloat(i));
        case STRING:
          return touch(row.getUTF8String(i));
        default:
          ArrayData arr = row.getArray(i);
          int m = arr.numElements();
          long a = m;
          long b = 0;
          switch (kind & ~ARRAY) {
            case LONG:
              for (int j = 0; j < m; j++) {
                a += arr.getLong(j);
                b += a;
              }
              break;
            case FLOAT:
              for (int j = 0; j < m; j++) {
                a += Float.floatToRawIntBits(arr.getFloat(j));
                b += a;
              }
              break;
            default:
              for (int j = 0; j < m; j++) {
                a += touch(arr.getUTF8String(j));
                b += a;
              }
          }
          return a * 31 + b;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Running, timing, reporting

  private static final class Result {
    final String path;
    final Data data;
    final List<Double> seconds = new ArrayList<>();
    long rows;
    long checksum;

    Result(String path, Data data) {
      this.path = path;
      this.data = data;
    }

    double median() {
      double[] s = seconds.stream().mapToDouble(Double::doubleValue).sorted().toArray();
      return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    double rowsPerSecond() {
      return data.rows / median();
    }

    /** MB/s of the dataset's TFRecord bytes (the same logical data for every path). */
    double mbPerSecond() {
      return data.tfBytes / MB / median();
    }
  }

  public static void main(String[] args) throws Exception {
    Options o = Options.parse(args);
    // Half of the total each, whichever datasets run: a subset run reuses the same files.
    long bytesPerDataset = o.totalMb * 1_000_000L / 2;
    List<Data> datasets = new ArrayList<>();
    for (String name : o.datasets) {
      Data d = new Data(name, name.equals("mnist") ? MNIST : TEXT, o.dataDir);
      generate(d, bytesPerDataset, o.files);
      datasets.add(d);
    }

    SparkSession spark =
        SparkSession.builder()
            .master(o.master)
            .appName("bench-tfrecord")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate();
    try {
      for (Data d : datasets) {
        toParquet(spark, d);
      }
      Map<String, Result> results = new LinkedHashMap<>();
      for (Data d : datasets) {
        for (String p : o.paths) {
          results.put(d.name + "/" + p, new Result(p, d));
        }
      }
      int rounds = o.warmups + o.runs;
      for (int round = 0; round < rounds; round++) {
        boolean timed = round >= o.warmups;
        for (Data d : datasets) {
          for (int k = 0; k < o.paths.size(); k++) {
            String p = o.paths.get((k + round) % o.paths.size()); // rotate the order every round
            Result r = results.get(d.name + "/" + p);
            long t0 = System.nanoTime();
            long[] rc = run(spark, d, p);
            double s = (System.nanoTime() - t0) / 1e9;
            r.rows = rc[0];
            r.checksum = rc[1];
            if (r.rows != d.rows) {
              throw new IllegalStateException(
                  p + " read " + r.rows + " rows of " + d.name + ", expected " + d.rows);
            }
            if (timed) {
              r.seconds.add(s);
            }
            System.err.printf(
                Locale.ROOT,
                "%s round %d/%d %-8s %-18s %7.3f s%n",
                timed ? "timed " : "warmup",
                round + 1,
                rounds,
                d.name,
                p,
                s);
          }
        }
      }
      report(o, datasets, results, System.out);
    } finally {
      spark.stop();
    }
  }

  private static long[] run(SparkSession spark, Data d, String path) throws IOException {
    switch (path) {
      case "framing":
        return framing(d);
      case "datasource":
        return materialise(datasource(spark, d));
      case "tensorflow-hadoop":
        return materialise(tensorflowHadoop(spark, d));
      default:
        return materialise(parquet(spark, d));
    }
  }

  private static void report(
      Options o, List<Data> datasets, Map<String, Result> results, PrintStream out)
      throws IOException {
    int cores = Runtime.getRuntime().availableProcessors();
    out.println();
    out.printf(
        Locale.ROOT,
        "bench-tfrecord: %s, %d warm-up + %d timed rounds (median), paths interleaved; Spark %s on %d cores;"
            + " framing = 1 thread; MB = 10^6 bytes of TFRecord data%n",
        o.quick ? "QUICK" : "full",
        o.warmups,
        o.runs,
        o.master,
        cores);
    for (Data d : datasets) {
      out.printf(
          Locale.ROOT,
          "  %s: %,d records, TFRecord %.1f MB in %d files, Parquet %.1f MB; columns %s%n",
          d.name,
          d.rows,
          d.tfBytes / MB,
          o.files,
          d.parquetBytes / MB,
          d.schema.simpleString());
    }
    out.println();
    String fmt = "%-7s %-18s %10s %12s %10s %s%n";
    out.printf(Locale.ROOT, fmt, "dataset", "path", "median s", "rows/s", "MB/s", "all runs (s)");
    out.printf(Locale.ROOT, fmt, "-------", "----", "--------", "------", "----", "------------");
    try (Writer json = openJson(o.out)) {
      for (Data d : datasets) {
        for (String p : o.paths) {
          Result r = results.get(d.name + "/" + p);
          out.printf(
              Locale.ROOT,
              fmt,
              d.name,
              p,
              String.format(Locale.ROOT, "%.3f", r.median()),
              String.format(Locale.ROOT, "%,.0f", r.rowsPerSecond()),
              String.format(Locale.ROOT, "%,.0f", r.mbPerSecond()),
              r.seconds.stream()
                  .map(s -> String.format(Locale.ROOT, "%.3f", s))
                  .collect(Collectors.joining(" ")));
          json.write(
              String.format(
                  Locale.ROOT,
                  "{\"path\": \"%s\", \"dataset\": \"%s\", \"mb_per_s\": %.1f, \"rows_per_s\": %.0f,"
                      + " \"median_s\": %.4f, \"runs_s\": [%s], \"rows\": %d, \"tfrecord_bytes\": %d,"
                      + " \"parquet_bytes\": %d, \"threads\": \"%s\", \"quick\": %b, \"time\": \"%s\"}%n",
                  p,
                  d.name,
                  r.mbPerSecond(),
                  r.rowsPerSecond(),
                  r.median(),
                  r.seconds.stream()
                      .map(s -> String.format(Locale.ROOT, "%.4f", s))
                      .collect(Collectors.joining(", ")),
                  d.rows,
                  d.tfBytes,
                  d.parquetBytes,
                  p.equals("framing") ? "1" : o.master,
                  o.quick,
                  Instant.now()));
        }
      }
    }
    out.println(
        "(MB/s: the dataset's TFRecord bytes / time, for every path; JSON lines in " + o.out + ")");
    if (!o.paths.containsAll(List.of(PATHS))) {
      out.println("(a subset of the paths ran: no ratios)");
      return;
    }
    out.println();
    out.println("Ratios and targets (paired = median over rounds of the ratio within the round):");
    boolean allMet = true;
    for (Data d : datasets) {
      Result fr = results.get(d.name + "/framing");
      Result ds = results.get(d.name + "/datasource");
      Result tf = results.get(d.name + "/tensorflow-hadoop");
      Result pq = results.get(d.name + "/parquet");
      double speedup = ds.rowsPerSecond() / tf.rowsPerSecond();
      double vsParquet = ds.median() / pq.median();
      boolean framingMet = fr.mbPerSecond() >= FRAMING_TARGET_MB_S;
      boolean speedupMet = speedup >= SPEEDUP_TARGET;
      boolean parquetMet = vsParquet <= PARQUET_TIME_TARGET;
      allMet &= framingMet && speedupMet && parquetMet;
      out.printf(
          Locale.ROOT,
          "  %-6s framing + CRC, 1 thread          %7.0f MB/s                 (target >= %.0f MB/s per core) %s%n",
          d.name,
          fr.mbPerSecond(),
          FRAMING_TARGET_MB_S,
          met(framingMet));
      out.printf(
          Locale.ROOT,
          "  %-6s speed datasource / tf-hadoop     %7.2fx  (paired %5.2fx)   (target >= %.1fx)              %s%n",
          d.name,
          speedup,
          pairedMedian(tf, ds),
          SPEEDUP_TARGET,
          met(speedupMet));
      out.printf(
          Locale.ROOT,
          "  %-6s time datasource / parquet        %7.2f   (paired %5.2f)    (target <= %.1f)               %s%n",
          d.name,
          vsParquet,
          pairedMedian(ds, pq),
          PARQUET_TIME_TARGET,
          met(parquetMet));
      boolean same = ds.checksum == tf.checksum && ds.checksum == pq.checksum;
      out.printf(
          Locale.ROOT,
          "  %-6s values identical on the 3 Spark paths (checksum %016x): %s%n",
          d.name,
          ds.checksum,
          same
              ? "yes"
              : "NO (tensorflow-hadoop "
                  + Long.toHexString(tf.checksum)
                  + ", parquet "
                  + Long.toHexString(pq.checksum)
                  + ")");
      allMet &= same;
    }
    out.println(allMet ? "All targets met." : "Some targets MISSED (see above).");
    if (o.quick) {
      out.println(
          "(--quick: a smoke run; with this little data Spark's per-job overhead dominates the ratios)");
    }
  }

  /** Median over the timed rounds of a.seconds[i] / b.seconds[i]: robust to load that drifts. */
  private static double pairedMedian(Result a, Result b) {
    double[] r = new double[a.seconds.size()];
    for (int i = 0; i < r.length; i++) {
      r[i] = a.seconds.get(i) / b.seconds.get(i);
    }
    Arrays.sort(r);
    return r.length % 2 == 1 ? r[r.length / 2] : (r[r.length / 2 - 1] + r[r.length / 2]) / 2;
  }

  private static String met(boolean met) {
    return met ? "met" : "MISSED";
  }

  private static Writer openJson(Path out) throws IOException {
    if (out.getParent() != null) {
      Files.createDirectories(out.getParent());
    }
    return Files.newBufferedWriter(out, StandardCharsets.UTF_8);
  }

  private static Column[] columns(StructType schema) {
    return Arrays.stream(schema.fieldNames())
        .map(org.apache.spark.sql.functions::col)
        .toArray(Column[]::new);
  }

  private static List<Path> listFiles(Path dir, String suffix) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(p -> p.getFileName().toString().endsWith(suffix))
          .sorted()
          .collect(Collectors.toList());
    }
  }

  private static long sizeOf(Path dir, String suffix) throws IOException {
    long total = 0;
    for (Path p : listFiles(dir, suffix)) {
      total += Files.size(p);
    }
    return total;
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> s = Files.walk(dir)) {
      for (Path p :
          s.sorted((a, b) -> b.getNameCount() - a.getNameCount()).collect(Collectors.toList())) {
        Files.delete(p);
      }
    }
  }
}
