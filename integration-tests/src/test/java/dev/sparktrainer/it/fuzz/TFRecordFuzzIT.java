package dev.sparktrainer.it.fuzz;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.it.faults.ScanMetrics;
import dev.sparktrainer.tfrecord.codec.Crc32c;
import dev.sparktrainer.tfrecord.codec.LittleEndian;
import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Fuzzing the TFRecord framing reader, the Example decoder and the SequenceExample decoder: 110,000
 * seeded mutated inputs in a separate JVM with a 192 MiB heap and a per-input deadline (see {@link
 * TFRecordFuzzer} for what is checked), and the data source's row and columnar decoders through a
 * local Spark read of files of mutated records under DROPMALFORMED: every record is either a row or
 * counted as dropped, and both read paths return the same rows.
 */
class TFRecordFuzzIT {
  private static final long SEED = 20_251_122L;
  private static final int FRAMING_INPUTS = 35_000;
  private static final int EXAMPLE_INPUTS = 45_000;
  private static final int SEQUENCE_INPUTS = 30_000;
  private static final Duration FORK_TIMEOUT = Duration.ofMinutes(4);

  @TempDir static Path tmp;
  private static SparkSession spark;

  @BeforeAll
  static void startSpark() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("TFRecordFuzzIT")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
  }

  @AfterAll
  static void stopSpark() {
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  /** This module's test class path, for a forked JVM. */
  static String testClassPath() throws IOException {
    Path listed = Paths.get("target", "test-classpath.txt");
    Path classes = Paths.get("target", "test-classes").toAbsolutePath();
    if (Files.isRegularFile(listed) && Files.isDirectory(classes)) {
      return classes + File.pathSeparator + Files.readString(listed).trim();
    }
    return System.getProperty("java.class.path");
  }

  @Test
  void decodersSurviveMutatedInputsInABoundedHeap() throws Exception {
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    Path out = tmp.resolve("fuzzer.out");
    ProcessBuilder pb =
        new ProcessBuilder(
            java,
            "-Xmx192m",
            "-XX:+UseSerialGC",
            "-cp",
            testClassPath(),
            TFRecordFuzzer.class.getName(),
            String.valueOf(SEED),
            String.valueOf(FRAMING_INPUTS),
            String.valueOf(EXAMPLE_INPUTS),
            String.valueOf(SEQUENCE_INPUTS),
            tmp.resolve("scratch").toString(),
            "5000");
    pb.redirectErrorStream(true).redirectOutput(out.toFile());
    Process p = pb.start();
    try {
      if (!p.waitFor(FORK_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        throw new AssertionError(
            "The fuzzer (pid "
                + p.pid()
                + ") did not finish within "
                + FORK_TIMEOUT
                + ":\n"
                + Files.readString(out));
      }
    } finally {
      if (p.isAlive()) {
        p.toHandle().destroyForcibly();
        p.waitFor(10, TimeUnit.SECONDS);
      }
    }
    String report = Files.readString(out);
    System.out.println(
        report
            .lines()
            .filter(l -> !l.startsWith("  "))
            .limit(40)
            .reduce("TFRecordFuzzer:", (a, b) -> a + "\n  " + b));
    assertThat(p.exitValue())
        .as("fuzzer exit code (1 failures, 3 hang, 4 OutOfMemoryError):\n%s", report)
        .isZero();
    Matcher m = Pattern.compile("TOTAL inputs=(\\d+) failures=(\\d+)").matcher(report);
    assertThat(m.find()).as(report).isTrue();
    assertThat(Long.parseLong(m.group(1)))
        .isEqualTo((long) FRAMING_INPUTS + EXAMPLE_INPUTS + SEQUENCE_INPUTS);
    assertThat(Long.parseLong(m.group(2))).isZero();
    // the mutations reach both outcomes: rejected inputs and accepted ones
    for (String target : new String[] {"framing", "example", "sequence"}) {
      Matcher t =
          Pattern.compile("STAT target=" + target + " inputs=(\\d+) rejected=(\\d+)")
              .matcher(report);
      assertThat(t.find()).as(report).isTrue();
      long inputs = Long.parseLong(t.group(1));
      long rejected = Long.parseLong(t.group(2));
      assertThat(rejected)
          .as("%s inputs rejected", target)
          .isBetween(inputs / 20, inputs - inputs / 20);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The data source's decoders, through Spark.

  private static final StructType COLUMNAR =
      new StructType()
          .add("a", DataTypes.LongType)
          .add("b", DataTypes.createArrayType(DataTypes.LongType))
          .add("c", DataTypes.FloatType)
          .add("d", DataTypes.createArrayType(DataTypes.FloatType))
          .add("e", DataTypes.StringType)
          .add("f", DataTypes.createArrayType(DataTypes.BinaryType))
          .add("g", DataTypes.IntegerType)
          .add("h", DataTypes.DoubleType)
          .add("i", DataTypes.BooleanType)
          .add("j", DataTypes.createArrayType(DataTypes.DoubleType));
  private static final StructType ROW_ONLY =
      new StructType()
          .add("k", DataTypes.createDecimalType(12, 3))
          .add("v", SQLDataTypes.VectorType())
          .add("b", DataTypes.createArrayType(DataTypes.IntegerType))
          .add("g", DataTypes.ShortType)
          .add("t", DataTypes.ByteType)
          .add("e", DataTypes.BinaryType);
  private static final StructType SEQUENCE =
      new StructType()
          .add("a", DataTypes.LongType)
          .add("e", DataTypes.StringType)
          .add("s", DataTypes.createArrayType(DataTypes.createArrayType(DataTypes.LongType)))
          .add("q", DataTypes.createArrayType(DataTypes.createArrayType(DataTypes.FloatType)));

  /** A record that fits the schemas above: the right kinds, scalars with 0 or 1 value. */
  private static byte[] conforming(Random r, boolean sequence) {
    ExampleEncoder enc = new ExampleEncoder();
    enc.reset();
    feature(enc, r, "a", FeatureKind.INT64, 1);
    feature(enc, r, "e", FeatureKind.BYTES, 1);
    if (sequence) {
      for (String name : new String[] {"s", "q"}) {
        if (r.nextInt(6) == 0) {
          continue;
        }
        enc.beginFeatureList(name);
        for (int step = r.nextInt(5); step > 0; step--) {
          FeatureKind k = name.equals("s") ? FeatureKind.INT64 : FeatureKind.FLOAT;
          enc.beginListFeature(k);
          addValues(enc, r, k, r.nextInt(4));
          enc.endListFeature();
        }
        enc.endFeatureList();
      }
      return enc.finishSequenceExample();
    }
    feature(enc, r, "b", FeatureKind.INT64, -1);
    feature(enc, r, "c", FeatureKind.FLOAT, 1);
    feature(enc, r, "d", FeatureKind.FLOAT, -1);
    feature(enc, r, "f", FeatureKind.BYTES, -1);
    feature(enc, r, "g", FeatureKind.INT64, 1);
    feature(enc, r, "h", FeatureKind.FLOAT, 1);
    feature(enc, r, "i", FeatureKind.INT64, 1);
    feature(enc, r, "j", FeatureKind.INT64, -1);
    if (r.nextInt(8) != 0) { // mostly finite values (NaN into a decimal is a dropped record:
      // DataSourceRegressionIT)
      enc.beginFeature("k", FeatureKind.FLOAT);
      if (r.nextBoolean()) {
        enc.addFloat((float) (r.nextGaussian() * 1000));
      }
      enc.endFeature();
    }
    feature(enc, r, "v", FeatureKind.FLOAT, -1);
    feature(enc, r, "t", FeatureKind.INT64, 1);
    return enc.finishExample();
  }

  private static void feature(
      ExampleEncoder enc, Random r, String name, FeatureKind kind, int max) {
    if (r.nextInt(8) == 0) {
      return; // absent
    }
    enc.beginFeature(name, kind);
    addValues(enc, r, kind, max < 0 ? r.nextInt(6) : r.nextInt(max + 1));
    enc.endFeature();
  }

  private static void addValues(ExampleEncoder enc, Random r, FeatureKind kind, int n) {
    for (int i = 0; i < n; i++) {
      switch (kind) {
        case INT64:
          enc.addInt64(r.nextInt(4) == 0 ? r.nextLong() >> r.nextInt(64) : r.nextInt(200) - 100);
          break;
        case FLOAT:
          enc.addFloat(r.nextInt(20) == 0 ? Float.NaN : (float) (r.nextGaussian() * 100));
          break;
        default:
          enc.addBytes(
              Inputs.NAMES[r.nextInt(Inputs.NAMES.length)].getBytes(StandardCharsets.UTF_8));
      }
    }
  }

  /**
   * Files of records, 70% of them mutated, each framed with valid CRCs so that every one reaches
   * the decoders; returns how many records were written.
   */
  private static int writeFuzzedFiles(Path dir, Random r, boolean sequence, int files, int perFile)
      throws IOException {
    Files.createDirectories(dir);
    Crc32c crc = new Crc32c();
    for (int f = 0; f < files; f++) {
      List<byte[]> records = new ArrayList<>();
      for (int i = 0; i < perFile; i++) {
        byte[] rec =
            r.nextInt(10) < 3
                ? conforming(r, sequence)
                : Inputs.mutate(
                    r,
                    r.nextInt(4) == 0
                        ? (sequence ? Inputs.sequenceExample(r, 0) : Inputs.example(r))
                        : conforming(r, sequence),
                    3);
        records.add(rec);
      }
      byte[] framed = Inputs.frame(records, null);
      // sanity: the framing is valid, so nothing is dropped for framing reasons
      assertThat(LittleEndian.getInt(framed, 8)).isEqualTo(crc.maskedCrc(framed, 0, 8));
      Files.write(dir.resolve("part-" + f + ".tfrecord"), framed);
    }
    return files * perFile;
  }

  @Test
  void sparkRowAndColumnarDecodersDropExactlyTheMalformedRecords() throws IOException {
    Random r = new Random(SEED);
    Path dir = tmp.resolve("examples");
    int n = writeFuzzedFiles(dir, r, false, 4, 3000);
    List<Row> columnarRows = null;
    for (String columnar : new String[] {"true", "false"}) {
      Dataset<Row> df =
          spark
              .read()
              .format("tfrecord")
              .schema(COLUMNAR)
              .option("mode", "DROPMALFORMED")
              .option("columnar", columnar)
              .load(dir.toString());
      List<Row> rows = df.collectAsList();
      long dropped = ScanMetrics.droppedMalformedRecords(df);
      assertThat(rows.size() + dropped).as("rows + dropped (columnar=%s)", columnar).isEqualTo(n);
      assertThat((long) rows.size()).as("rows").isBetween((long) n / 10, (long) n - n / 10);
      if (columnarRows == null) {
        columnarRows = rows;
      } else {
        Dataset<Row> a = spark.createDataFrame(columnarRows, COLUMNAR);
        Dataset<Row> b = spark.createDataFrame(rows, COLUMNAR);
        assertThat(a.exceptAll(b).count()).as("rows only the columnar reader returns").isZero();
        assertThat(b.exceptAll(a).count()).as("rows only the row reader returns").isZero();
      }
    }
    // decimal and ml Vector columns: the row reader
    Dataset<Row> rowOnly =
        spark
            .read()
            .format("tfrecord")
            .schema(ROW_ONLY)
            .option("mode", "DROPMALFORMED")
            .load(dir.toString());
    long rows = rowOnly.collectAsList().size();
    assertThat(rows + ScanMetrics.droppedMalformedRecords(rowOnly)).isEqualTo(n);
    // and FAILFAST stops at the first bad record, naming it
    assertThatThrownBy(
            () ->
                spark
                    .read()
                    .format("tfrecord")
                    .schema(COLUMNAR)
                    .load(dir.toString())
                    .collectAsList())
        .hasStackTraceContaining("Corrupt TFRecord file file:" + dir)
        .hasStackTraceContaining(" at byte offset ");
  }

  @Test
  void sparkSequenceExampleDecoderDropsExactlyTheMalformedRecords() throws IOException {
    Random r = new Random(SEED + 1);
    Path dir = tmp.resolve("sequences");
    int n = writeFuzzedFiles(dir, r, true, 2, 2000);
    Dataset<Row> df =
        spark
            .read()
            .format("tfrecord")
            .option("recordType", "SequenceExample")
            .schema(SEQUENCE)
            .option("mode", "DROPMALFORMED")
            .load(dir.toString());
    long rows = df.collectAsList().size();
    long dropped = ScanMetrics.droppedMalformedRecords(df);
    assertThat(rows + dropped).isEqualTo(n);
    assertThat(rows).isBetween((long) n / 10, (long) n - n / 10);
  }

  @Test
  void sparkReadsOfDamagedFramingComplete() throws IOException {
    Random r = new Random(SEED + 2);
    Path dir = Files.createDirectories(tmp.resolve("framing"));
    Path clean = Files.createDirectories(tmp.resolve("framing-clean"));
    for (int f = 0; f < 3; f++) {
      List<byte[]> recs = new ArrayList<>();
      for (int i = 0; i < 2000; i++) {
        recs.add(conforming(r, false));
      }
      byte[] framed = Inputs.frame(recs, null);
      Files.write(clean.resolve("part-" + f + ".tfrecord"), framed);
      for (int m = 0; m < 20; m++) { // local damage: flipped, inserted or deleted bytes
        int at = r.nextInt(framed.length - 8);
        switch (r.nextInt(3)) {
          case 0:
            framed[at] ^= (byte) (1 + r.nextInt(255));
            break;
          case 1:
            framed =
                concat(
                    Arrays.copyOf(framed, at),
                    Inputs.randomBytes(r, 1 + r.nextInt(3)),
                    Arrays.copyOfRange(framed, at, framed.length));
            break;
          default:
            framed =
                concat(
                    Arrays.copyOf(framed, at),
                    Arrays.copyOfRange(framed, at + 1 + r.nextInt(3), framed.length));
        }
      }
      Files.write(dir.resolve("part-" + f + ".tfrecord"), framed);
    }
    String old = spark.conf().get("spark.sql.files.maxPartitionBytes");
    try {
      spark
          .conf()
          .set("spark.sql.files.maxPartitionBytes", "50000"); // resynchronising split starts too
      // the same records undamaged (some of them malformed for the schema: out-of-range ints)
      long baseline =
          spark
              .read()
              .format("tfrecord")
              .schema(COLUMNAR)
              .option("mode", "DROPMALFORMED")
              .load(clean.toString())
              .collectAsList()
              .size();
      List<Long> counts = new ArrayList<>();
      for (String columnar : new String[] {"true", "false"}) {
        Dataset<Row> df =
            spark
                .read()
                .format("tfrecord")
                .schema(COLUMNAR)
                .option("mode", "DROPMALFORMED")
                .option("columnar", columnar)
                .load(dir.toString());
        long rows = df.collectAsList().size();
        long dropped = ScanMetrics.droppedMalformedRecords(df);
        // each of the 60 damages costs the record it hits and, when the framing shifts, no more
        assertThat(rows).as("rows (columnar=%s)", columnar).isBetween(baseline - 120, baseline - 1);
        assertThat(dropped).as("dropped (columnar=%s)", columnar).isPositive();
        counts.add(rows);
      }
      assertThat(counts.get(0)).as("columnar and row readers").isEqualTo(counts.get(1));
    } finally {
      spark.conf().set("spark.sql.files.maxPartitionBytes", old);
    }
  }

  private static byte[] concat(byte[]... parts) {
    int n = 0;
    for (byte[] p : parts) {
      n += p.length;
    }
    byte[] out = new byte[n];
    int at = 0;
    for (byte[] p : parts) {
      System.arraycopy(p, 0, out, at, p.length);
      at += p.length;
    }
    return out;
  }
}
