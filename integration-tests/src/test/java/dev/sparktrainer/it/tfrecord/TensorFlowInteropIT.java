package dev.sparktrainer.it.tfrecord;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import java.util.zip.InflaterInputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.GzipCodec;
import org.apache.hadoop.mapreduce.InputSplit;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.RecordReader;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.tensorflow.example.BytesList;
import org.tensorflow.example.Example;
import org.tensorflow.example.Feature;
import org.tensorflow.example.FeatureList;
import org.tensorflow.example.FeatureLists;
import org.tensorflow.example.Features;
import org.tensorflow.example.FloatList;
import org.tensorflow.example.Int64List;
import org.tensorflow.example.SequenceExample;
import org.tensorflow.hadoop.io.TFRecordFileInputFormat;
import org.tensorflow.hadoop.io.TFRecordFileOutputFormat;
import org.tensorflow.hadoop.util.TFRecordReader;
import org.tensorflow.hadoop.util.TFRecordWriter;
import scala.Tuple2;
import scala.collection.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Interoperability with Google's own TFRecord implementation ({@code
 * org.tensorflow:tensorflow-hadoop} and the generated {@code tf.train.*} classes of {@code
 * org.tensorflow:proto}, on their protobuf-java 3.x runtime): files TensorFlow's classes write are
 * read by the {@code tfrecord} source with identical values, and what the source writes is read
 * back by TensorFlow's reader, record format and Hadoop input format.
 *
 * <p>Values are compared exactly: floats by their raw bits (NaN, -0.0, infinities), bytes byte for
 * byte. Expected values are always derived from TensorFlow's own objects (what its builders were
 * given, or what its parser returns), never from our codec.
 */
class TensorFlowInteropIT {
  private static SparkSession spark;

  @TempDir static Path tmp;

