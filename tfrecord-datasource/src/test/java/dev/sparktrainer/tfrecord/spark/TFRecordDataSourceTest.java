package dev.sparktrainer.tfrecord.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import java.util.stream.Stream;
import org.apache.spark.ml.linalg.DenseVector;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

class TFRecordDataSourceTest {
  private final SparkSession spark = SparkTestSession.get();

  @TempDir Path dir;

  private static void writeFile(Path file, List<byte[]> records, TFRecordCompression c)
      throws IOException {
    try (OutputStream os = Files.newOutputStream(file);
        TFRecordWriter w = new TFRecordWriter(c.compress(os))) {
      for (byte[] r : records) {
        w.write(r);
      }
    }
  }

  private static byte[] ex(Object... kv) {
    Map<String, Feature> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], (Feature) kv[i + 1]);
    }
    return Examples.encodeExample(m);
  }

  @Test
  void infersScalarsArraysAndPromotions() throws IOException {
    Path d = Files.createDirectories(dir.resolve("infer"));
    writeFile(
        d.resolve("a.tfrecord"),
        List.of(
            ex(
                "s",
                Feature.ofInt64(1),
                "arr",
                Feature.ofInt64(1),
                "mixed",
                Feature.ofInt64(2),
                "txt",
                Feature.ofStrings("x")),
            ex(
                "s",
                Feature.ofInt64(2),
                "arr",
                Feature.ofInt64(1, 2),
                "mixed",
                Feature.ofFloats(0.5f),
                "e",
                Feature.empty())),
        TFRecordCompression.NONE);
    Dataset<Row> df = spark.read().format("tfrecord").load(d.toString());
    assertThat(df.schema().simpleString())
        .isEqualTo("struct<arr:array<bigint>,e:array<string>,mixed:float,s:bigint,txt:string>");
    Dataset<Row> bin =
        spark.read().format("tfrecord").option("bytesAsBinary", "true").load(d.toString());
    assertThat(bin.schema().apply("txt").dataType()).isEqualTo(DataTypes.BinaryType);
    // A sample of one record sees "arr" single-valued: a scalar.
    Dataset<Row> one =
        spark.read().format("tfrecord").option("schemaSampleSize", "1").load(d.toString());
    assertThat(one.schema().apply("arr").dataType()).isEqualTo(DataTypes.LongType);
  }

  @Test
  void sequenceExampleWritesAndReads() {
    String out = dir.resolve("seq").toString();
    Dataset<Row> df =
        spark.sql(
            "select 1L as id, array(array(1.0f, 2.0f), array(3.0f)) as frames, array(array('a'), array('b','c')) as tokens"
                + " union all select 2L, array(), array(array())");
    df.write().format("tfrecord").option("recordType", "SequenceExample").save(out);
    Dataset<Row> back =
        spark.read().format("tfrecord").option("recordType", "SequenceExample").load(out);
    assertThat(back.schema().simpleString())
        .isEqualTo("struct<frames:array<array<float>>,id:bigint,tokens:array<array<string>>>");
    List<Row> rows = back.orderBy("id").collectAsList();
    assertThat(rows.get(0).getList(0).toString()).isEqualTo("[ArraySeq(1.0, 2.0), ArraySeq(3.0)]");
    assertThat(rows.get(0).getList(2).toString()).isEqualTo("[ArraySeq(a), ArraySeq(b, c)]");
    assertThat(rows.get(1).getList(0)).isEmpty();
    assertThat(rows.get(1).getList(2).toString()).isEqualTo("[ArraySeq()]");
  }

  @Test
  void partitionedWritesAndDiscovery() {
    String out = dir.resolve("part").toString();
    spark
        .range(0, 100)
        .selectExpr("id", "id % 3 as bucket", "cast(id % 2 as string) as half")
        .write()
        .format("tfrecord")
        .partitionBy("bucket", "half")
        .save(out);
    assertThat(Files.isDirectory(dir.resolve("part").resolve("bucket=1").resolve("half=0")))
        .isTrue();
    Dataset<Row> back = spark.read().format("tfrecord").load(out);
    assertThat(back.schema().fieldNames()).containsExactly("id", "bucket", "half");
    assertThat(back.where("bucket = 1 and half = '0'").count())
        .isEqualTo(LongStream.range(0, 100).filter(i -> i % 3 == 1 && i % 2 == 0).count());
    assertThat(back.selectExpr("sum(id)").first().getLong(0)).isEqualTo(4950L);
  }

  @Test
  void saveModes() {
    String out = dir.resolve("modes").toString();
    spark.range(5).write().format("tfrecord").save(out);
    assertThatThrownBy(() -> spark.range(5).write().format("tfrecord").save(out))
        .hasMessageContaining("already exists");
    spark.range(3).write().format("tfrecord").mode(SaveMode.Append).save(out);
    assertThat(spark.read().format("tfrecord").load(out).count()).isEqualTo(8);
    spark.range(2).write().format("tfrecord").mode(SaveMode.Ignore).save(out);
    assertThat(spark.read().format("tfrecord").load(out).count()).isEqualTo(8);
    spark.range(2).write().format("tfrecord").mode(SaveMode.Overwrite).save(out);
    assertThat(spark.read().format("tfrecord").load(out).count()).isEqualTo(2);
  }

  @Test
  void compressionOnWriteNamesFilesAndReadsBack() throws IOException {
    for (String[] c :
        new String[][] {
          {"compression", "gzip", ".tfrecord.gz"},
          {"codec", "zlib", ".tfrecord.deflate"},
          {"codec", "org.apache.hadoop.io.compress.GzipCodec", ".tfrecord.gz"},
          {"compression", "none", ".tfrecord"}
        }) {
      Path p = dir.resolve("c-" + c[1].replace('.', '_'));
      spark
          .range(0, 1000, 1, 2)
          .selectExpr("id", "cast(id as string) as s")
          .write()
          .format("tfrecord")
          .option(c[0], c[1])
          .save(p.toString());
      try (Stream<Path> files = Files.list(p)) {
        List<String> names =
            files
                .map(f -> f.getFileName().toString())
                .filter(n -> n.startsWith("part-"))
                .collect(Collectors.toList());
        assertThat(names).isNotEmpty().allSatisfy(n -> assertThat(n).endsWith(c[2]));
      }
      Dataset<Row> back = spark.read().format("tfrecord").load(p.toString());
      assertThat(back.selectExpr("sum(id)").first().getLong(0)).as(c[1]).isEqualTo(499500L);
    }
  }

  @Test
  void prunedColumnsAreNotDecoded() throws IOException {
    Path d = Files.createDirectories(dir.resolve("prune"));
    // "b" is a float feature; the schema says string: decoding it would fail.
    writeFile(
        d.resolve("p.tfrecord"),
        List.of(ex("a", Feature.ofInt64(1), "b", Feature.ofFloats(2f))),
        TFRecordCompression.NONE);
    StructType schema =
        new StructType().add("a", DataTypes.LongType).add("b", DataTypes.StringType);
    Dataset<Row> df = spark.read().format("tfrecord").schema(schema).load(d.toString());
    assertThat(df.select("a").first().getLong(0)).isEqualTo(1L);
    assertThatThrownBy(() -> df.select("b").collectAsList())
        .hasStackTraceContaining("feature 'b' is float but column 'b' is string");
  }

  @Test
  void mlVectorsReadAndWrite() throws IOException {
    Path d = Files.createDirectories(dir.resolve("vec"));
    writeFile(
        d.resolve("v.tfrecord"),
        List.of(ex("features", Feature.ofFloats(1f, 2.5f), "label", Feature.ofInt64(1))),
        TFRecordCompression.NONE);
    StructType schema =
        new StructType()
            .add("features", SQLDataTypes.VectorType())
            .add("label", DataTypes.DoubleType);
    Row r = spark.read().format("tfrecord").schema(schema).load(d.toString()).first();
    assertThat(((Vector) r.get(0)).toArray()).containsExactly(1.0, 2.5);
    assertThat(r.getDouble(1)).isEqualTo(1.0);

    // Writing: dense and sparse vectors become float lists.
    String out = dir.resolve("vec-out").toString();
    spark
        .read()
        .format("tfrecord")
        .schema(schema)
        .load(d.toString())
        .write()
        .format("tfrecord")
        .save(out);
    Row back = spark.read().format("tfrecord").load(out).first();
    assertThat(back.getList(back.fieldIndex("features"))).containsExactly(1f, 2.5f);
    assertThat(new DenseVector(new double[] {1}).size()).isEqualTo(1);
  }

  @Test
  void byteArrayRecords() {
    String out = dir.resolve("bytes").toString();
    spark
        .sql("select cast('abc' as binary) as byteArray union all select cast('' as binary)")
        .write()
        .format("tfrecord")
        .option("recordType", "ByteArray")
        .save(out);
    Dataset<Row> back = spark.read().format("tfrecord").option("recordType", "ByteArray").load(out);
    assertThat(back.schema().simpleString()).isEqualTo("struct<byteArray:binary>");
    Set<String> values = new HashSet<>();
    for (Row r : back.collectAsList()) {
      values.add(new String((byte[]) r.get(0)));
    }
    assertThat(values).containsExactlyInAnyOrder("abc", "");
  }

  @Test
  void badOptionsFailBeforeReading() {
    String path = dir.toString();
    assertThatThrownBy(
            () -> spark.read().format("tfrecord").option("recordType", "Exmaple").load(path))
        .hasMessageContaining(
            "Invalid recordType 'Exmaple': expected Example, SequenceExample or ByteArray");
    assertThatThrownBy(
            () -> spark.read().format("tfrecord").option("mode", "PERMISSIVE").load(path))
        .hasMessageContaining("Invalid mode 'PERMISSIVE': expected FAILFAST or DROPMALFORMED");
    assertThatThrownBy(
            () -> spark.read().format("tfrecord").option("maxRecordLength", "-3").load(path))
        .hasMessageContaining("Invalid maxRecordLength '-3'");
  }

  /** Corrupt records: FAILFAST names file and offset; DROPMALFORMED counts in the task metric. */
  @Test
  void corruptInputModes() throws IOException {
    Path d = Files.createDirectories(dir.resolve("corrupt"));
    List<byte[]> recs = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      recs.add(ex("i", Feature.ofInt64(i)));
    }
    recs.set(4, new byte[] {(byte) 0xFF, 0x01}); // framing fine, not an Example
    Path f = d.resolve("c.tfrecord");
    writeFile(f, recs, TFRecordCompression.NONE);
    byte[] bytes = Files.readAllBytes(f);
    int recLen = 16 + recs.get(0).length;
    bytes[recLen * 7 + 14] ^=
        0x40; // damage the data of record 7 (all records before it have equal length, record 4 is
    // shorter)
    Files.write(f, bytes);
    StructType schema = new StructType().add("i", DataTypes.LongType);

    assertThatThrownBy(
            () -> spark.read().format("tfrecord").schema(schema).load(d.toString()).collectAsList())
        .hasStackTraceContaining("Corrupt TFRecord file file:" + f)
        .hasStackTraceContaining("at byte offset " + (4L * recLen) + ": not a valid Example");

    Dataset<Row> dropped =
        spark
            .read()
            .format("tfrecord")
            .schema(schema)
            .option("mode", "DROPMALFORMED")
            .load(d.toString());
    List<Long> ids =
        dropped.collectAsList().stream().map(r -> r.getLong(0)).collect(Collectors.toList());
    assertThat(ids).doesNotContain(4L).hasSize(8);
    long metric = 0;
    SparkPlan plan = dropped.queryExecution().executedPlan();
    for (SparkPlan p : CollectionConverters.asJava(plan.collectLeaves())) {
      scala.Option<SQLMetric> m = p.metrics().get(DroppedRecordsMetric.NAME);
      if (m.isDefined()) {
        metric += m.get().value();
      }
    }
    assertThat(metric).isEqualTo(2);
  }

  /** Uncompressed files are split; every record is read exactly once whatever the split size. */
  @Test
  void splitReadsAreExactlyOnce() throws IOException {
    Path d = Files.createDirectories(dir.resolve("split"));
    Random rnd = new Random(7);
    long expectedSum = 0;
    int n = 0;
    for (int file = 0; file < 3; file++) {
      List<byte[]> recs = new ArrayList<>();
      for (int i = 0; i < 400; i++, n++) {
        byte[] pad = new byte[rnd.nextInt(3000)];
        rnd.nextBytes(pad);
        recs.add(ex("id", Feature.ofInt64(n), "pad", Feature.ofBytes(pad)));
        expectedSum += n;
      }
      writeFile(d.resolve("f" + file + ".tfrecord"), recs, TFRecordCompression.NONE);
    }
    String old = spark.conf().get("spark.sql.files.maxPartitionBytes");
    try {
      for (String size : new String[] {"4096", "100000", "777777", "134217728"}) {
        spark.conf().set("spark.sql.files.maxPartitionBytes", size);
        spark.conf().set("spark.sql.files.openCostInBytes", "0");
        Dataset<Row> df = spark.read().format("tfrecord").load(d.toString()).select("id");
        int partitions = df.rdd().getNumPartitions();
        List<Row> rows = df.collectAsList();
        Set<Long> ids = rows.stream().map(r -> r.getLong(0)).collect(Collectors.toSet());
        assertThat(rows).as("split size " + size + ", partitions " + partitions).hasSize(n);
        assertThat(ids).hasSize(n);
        assertThat(ids.stream().mapToLong(Long::longValue).sum()).isEqualTo(expectedSum);
        if (size.equals("4096")) {
          assertThat(partitions).isGreaterThan(100);
        }
      }
    } finally {
      spark.conf().set("spark.sql.files.maxPartitionBytes", old);
      spark.conf().unset("spark.sql.files.openCostInBytes");
    }
  }

  /** Catalog tables of file sources go through the V1 FileFormat: same results. */
  @Test
  void sqlTablesUseTheSameCode() {
    String out = dir.resolve("sql").toString();
    spark
        .range(0, 50)
        .selectExpr("id", "array(cast(id as float), 0f) as v")
        .write()
        .format("tfrecord")
        .save(out);
    spark.sql("DROP TABLE IF EXISTS tf_sql_test");
    spark.sql("CREATE TABLE tf_sql_test USING tfrecord LOCATION '" + out + "'");
    try {
      assertThat(spark.sql("SELECT sum(id), sum(v[0]) FROM tf_sql_test").first().toString())
          .isEqualTo("[1225,1225.0]");
      spark.sql("INSERT INTO tf_sql_test SELECT 100L, array(1.5f, 0f)");
      assertThat(spark.sql("SELECT count(*) FROM tf_sql_test").first().getLong(0)).isEqualTo(51L);
    } finally {
      spark.sql("DROP TABLE IF EXISTS tf_sql_test");
    }
  }
}