  @BeforeAll
  static void startSpark() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("TensorFlowInteropIT")
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
    }
  }

  // ---------------------------------------------------------------------------------------------
  // 1. TensorFlow writes Examples, the source reads them.

  private static final String UNICODE_NAME = "naïve_特征";
  private static final float NAN_PAYLOAD = Float.intBitsToFloat(0x7fc0_1234);
  private static final int EXAMPLES = 64;

  /** Examples built with TensorFlow's generated builders, covering the edge cases of each kind. */
  private static List<Example> tfExamples() {
    long[] bigs = {
      0,
      1,
      -1,
      Long.MIN_VALUE,
      Long.MAX_VALUE,
      Integer.MIN_VALUE,
      1L << 53,
      -(1L << 40) - 7,
      127,
      128
    };
    float[] specials = {
      Float.NaN,
      NAN_PAYLOAD,
      -0.0f,
      0.0f,
      Float.POSITIVE_INFINITY,
      Float.NEGATIVE_INFINITY,
      Float.MIN_VALUE,
      Float.MAX_VALUE,
      -Float.MIN_NORMAL,
      1.1f
    };
    String[] strings = {"", "ascii", "héllo wörld", "日本語テキスト", "emoji \uD83D\uDE80", "a\u0000b"};
    Random rnd = new Random(42);
    List<Example> out = new ArrayList<>();
    for (int i = 0; i < EXAMPLES; i++) {
      Features.Builder f = Features.newBuilder();
      f.putFeature("id", int64s(i));
      f.putFeature("big", int64s(bigs[i % bigs.length]));
      long[] ints = new long[i % 5]; // includes the empty list (i % 5 == 0)
      for (int j = 0; j < ints.length; j++) {
        ints[j] = rnd.nextLong() >> rnd.nextInt(64);
      }
      f.putFeature("ints", int64s(ints));
      float[] floats = new float[i % 4 == 0 ? 0 : 1 + i % 7];
      for (int j = 0; j < floats.length; j++) {
        floats[j] =
            j % 2 == 0 ? specials[(i + j) % specials.length] : rnd.nextFloat() * 1e6f - 5e5f;
      }
      f.putFeature("floats", floats(floats));
      f.putFeature("score", floats(specials[i % specials.length]));
      f.putFeature("name", bytes(strings[i % strings.length].getBytes(StandardCharsets.UTF_8)));
      // the last record's value is larger than the readers' initial buffers
      byte[] blob = new byte[i == EXAMPLES - 1 ? 300_000 : i % 9 == 0 ? 0 : rnd.nextInt(40) + 1];
      rnd.nextBytes(blob); // arbitrary binary, mostly not UTF-8
      f.putFeature("blob", bytes(blob));
      byte[][] strs = new byte[i % 3][];
      for (int j = 0; j < strs.length; j++) {
        strs[j] = strings[(i + j) % strings.length].getBytes(StandardCharsets.UTF_8);
      }
      f.putFeature("strs", bytes(strs));
      f.putFeature("empty", Feature.getDefaultInstance()); // a Feature with no kind set
      f.putFeature(UNICODE_NAME, int64s(i * 3L, -i));
      if (i % 3 == 1) {
        f.putFeature("sometimes", int64s(-i)); // missing in two thirds of the records
      }
      out.add(Example.newBuilder().setFeatures(f).build());
    }
    return out;
  }

  @Test
  void readsUncompressedFileWrittenByTensorFlowsWriter() throws IOException {
    List<Example> examples = tfExamples();
    Path file = tmp.resolve("tf-none/data.tfrecord");
    Files.createDirectories(file.getParent());
    try (DataOutputStream out = new DataOutputStream(Files.newOutputStream(file))) {
      TFRecordWriter w = new TFRecordWriter(out);
      for (Example e : examples) {
        w.write(e.toByteArray());
      }
    }
    checkReadsTfExamples(file.getParent().toString(), examples);
  }

  @Test
  void readsGzipFilesWrittenByTensorFlowsOutputFormat() {
    // What spark-tensorflow-connector does: saveAsNewAPIHadoopFile with TFRecordFileOutputFormat,
    // gzip through Hadoop's GzipCodec (files part-r-NNNNN.gz).
    List<Example> examples = tfExamples();
    String dir = tmp.resolve("tf-gzip").toString();
    List<byte[]> records = examples.stream().map(Example::toByteArray).collect(Collectors.toList());
    Configuration conf = new Configuration(spark.sparkContext().hadoopConfiguration());
    conf.setBoolean(FileOutputFormat.COMPRESS, true);
    conf.setClass(FileOutputFormat.COMPRESS_CODEC, GzipCodec.class, CompressionCodec.class);
    JavaSparkContext.fromSparkContext(spark.sparkContext())
        .parallelize(records, 2)
        .mapToPair(b -> new Tuple2<>(new BytesWritable(b), NullWritable.get()))
        .saveAsNewAPIHadoopFile(
            dir, BytesWritable.class, NullWritable.class, TFRecordFileOutputFormat.class, conf);
    assertThat(listFiles(Path.of(dir), ".gz")).hasSize(2);
    checkReadsTfExamples(dir, examples);
  }

  @Test
  void readsZlibFileFramedByTensorFlowsWriter() throws IOException {
    List<Example> examples = tfExamples();
    Path file = tmp.resolve("tf-zlib/data.tfrecord.zlib");
    Files.createDirectories(file.getParent());
    try (DataOutputStream out =
        new DataOutputStream(new DeflaterOutputStream(Files.newOutputStream(file)))) {
      TFRecordWriter w = new TFRecordWriter(out);
      for (Example e : examples) {
        w.write(e.toByteArray());
      }
    }
    checkReadsTfExamples(file.getParent().toString(), examples);
  }

  private static final StructType INFERRED =
      new StructType()
          .add("big", DataTypes.LongType)
          .add("blob", DataTypes.StringType)
          .add("empty", DataTypes.createArrayType(DataTypes.StringType))
          .add("floats", DataTypes.createArrayType(DataTypes.FloatType))
          .add("id", DataTypes.LongType)
          .add("ints", DataTypes.createArrayType(DataTypes.LongType))
          .add("name", DataTypes.StringType)
          .add(UNICODE_NAME, DataTypes.createArrayType(DataTypes.LongType))
          .add("score", DataTypes.FloatType)
          .add("sometimes", DataTypes.LongType)
          .add("strs", DataTypes.createArrayType(DataTypes.StringType));

  /** A user schema: another order, widened and binary types, an absent feature, a subset. */
  private static final StructType USER =
      new StructType()
          .add("id", DataTypes.LongType)
          .add("blob", DataTypes.BinaryType)
          .add("score", DataTypes.DoubleType)
          .add("floats", DataTypes.createArrayType(DataTypes.FloatType))
          .add("ints", DataTypes.createArrayType(DataTypes.LongType))
          .add("big", DataTypes.LongType)
          .add("sometimes", DataTypes.createArrayType(DataTypes.LongType))
          .add("strs", DataTypes.createArrayType(DataTypes.BinaryType))
          .add("name", DataTypes.StringType)
          .add("empty", DataTypes.StringType)
          .add(UNICODE_NAME, DataTypes.createArrayType(DataTypes.LongType))
          .add("absent", DataTypes.FloatType);

  /** Both read paths of the source: columnar batches (the default for Examples) and rows. */
  private static final List<String> COLUMNAR = List.of("true", "false");

  private static void checkReadsTfExamples(String dir, List<Example> examples) {
    for (String columnar : COLUMNAR) {
      Dataset<Row> inferred =
          spark.read().format("tfrecord").option("columnar", columnar).load(dir);
      assertThat(inferred.schema()).isEqualTo(INFERRED);
      checkRows(inferred, examples);

      Dataset<Row> user =
          spark.read().format("tfrecord").option("columnar", columnar).schema(USER).load(dir);
      assertThat(user.schema()).isEqualTo(USER);
      checkRows(user, examples);

      // Column pruning: only the selected features are decoded, same values.
      checkRows(user.select("ints", "id", "blob"), examples);
    }
  }

  private static void checkRows(Dataset<Row> df, List<Example> examples) {
    StructType schema = df.schema();
    List<Row> rows = df.collectAsList();
    assertThat(rows).hasSize(examples.size());
    int idIndex = schema.fieldIndex("id");
    for (Row row : rows) {
      Example ex = examples.get((int) row.getLong(idIndex));
      Map<String, Feature> features = ex.getFeatures().getFeatureMap();
      for (StructField field : schema.fields()) {
        Object actual = normalize(row.get(schema.fieldIndex(field.name())), field.dataType());
        Object expected = expectedFromTf(features.get(field.name()), field.dataType());
        assertThat(actual)
            .as(
                "row id %d column %s (%s)",
                row.getLong(idIndex), field.name(), field.dataType().simpleString())
            .isEqualTo(expected);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // 2. Non-packed (and mixed) list encodings, which protobuf parsers must accept.

  @Test
  void readsUnpackedAndMixedEncodingsAsTensorFlowParsesThem() throws IOException {
    Random rnd = new Random(7);
    List<byte[]> records = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      long[] ints = new long[i % 6];
      for (int j = 0; j < ints.length; j++) {
        ints[j] = j == 0 ? Long.MIN_VALUE + i : rnd.nextLong() >> rnd.nextInt(64);
      }
      float[] floats = new float[(i + 1) % 5];
      for (int j = 0; j < floats.length; j++) {
        floats[j] = j == 1 ? -0.0f : j == 2 ? Float.NaN : rnd.nextFloat() - 0.5f;
      }
      // mode 0: every value unpacked; 1: packed run then unpacked values; 2: unpacked then packed
      records.add(handEncodedExample(i, ints, floats, i % 3));
    }
    Path file = tmp.resolve("unpacked/data.tfrecord");
    Files.createDirectories(file.getParent());
    try (DataOutputStream out = new DataOutputStream(Files.newOutputStream(file))) {
      TFRecordWriter w = new TFRecordWriter(out);
      for (byte[] r : records) {
        w.write(r);
      }
    }
    List<Example> parsedByTf = new ArrayList<>();
    for (byte[] r : records) {
      parsedByTf.add(Example.parseFrom(r));
    }
    // Sanity of the test: TensorFlow sees the values, and its own encoding (packed) is different.
    assertThat(
            parsedByTf
                .get(5)
                .getFeatures()
                .getFeatureOrThrow("ints")
                .getInt64List()
                .getValueCount())
        .isEqualTo(5);
    assertThat(
            parsedByTf
                .get(3)
                .getFeatures()
                .getFeatureOrThrow("ints")
                .getInt64List()
                .getValueCount())
        .isEqualTo(3);
    assertThat(parsedByTf.get(3).toByteArray()).isNotEqualTo(records.get(3)); // i = 3: all unpacked

    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType)
            .add("ints", DataTypes.createArrayType(DataTypes.LongType))
            .add("floats", DataTypes.createArrayType(DataTypes.FloatType));
    for (String columnar : COLUMNAR) {
      String dir = file.getParent().toString();
      checkRows(
          spark.read().format("tfrecord").option("columnar", columnar).schema(schema).load(dir),
          parsedByTf);
      Dataset<Row> inferred =
          spark.read().format("tfrecord").option("columnar", columnar).load(dir);
      assertThat(inferred.schema().fieldNames()).containsExactly("floats", "id", "ints");
      checkRows(inferred, parsedByTf);
    }
  }

  /**
   * Protobuf merge semantics TensorFlow's parser applies, on records no TensorFlow writer emits but
   * any protobuf library may: a repeated map key (the last entry wins), {@code Example.features}
   * twice (the maps merge), a list split into two runs (they concatenate), unknown fields
   * (skipped).
   */
  @Test
  void readsProtobufMergeSemanticsAsTensorFlowDoes() throws IOException {
    List<byte[]> records = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      ByteArrayOutputStream first = new ByteArrayOutputStream();
      CodedOutputStream a = CodedOutputStream.newInstance(first);
      writeEntry(a, "id", intsFeature(new long[] {i}, 0));
      writeEntry(a, "dup", intsFeature(new long[] {-1, -2}, 0)); // replaced below
      // Two serialized Features back to back are one Feature with float_list twice: merged.
      byte[] run1 = floatsFeature(new float[] {1.5f, -0.0f}, 0);
      byte[] run2 = floatsFeature(new float[] {Float.NaN, i}, 1);
      byte[] split = Arrays.copyOf(run1, run1.length + run2.length);
      System.arraycopy(run2, 0, split, run1.length, run2.length);
      writeEntry(a, "split", split);
      a.writeString(99, "unknown field in Features");
      a.flush();
      ByteArrayOutputStream second = new ByteArrayOutputStream();
      CodedOutputStream b = CodedOutputStream.newInstance(second);
      writeEntry(b, "dup", intsFeature(new long[] {i * 1000L}, 1)); // the last entry wins
      writeEntry(b, "other", intsFeature(new long[] {7, 8, 9}, 2));
      b.flush();
      ByteArrayOutputStream example = new ByteArrayOutputStream();
      CodedOutputStream e = CodedOutputStream.newInstance(example);
      e.writeByteArray(1, first.toByteArray());
      e.writeUInt64(42, 12345); // unknown field in Example
      e.writeByteArray(1, second.toByteArray()); // Example.features again: merged
      e.flush();
      records.add(example.toByteArray());
    }
    Path file = tmp.resolve("merge/data.tfrecord");
    Files.createDirectories(file.getParent());
    try (DataOutputStream out = new DataOutputStream(Files.newOutputStream(file))) {
      TFRecordWriter w = new TFRecordWriter(out);
      for (byte[] r : records) {
        w.write(r);
      }
    }
    List<Example> parsedByTf = new ArrayList<>();
    for (byte[] r : records) {
      parsedByTf.add(Example.parseFrom(r));
    }
    assertThat(
            parsedByTf.get(3).getFeatures().getFeatureOrThrow("dup").getInt64List().getValueList())
        .containsExactly(3000L);
    assertThat(parsedByTf.get(3).getFeatures().getFeatureMap())
        .containsKeys("id", "split", "other");
    assertThat(
            parsedByTf
                .get(3)
                .getFeatures()
                .getFeatureOrThrow("split")
                .getFloatList()
                .getValueList())
        .containsExactly(1.5f, -0.0f, Float.NaN, 3f);

    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType)
            .add("dup", DataTypes.createArrayType(DataTypes.LongType))
            .add("split", DataTypes.createArrayType(DataTypes.FloatType))
            .add("other", DataTypes.createArrayType(DataTypes.LongType));
    for (String columnar : COLUMNAR) {
      String dir = file.getParent().toString();
      checkRows(
          spark.read().format("tfrecord").option("columnar", columnar).schema(schema).load(dir),
          parsedByTf);
      checkRows(spark.read().format("tfrecord").option("columnar", columnar).load(dir), parsedByTf);
    }
  }

  /**
   * tf.train.Example written field by field with protobuf's CodedOutputStream: the int64 and float
   * lists use the non-packed wire encoding (field 1 repeated, wire type 0 / 5 per value), alone or
   * mixed with a packed run.
   */
  private static byte[] handEncodedExample(long id, long[] ints, float[] floats, int mode)
      throws IOException {
    ByteArrayOutputStream features = new ByteArrayOutputStream();
    CodedOutputStream fo = CodedOutputStream.newInstance(features);
    writeEntry(fo, "id", intsFeature(new long[] {id}, 0));
    writeEntry(fo, "ints", intsFeature(ints, mode));
    writeEntry(fo, "floats", floatsFeature(floats, mode));
    fo.flush();
    ByteArrayOutputStream example = new ByteArrayOutputStream();
    CodedOutputStream eo = CodedOutputStream.newInstance(example);
    eo.writeByteArray(1, features.toByteArray()); // Example.features
    eo.flush();
    return example.toByteArray();
  }

  private static byte[] intsFeature(long[] v, int mode) throws IOException {
    ByteArrayOutputStream list = new ByteArrayOutputStream();
    CodedOutputStream lo = CodedOutputStream.newInstance(list);
    int split = mode == 0 ? 0 : v.length / 2;
    if (mode == 1) {
      lo.writeByteArray(1, packedInts(v, 0, split));
      for (int j = split; j < v.length; j++) {
        lo.writeInt64(1, v[j]); // tag (1, varint) per value
      }
    } else {
      int packedFrom = mode == 2 ? split : v.length;
      for (int j = 0; j < packedFrom; j++) {
        lo.writeInt64(1, v[j]);
      }
      if (mode == 2) {
        lo.writeByteArray(1, packedInts(v, packedFrom, v.length));
      }
    }
    lo.flush();
    return wrapList(3, list.toByteArray());
  }

  private static byte[] floatsFeature(float[] v, int mode) throws IOException {
    ByteArrayOutputStream list = new ByteArrayOutputStream();
    CodedOutputStream lo = CodedOutputStream.newInstance(list);
    int split = mode == 0 ? 0 : v.length / 2;
    if (mode == 1) {
      lo.writeByteArray(1, packedFloats(v, 0, split));
      for (int j = split; j < v.length; j++) {
        lo.writeFloat(1, v[j]); // tag (1, fixed32) per value
      }
    } else {
      int packedFrom = mode == 2 ? split : v.length;
      for (int j = 0; j < packedFrom; j++) {
        lo.writeFloat(1, v[j]);
      }
      if (mode == 2) {
        lo.writeByteArray(1, packedFloats(v, packedFrom, v.length));
      }
    }
    lo.flush();
    return wrapList(2, list.toByteArray());
  }

  private static byte[] packedInts(long[] v, int from, int to) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    CodedOutputStream o = CodedOutputStream.newInstance(b);
    for (int j = from; j < to; j++) {
      o.writeInt64NoTag(v[j]);
    }
    o.flush();
    return b.toByteArray();
  }

  private static byte[] packedFloats(float[] v, int from, int to) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    CodedOutputStream o = CodedOutputStream.newInstance(b);
    for (int j = from; j < to; j++) {
      o.writeFloatNoTag(v[j]);
    }
    o.flush();
    return b.toByteArray();
  }

  /** Feature { oneof kind: field kindField = list }. */
  private static byte[] wrapList(int kindField, byte[] list) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    CodedOutputStream o = CodedOutputStream.newInstance(b);
    o.writeByteArray(kindField, list);
    o.flush();
    return b.toByteArray();
  }

  /** One entry of Features.feature (map&lt;string, Feature&gt;): key field 1, value field 2. */
  private static void writeEntry(CodedOutputStream o, String key, byte[] feature)
      throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    CodedOutputStream e = CodedOutputStream.newInstance(b);
    e.writeString(1, key);
    e.writeByteArray(2, feature);
    e.flush();
    o.writeByteArray(1, b.toByteArray());
  }

  // ---------------------------------------------------------------------------------------------
  // 3. TensorFlow writes SequenceExamples, the source reads them.

  @Test
  void readsSequenceExamplesWrittenByTensorFlow() throws IOException {
    Random rnd = new Random(3);
    List<SequenceExample> seqs = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      Features.Builder ctx = Features.newBuilder();
      ctx.putFeature("id", int64s(i));
      ctx.putFeature("label", bytes(("label-" + i + "-ü").getBytes(StandardCharsets.UTF_8)));
      ctx.putFeature("weight", floats(i % 5 == 0 ? -0.0f : rnd.nextFloat()));
      FeatureLists.Builder lists = FeatureLists.newBuilder();
      FeatureList.Builder tokens = FeatureList.newBuilder();
      for (int t = 0; t < i % 4; t++) {
        long[] v = new long[t]; // the first step is an empty list
        for (int j = 0; j < t; j++) {
          v[j] = rnd.nextLong() >> rnd.nextInt(64);
        }
        tokens.addFeature(int64s(v));
      }
      lists.putFeatureList("tokens", tokens.build()); // i % 4 == 0: an empty feature list
      if (i % 3 != 2) {
        FeatureList.Builder frames = FeatureList.newBuilder();
        for (int t = 0; t < 1 + i % 3; t++) {
          frames.addFeature(
              floats(rnd.nextFloat(), Float.NaN, t == 0 ? Float.NEGATIVE_INFINITY : -0.0f));
        }
        lists.putFeatureList("frames", frames.build()); // missing in a third of the records
      }
      FeatureList.Builder words = FeatureList.newBuilder();
      for (int t = 0; t < 2; t++) {
        words.addFeature(bytes(("w" + i + t).getBytes(StandardCharsets.UTF_8), new byte[0]));
      }
      lists.putFeatureList("words", words.build());
      seqs.add(SequenceExample.newBuilder().setContext(ctx).setFeatureLists(lists).build());
    }
    Path file = tmp.resolve("tf-seq/data.tfrecord.gz");
    Files.createDirectories(file.getParent());
    try (DataOutputStream out =
        new DataOutputStream(new GZIPOutputStream(Files.newOutputStream(file)))) {
      TFRecordWriter w = new TFRecordWriter(out);
      for (SequenceExample s : seqs) {
        w.write(s.toByteArray());
      }
    }

    StructType expectedSchema =
        new StructType()
            .add("frames", nested(DataTypes.FloatType))
            .add("id", DataTypes.LongType)
            .add("label", DataTypes.StringType)
            .add("tokens", nested(DataTypes.LongType))
            .add("weight", DataTypes.FloatType)
            .add("words", nested(DataTypes.StringType));
    Dataset<Row> inferred =
        spark
            .read()
            .format("tfrecord")
            .option("recordType", "SequenceExample")
            .load(file.getParent().toString());
    assertThat(inferred.schema()).isEqualTo(expectedSchema);
    checkSequenceRows(inferred, seqs);

    StructType user =
        new StructType()
            .add("words", nested(DataTypes.BinaryType))
            .add("id", DataTypes.LongType)
            .add("tokens", nested(DataTypes.LongType))
            .add("weight", DataTypes.DoubleType)
            .add("frames", nested(DataTypes.DoubleType));
    checkSequenceRows(
        spark
            .read()
            .format("tfrecord")
            .option("recordType", "SequenceExample")
            .schema(user)
            .load(file.getParent().toString()),
        seqs);
  }

  private static ArrayType nested(DataType t) {
    return DataTypes.createArrayType(DataTypes.createArrayType(t));
  }

  private static void checkSequenceRows(Dataset<Row> df, List<SequenceExample> seqs) {
    StructType schema = df.schema();
    List<Row> rows = df.collectAsList();
    assertThat(rows).hasSize(seqs.size());
    int idIndex = schema.fieldIndex("id");
    for (Row row : rows) {
      SequenceExample s = seqs.get((int) row.getLong(idIndex));
      for (StructField field : schema.fields()) {
        DataType t = field.dataType();
        Object expected;
        if (t instanceof ArrayType && ((ArrayType) t).elementType() instanceof ArrayType) {
          FeatureList fl = s.getFeatureLists().getFeatureListMap().get(field.name());
          if (fl == null) {
            expected = null;
          } else {
            List<Object> steps = new ArrayList<>();
            for (Feature f : fl.getFeatureList()) {
              steps.add(expectedFromTf(f, ((ArrayType) t).elementType()));
            }
            expected = steps;
          }
        } else {
          expected = expectedFromTf(s.getContext().getFeatureMap().get(field.name()), t);
        }
        Object actual = normalize(row.get(schema.fieldIndex(field.name())), t);
        assertThat(actual)
            .as("row id %d column %s", row.getLong(idIndex), field.name())
            .isEqualTo(expected);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // 4. The source writes, TensorFlow reads.

  private static final StructType WRITE_SCHEMA =
      new StructType()
          .add("id", DataTypes.LongType, false)
          .add("i", DataTypes.IntegerType)
          .add("flag", DataTypes.BooleanType)
          .add("f", DataTypes.FloatType)
          .add("d", DataTypes.DoubleType)
          .add("s", DataTypes.StringType)
          .add("bin", DataTypes.BinaryType)
          .add("longs", DataTypes.createArrayType(DataTypes.LongType, false))
          .add("floats", DataTypes.createArrayType(DataTypes.FloatType, false))
          .add("strs", DataTypes.createArrayType(DataTypes.StringType, false));

  private static List<Row> writeRows() {
    Random rnd = new Random(11);
    float[] specials = {
      Float.NaN, -0.0f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MIN_VALUE
    };
    List<Row> rows = new ArrayList<>();
    for (int n = 0; n < 120; n++) {
      long id = n;
      Integer i = n % 7 == 3 ? null : (n % 2 == 0 ? Integer.MIN_VALUE + n : rnd.nextInt());
      Boolean flag = n % 5 == 4 ? null : n % 2 == 0;
      Float f = n % 6 == 5 ? null : specials[n % specials.length];
      Double d = n % 4 == 1 ? null : rnd.nextGaussian() * 1e10;
      String s = n % 8 == 7 ? null : "text-" + n + "-ß日本\uD83D\uDE00";
      byte[] bin = new byte[n % 10];
      rnd.nextBytes(bin);
      long[] longs = new long[n % 4];
      for (int j = 0; j < longs.length; j++) {
        longs[j] = j == 0 ? Long.MIN_VALUE : rnd.nextLong();
      }
      float[] floats = new float[n % 5];
      for (int j = 0; j < floats.length; j++) {
        floats[j] = j == 1 ? specials[n % specials.length] : rnd.nextFloat();
      }
      String[] strs = new String[n % 3];
      for (int j = 0; j < strs.length; j++) {
        strs[j] = j == 0 ? "" : "s" + rnd.nextInt(1000);
      }
      rows.add(
          RowFactory.create(
              id,
              i,
              flag,
              f,
              d,
              s,
              n % 9 == 8 ? null : bin,
              n % 11 == 10 ? null : boxed(longs),
              boxed(floats),
              Arrays.asList(strs)));
    }
    return rows;
  }

  @ParameterizedTest
  @ValueSource(strings = {"none", "gzip", "zlib"})
  void tensorFlowReadsExamplesWrittenBySource(String compression) throws IOException {
    List<Row> rows = writeRows();
    String dir = tmp.resolve("ours-example-" + compression).toString();
    spark
        .createDataFrame(rows, WRITE_SCHEMA)
        .repartition(3)
        .write()
        .format("tfrecord")
        .option("compression", compression)
        .save(dir);

    List<byte[]> records = readWithTensorFlow(Path.of(dir), compression);
    assertThat(records).hasSize(rows.size());
    List<Example> examples = new ArrayList<>();
    for (byte[] r : records) {
      examples.add(Example.parseFrom(r)); // TensorFlow's own parser
    }
    examples.sort(
        Comparator.comparingLong(
            e -> e.getFeatures().getFeatureOrThrow("id").getInt64List().getValue(0)));
    for (int n = 0; n < rows.size(); n++) {
      Row row = rows.get(n);
      Map<String, Feature> features = examples.get(n).getFeatures().getFeatureMap();
      for (StructField field : WRITE_SCHEMA.fields()) {
        Object value = row.get(WRITE_SCHEMA.fieldIndex(field.name()));
        if (value == null) {
          assertThat(features)
              .as("row %d: null column %s is omitted", n, field.name())
              .doesNotContainKey(field.name());
        } else {
          assertThat(tfView(features.get(field.name())))
              .as("row %d column %s", n, field.name())
              .isEqualTo(expectedTfView(value, field.dataType()));
        }
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"none", "gzip", "zlib"})
  void tensorFlowReadsSequenceExamplesWrittenBySource(String compression) throws IOException {
    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType, false)
            .add("label", DataTypes.StringType)
            .add("tokens", nested(DataTypes.LongType))
            .add("frames", nested(DataTypes.FloatType))
            .add("words", nested(DataTypes.StringType));
    Random rnd = new Random(5);
    List<Row> rows = new ArrayList<>();
    for (int n = 0; n < 40; n++) {
      List<List<Long>> tokens = new ArrayList<>();
      for (int t = 0; t < n % 4; t++) {
        List<Long> step = new ArrayList<>();
        for (int j = 0; j < t; j++) {
          step.add(rnd.nextLong());
        }
        tokens.add(step); // the first step is empty; n % 4 == 0 is an empty list of steps
      }
      List<List<Float>> frames = new ArrayList<>();
      for (int t = 0; t < 1 + n % 3; t++) {
        frames.add(Arrays.asList(rnd.nextFloat(), Float.NaN, -0.0f));
      }
      List<List<String>> words = List.of(List.of("a" + n, ""), List.of("ü" + n));
      rows.add(
          RowFactory.create(
              (long) n,
              n % 5 == 4 ? null : "label" + n,
              tokens,
              n % 3 == 2 ? null : frames,
              words));
    }
    String dir = tmp.resolve("ours-seq-" + compression).toString();
    spark
        .createDataFrame(rows, schema)
        .repartition(2)
        .write()
        .format("tfrecord")
        .option("recordType", "SequenceExample")
        .option("compression", compression)
        .save(dir);

    List<SequenceExample> seqs = new ArrayList<>();
    for (byte[] r : readWithTensorFlow(Path.of(dir), compression)) {
      seqs.add(SequenceExample.parseFrom(r));
    }
    assertThat(seqs).hasSize(rows.size());
    seqs.sort(
        Comparator.comparingLong(
            s -> s.getContext().getFeatureOrThrow("id").getInt64List().getValue(0)));
    for (int n = 0; n < rows.size(); n++) {
      Row row = rows.get(n);
      SequenceExample s = seqs.get(n);
      assertThat(s.getContext().getFeatureMap().keySet())
          .containsExactlyInAnyOrderElementsOf(
              row.get(1) == null ? List.of("id") : List.of("id", "label"));
      if (row.get(1) != null) {
        assertThat(tfView(s.getContext().getFeatureOrThrow("label")))
            .isEqualTo(expectedTfView(row.get(1), DataTypes.StringType));
      }
      Map<String, FeatureList> lists = s.getFeatureLists().getFeatureListMap();
      for (String name : List.of("tokens", "frames", "words")) {
        Object value = row.get(schema.fieldIndex(name));
        if (value == null) {
          assertThat(lists)
              .as("row %d: null feature list %s is omitted", n, name)
              .doesNotContainKey(name);
          continue;
        }
        ArrayType inner = (ArrayType) ((ArrayType) schema.apply(name).dataType()).elementType();
        List<?> steps = (List<?>) value;
        List<Feature> tfSteps = lists.get(name).getFeatureList();
        assertThat(tfSteps).as("row %d list %s", n, name).hasSameSizeAs(steps);
        for (int t = 0; t < steps.size(); t++) {
          assertThat(tfView(tfSteps.get(t)))
              .as("row %d list %s step %d", n, name, t)
              .isEqualTo(expectedTfView(steps.get(t), inner));
        }
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"none", "gzip", "zlib"})
  void tensorFlowReadsByteArrayRecordsWrittenBySource(String compression) throws IOException {
    Random rnd = new Random(9);
    List<Row> rows = new ArrayList<>();
    for (int n = 0; n < 50; n++) {
      byte[] b = new byte[n == 0 ? 0 : rnd.nextInt(n * 40)];
      rnd.nextBytes(b);
      rows.add(RowFactory.create((Object) b));
    }
    StructType schema = new StructType().add("byteArray", DataTypes.BinaryType, false);
    String dir = tmp.resolve("ours-bytes-" + compression).toString();
    spark
        .createDataFrame(rows, schema)
        .repartition(2)
        .write()
        .format("tfrecord")
        .option("recordType", "ByteArray")
        .option("compression", compression)
        .save(dir);
    List<String> expected =
        rows.stream().map(r -> hex((byte[]) r.get(0))).sorted().collect(Collectors.toList());
    List<String> actual =
        readWithTensorFlow(Path.of(dir), compression).stream()
            .map(TensorFlowInteropIT::hex)
            .sorted()
            .collect(Collectors.toList());
    assertThat(actual).isEqualTo(expected);
  }

  /** Every record of the part files in {@code dir}, by TensorFlow's reader with CRC checks on. */
  private static List<byte[]> readWithTensorFlow(Path dir, String compression) throws IOException {
    String ext =
        Map.of("none", ".tfrecord", "gzip", ".tfrecord.gz", "zlib", ".tfrecord.deflate")
            .get(compression);
    List<Path> files = listFiles(dir, ext);
    assertThat(files).as("part files *%s in %s", ext, dir).isNotEmpty();
    List<byte[]> records = new ArrayList<>();
    for (Path file : files) {
      try (InputStream raw = new BufferedInputStream(Files.newInputStream(file));
          InputStream in =
              compression.equals("gzip")
                  ? new GZIPInputStream(raw)
                  : compression.equals("zlib") ? new InflaterInputStream(raw) : raw) {
        TFRecordReader reader = new TFRecordReader(in, true);
        for (byte[] r = reader.read(); r != null; r = reader.read()) {
          records.add(r);
        }
      }
    }
    return records;
  }

  // ---------------------------------------------------------------------------------------------
  // 5. TensorFlow's Hadoop input format reads the source's files.

  @ParameterizedTest
  @ValueSource(strings = {"none", "gzip", "zlib"})
  void tensorFlowInputFormatReadsFilesWrittenBySource(String compression) throws Exception {
    List<Row> rows = writeRows();
    Path dir = tmp.resolve("ours-for-inputformat-" + compression);
    spark
        .createDataFrame(rows, WRITE_SCHEMA)
        .repartition(2)
        .write()
        .format("tfrecord")
        .option("compression", compression)
        .save(dir.toString());
    // zlib files are named .deflate, the extension of Hadoop's zlib codec (DefaultCodec), so
    // Hadoop tools such as TF's input format read them as they are.
    Job job = Job.getInstance(new Configuration(spark.sparkContext().hadoopConfiguration()));
    job.getConfiguration().setBoolean("tensorflow.read.crc32check", true);
    FileInputFormat.addInputPath(job, new org.apache.hadoop.fs.Path(dir.toUri()));
    TFRecordFileInputFormat format = new TFRecordFileInputFormat();
    List<InputSplit> splits = format.getSplits(job);
    assertThat(splits).hasSize(2); // the two part files (_SUCCESS is hidden)
    List<Long> ids = new ArrayList<>();
    for (InputSplit split : splits) {
      TaskAttemptContext ctx =
          new TaskAttemptContextImpl(
              job.getConfiguration(), new TaskAttemptID("it", 1, TaskType.MAP, 0, 0));
      try (RecordReader<BytesWritable, NullWritable> reader =
          format.createRecordReader(split, ctx)) {
        reader.initialize(split, ctx);
        while (reader.nextKeyValue()) {
          BytesWritable key = reader.getCurrentKey();
          Example e = Example.parseFrom(Arrays.copyOf(key.getBytes(), key.getLength()));
          ids.add(e.getFeatures().getFeatureOrThrow("id").getInt64List().getValue(0));
        }
      }
    }
    assertThat(ids).hasSize(rows.size());
    assertThat(ids)
        .containsExactlyInAnyOrderElementsOf(
            rows.stream().map(r -> r.getLong(0)).collect(Collectors.toList()));
  }

  // ---------------------------------------------------------------------------------------------
  // Helpers: TensorFlow builders, and one comparable form for values from either side.

  private static Feature int64s(long... v) {
    Int64List.Builder b = Int64List.newBuilder();
    for (long x : v) {
      b.addValue(x);
    }
    return Feature.newBuilder().setInt64List(b).build();
  }

  private static Feature floats(float... v) {
    FloatList.Builder b = FloatList.newBuilder();
    for (float x : v) {
      b.addValue(x);
    }
    return Feature.newBuilder().setFloatList(b).build();
  }

  private static Feature bytes(byte[]... v) {
    BytesList.Builder b = BytesList.newBuilder();
    for (byte[] x : v) {
      b.addValue(ByteString.copyFrom(x));
    }
    return Feature.newBuilder().setBytesList(b).build();
  }

  /** A float compared by its raw bits, so NaN payloads and -0.0 count. */
  record Bits(int raw) {
    static Bits of(float f) {
      return new Bits(Float.floatToRawIntBits(f));
    }

    @Override
    public String toString() {
      return Float.intBitsToFloat(raw) + "(0x" + Integer.toHexString(raw) + ")";
    }
  }

  /** A double compared by its raw bits. */
  record DBits(long raw) {
    static DBits of(double d) {
      return new DBits(Double.doubleToRawLongBits(d));
    }

    @Override
    public String toString() {
      return Double.toString(Double.longBitsToDouble(raw));
    }
  }

  /** Bytes compared by content. */
  record Bin(String hex) {
    static Bin of(byte[] b) {
      return new Bin(TensorFlowInteropIT.hex(b));
    }
  }

  private static String hex(byte[] b) {
    return HexFormat.of().formatHex(b);
  }

  /** A Spark value in comparable form. */
  private static Object normalize(Object v, DataType t) {
    if (v == null) {
      return null;
    }
    if (t instanceof ArrayType) {
      DataType e = ((ArrayType) t).elementType();
      List<Object> out = new ArrayList<>();
      Iterable<?> it = v instanceof Seq ? CollectionConverters.asJava((Seq<?>) v) : (Iterable<?>) v;
      for (Object x : it) {
        out.add(normalize(x, e));
      }
      return out;
    }
    if (v instanceof Float) {
      return Bits.of((Float) v);
    }
    if (v instanceof Double) {
      return DBits.of((Double) v);
    }
    if (v instanceof byte[]) {
      return Bin.of((byte[]) v);
    }
    return v;
  }

  /**
   * What a column of type {@code t} must hold for TensorFlow's Feature {@code f} (null: absent), in
   * comparable form: scalars take the one value (none: null), arrays the list.
   */
  private static Object expectedFromTf(Feature f, DataType t) {
    if (f == null) {
      return null;
    }
    DataType elem = t instanceof ArrayType ? ((ArrayType) t).elementType() : t;
    List<Object> values = new ArrayList<>();
    switch (f.getKindCase()) {
      case INT64_LIST:
        for (long x : f.getInt64List().getValueList()) {
          values.add(
              elem == DataTypes.FloatType
                  ? Bits.of(x)
                  : elem == DataTypes.DoubleType ? DBits.of(x) : (Object) x);
        }
        break;
      case FLOAT_LIST:
        for (float x : f.getFloatList().getValueList()) {
          values.add(elem == DataTypes.DoubleType ? DBits.of(x) : Bits.of(x));
        }
        break;
      case BYTES_LIST:
        for (ByteString x : f.getBytesList().getValueList()) {
          values.add(elem == DataTypes.BinaryType ? Bin.of(x.toByteArray()) : x.toStringUtf8());
        }
        break;
      default: // KIND_NOT_SET: no values
    }
    if (t instanceof ArrayType) {
      return values;
    }
    assertThat(values.size()).as("scalar column from feature %s", f).isLessThanOrEqualTo(1);
    return values.isEmpty() ? null : values.get(0);
  }

  /** TensorFlow's view of a Feature: its kind and values, in comparable form. */
  private static List<Object> tfView(Feature f) {
    List<Object> out = new ArrayList<>();
    out.add(f.getKindCase());
    switch (f.getKindCase()) {
      case INT64_LIST:
        out.addAll(f.getInt64List().getValueList());
        break;
      case FLOAT_LIST:
        f.getFloatList().getValueList().forEach(x -> out.add(Bits.of(x)));
        break;
      case BYTES_LIST:
        f.getBytesList().getValueList().forEach(x -> out.add(Bin.of(x.toByteArray())));
        break;
      default:
    }
    return out;
  }

  /** The Feature a non-null column value of type {@code t} must be written as, in tfView form. */
  private static List<Object> expectedTfView(Object value, DataType t) {
    DataType elem = t instanceof ArrayType ? ((ArrayType) t).elementType() : t;
    List<?> values = t instanceof ArrayType ? (List<?>) value : List.of(value);
    List<Object> out = new ArrayList<>();
    if (elem == DataTypes.FloatType || elem == DataTypes.DoubleType) {
      out.add(Feature.KindCase.FLOAT_LIST);
      values.forEach(x -> out.add(Bits.of(((Number) x).floatValue())));
    } else if (elem == DataTypes.StringType) {
      out.add(Feature.KindCase.BYTES_LIST);
      values.forEach(x -> out.add(Bin.of(((String) x).getBytes(StandardCharsets.UTF_8))));
    } else if (elem == DataTypes.BinaryType) {
      out.add(Feature.KindCase.BYTES_LIST);
      values.forEach(x -> out.add(Bin.of((byte[]) x)));
    } else if (elem == DataTypes.BooleanType) {
      out.add(Feature.KindCase.INT64_LIST);
      values.forEach(x -> out.add((Boolean) x ? 1L : 0L));
    } else {
      out.add(Feature.KindCase.INT64_LIST);
      values.forEach(x -> out.add(((Number) x).longValue()));
    }
    return out;
  }

  private static List<Long> boxed(long[] v) {
    return Arrays.stream(v).boxed().collect(Collectors.toList());
  }

  private static List<Float> boxed(float[] v) {
    List<Float> out = new ArrayList<>();
    for (float x : v) {
      out.add(x);
    }
    return out;
  }

  private static List<Path> listFiles(Path dir, String suffix) {
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(p -> p.getFileName().toString().endsWith(suffix))
          .filter(p -> !p.getFileName().toString().startsWith("."))
          .sorted()
          .collect(Collectors.toList());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
