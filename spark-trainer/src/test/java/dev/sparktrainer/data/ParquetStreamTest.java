package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.function.LongFunction;
import javax.imageio.ImageIO;
import org.apache.avro.Schema;
import org.apache.avro.SchemaBuilder;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.avro.AvroParquetWriter;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@link ParquetStream} against files from the three writers users have: Spark (standard 3-level
 * lists, and its legacy format), parquet-avro (its old 2-level lists, and 3-level), and parquet-mr
 * with each list encoding written by hand (2-level {@code array}, bare {@code repeated}, 3-level).
 * Every column shape: numbers of each type, lists, nested lists, ML vectors dense and sparse,
 * images; nulls fail naming file, row and column. Both ways out: records ({@code next}) and rows
 * decoded straight into a batch ({@code nextInto}, through a {@code deterministic=false} pipeline).
 */
class ParquetStreamTest {
  @TempDir Path dir;

  private static SparkSession spark() {
    return SparkSession.builder()
        .master("local[2]")
        .appName("parquet-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate();
  }

  @AfterAll
  static void stopSpark() {
    SparkSession.getActiveSession()
        .foreach(
            s -> {
              s.stop();
              return null;
            });
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  // --- Spark ---------------------------------------------------------------------------------

  private static final StructType SPARK_SCHEMA =
      new StructType()
          .add("id", DataTypes.LongType, false)
          .add("f", DataTypes.FloatType)
          .add("i", DataTypes.IntegerType)
          .add("b", DataTypes.BooleanType)
          .add("d", DataTypes.DoubleType)
          .add("xs", DataTypes.createArrayType(DataTypes.FloatType))
          .add("xd", DataTypes.createArrayType(DataTypes.DoubleType, false))
          .add("nested", DataTypes.createArrayType(DataTypes.createArrayType(DataTypes.FloatType)))
          .add("v", SQLDataTypes.VectorType())
          .add("img", DataTypes.BinaryType)
          .add("label", DataTypes.IntegerType);

  private static Row sparkRow(long id) {
    float x = id;
    return RowFactory.create(
        id,
        x,
        (int) id,
        id % 2 == 0,
        (double) id,
        scalaSeq(x, x + 0.5f, x + 1),
        scalaSeq((double) x, x + 0.5, x + 1.0),
        scalaSeq(scalaSeq(x), scalaSeq(x + 1, x + 2)),
        id % 2 == 0
            ? Vectors.dense(x, 0, 2 * x)
            : Vectors.sparse(3, new int[] {0, 2}, new double[] {x, 2 * x}),
        png(id),
        (int) (id % 10));
  }

  @SafeVarargs
  private static <T> Seq<T> scalaSeq(T... xs) {
    return CollectionConverters.asScala(Arrays.asList(xs)).toList();
  }

  private static byte[] png(long id) {
    BufferedImage img = new BufferedImage(3, 2, BufferedImage.TYPE_INT_RGB);
    for (int y = 0; y < 2; y++) {
      for (int x = 0; x < 3; x++) {
        img.setRGB(x, y, ((int) (id * 5 % 256) << 16) | (x * 40 << 8) | y * 80);
      }
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      ImageIO.write(img, "png", out);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    return out.toByteArray();
  }

  private static final DatasetSpec SPARK_SPEC =
      DatasetSpec.builder()
          .addPath("set per test")
          .optFormat(DatasetSpec.Format.PARQUET)
          .addFeature("id", 1)
          .addFeature("f", 1)
          .addFeature("i", 1)
          .addFeature("b", 1)
          .addFeature("d", 1)
          .addFeature("xs", 3)
          .addFeature("xd", 3)
          .addFeature("nested", 3)
          .addFeature("v", 3)
          .addImageFeature("img", 2, 3, 3)
          .setLabel("label", DatasetSpec.LabelType.INT)
          .build();

  private static float[] sparkExpected(long id) {
    float x = id;
    float[] e = {
      x,
      x,
      x,
      id % 2 == 0 ? 1 : 0,
      x,
      x,
      x + 0.5f,
      x + 1,
      x,
      x + 0.5f,
      x + 1,
      x,
      x + 1,
      x + 2,
      x,
      0,
      2 * x
    };
    float[] all = Arrays.copyOf(e, e.length + 18);
    int k = e.length;
    for (int y = 0; y < 2; y++) {
      for (int xx = 0; xx < 3; xx++) {
        all[k++] = (id * 5 % 256) / 255f;
        all[k++] = xx * 40 / 255f;
        all[k++] = y * 80 / 255f;
      }
    }
    return all;
  }

  @Test
  void readsEveryColumnShapeSparkWrites() throws IOException {
    SparkSession spark = spark();
    List<Row> rows = new ArrayList<>();
    for (long id = 0; id < 50; id++) {
      rows.add(sparkRow(id));
    }
    Path standard = dir.resolve("spark");
    spark.createDataFrame(rows, SPARK_SCHEMA).repartition(3).write().parquet(standard.toString());
    assertRecords(standard, SPARK_SPEC, 50, ParquetStreamTest::sparkExpected);
    assertPipeline(standard, SPARK_SPEC, 50, ParquetStreamTest::sparkExpected);

    // Spark's legacy format (Hive/Impala compatible): lists as "repeated group bag { element array
    // }".
    Path legacy = dir.resolve("spark-legacy");
    spark.conf().set("spark.sql.parquet.writeLegacyFormat", "true");
    try {
      spark.createDataFrame(rows, SPARK_SCHEMA).repartition(2).write().parquet(legacy.toString());
    } finally {
      spark.conf().unset("spark.sql.parquet.writeLegacyFormat");
    }
    assertThat(schemaOf(legacy)).contains("repeated group bag");
    assertRecords(legacy, SPARK_SPEC, 50, ParquetStreamTest::sparkExpected);
  }

  @Test
  void sparkDecimalsReadAsTheirValuesDirectlyAndAfterStaging() throws IOException {
    SparkSession spark = spark();
    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType, false)
            .add("d", DataTypes.createDecimalType(10, 2), false)
            .add("small", DataTypes.createDecimalType(5, 3), false)
            .add("wide", DataTypes.createDecimalType(22, 4), false)
            .add("label", DataTypes.createDecimalType(3, 0), false);
    List<Row> rows = new ArrayList<>();
    for (long id = 0; id < 30; id++) {
      rows.add(
          RowFactory.create(
              id,
              java.math.BigDecimal.valueOf(1234 + id, 2),
              java.math.BigDecimal.valueOf(-(1234 + id), 3),
              java.math.BigDecimal.valueOf(1234 + id, 4),
              java.math.BigDecimal.valueOf(id % 10)));
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath("x")
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("id", 1)
            .addFeature("d", 1)
            .addFeature("small", 1)
            .addFeature("wide", 1)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    LongFunction<float[]> expected =
        id ->
            new float[] {
              id,
              java.math.BigDecimal.valueOf(1234 + id, 2).floatValue(),
              java.math.BigDecimal.valueOf(-(1234 + id), 3).floatValue(),
              java.math.BigDecimal.valueOf(1234 + id, 4).floatValue()
            };
    // Read directly: Spark's standard format (INT32, INT64, fixed-length) and its legacy one (all
    // fixed-length).
    Path standard = dir.resolve("decimals");
    spark.createDataFrame(rows, schema).repartition(2).write().parquet(standard.toString());
    assertRecords(standard, spec, 30, expected);
    assertPipeline(standard, spec, 30, expected);
    Path legacy = dir.resolve("decimals-legacy");
    spark.conf().set("spark.sql.parquet.writeLegacyFormat", "true");
    try {
      spark.createDataFrame(rows, schema).repartition(2).write().parquet(legacy.toString());
    } finally {
      spark.conf().unset("spark.sql.parquet.writeLegacyFormat");
    }
    assertRecords(legacy, spec, 30, expected);
    // After staging (a DataFrame that is not a plain file scan).
    try (DataFrameInput in =
        DataFrameInput.of(
            spark.createDataFrame(rows, schema), spec, dir.resolve("staging").toString())) {
      assertThat(in.staged()).isTrue();
      assertRecords(
          Path.of(new org.apache.hadoop.fs.Path(in.spec().paths().get(0)).toUri().getPath()),
          spec,
          30,
          expected);
    }
  }

  @Test
  void nullsFailNamingFileRowAndColumn() throws IOException {
    SparkSession spark = spark();
    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType, false)
            .add("xs", DataTypes.createArrayType(DataTypes.FloatType))
            .add("label", DataTypes.IntegerType)
            .add("v", SQLDataTypes.VectorType());
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath("x")
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("id", 1)
            .addFeature("xs", 2)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    String[] cases = {"null list", "null element", "null label", "short list", "null vector"};
    for (int c = 0; c < cases.length; c++) {
      List<Row> rows = new ArrayList<>();
      for (long id = 0; id < 6; id++) {
        boolean bad = id == 4;
        Object xs =
            bad && c == 0
                ? null
                : bad && c == 1
                    ? scalaSeq(1f, null)
                    : bad && c == 3 ? scalaSeq(1f) : scalaSeq((float) id, 1f);
        rows.add(
            RowFactory.create(
                id, xs, bad && c == 2 ? null : 1, bad && c == 4 ? null : Vectors.dense(1, 2)));
      }
      Path out = dir.resolve("nulls-" + c);
      spark.createDataFrame(rows, schema).coalesce(1).write().parquet(out.toString());
      Path file = parquetFiles(out).get(0);
      DatasetSpec s = c == 4 ? spec.toBuilder().addFeature("v", 2).build() : spec;
      String expected =
          new String[] {
                "column 'xs' is null",
                "column 'xs' has a null at value 1",
                "column 'label' is null",
                "column 'xs' has 1 values, expected 2 for shape [2]",
                "column 'v' is null"
              }
              [c];
      assertThatThrownBy(() -> readFile(file, s, r -> {}))
          .as(cases[c])
          .isInstanceOf(IOException.class)
          .hasMessageContaining("Parquet file " + file)
          .hasMessageContaining("row 4: " + expected);
    }
  }

  // --- parquet-avro --------------------------------------------------------------------------

  @Test
  void readsParquetAvroFilesInBothListStructures() throws IOException {
    Schema schema =
        SchemaBuilder.record("Example")
            .fields()
            .requiredLong("id")
            .name("xs")
            .type()
            .array()
            .items()
            .floatType()
            .noDefault()
            .name("ds")
            .type()
            .nullable()
            .array()
            .items()
            .doubleType()
            .noDefault()
            .requiredInt("label")
            .endRecord();
    for (boolean oldLists : new boolean[] {true, false}) {
      Path out = dir.resolve("avro-" + oldLists);
      Files.createDirectories(out);
      Configuration conf = new Configuration();
      conf.setBoolean("parquet.avro.write-old-list-structure", oldLists);
      org.apache.hadoop.fs.Path file =
          new org.apache.hadoop.fs.Path(out.resolve("part-0.parquet").toString());
      try (ParquetWriter<GenericRecord> w =
          AvroParquetWriter.<GenericRecord>builder(HadoopOutputFile.fromPath(file, conf))
              .withSchema(schema)
              .withConf(conf)
              .build()) {
        for (long id = 0; id < 30; id++) {
          GenericRecord r = new GenericData.Record(schema);
          r.put("id", id);
          r.put("xs", List.of((float) id, id + 0.25f));
          r.put("ds", List.of(id * 2.0, id * 3.0, id * 4.0));
          r.put("label", (int) (id % 10));
          w.write(r);
        }
      }
      assertThat(schemaOf(out)).contains(oldLists ? "repeated float array" : "repeated group list");
      DatasetSpec spec =
          DatasetSpec.builder()
              .addPath("x")
              .optFormat(DatasetSpec.Format.PARQUET)
              .addFeature("id", 1)
              .addFeature("xs", 2)
              .addFeature("ds", 3)
              .setLabel("label", DatasetSpec.LabelType.INT)
              .build();
      LongFunction<float[]> expected =
          id -> new float[] {id, id, id + 0.25f, id * 2f, id * 3f, id * 4f};
      assertRecords(out, spec, 30, expected);
      assertPipeline(out, spec, 30, expected);
    }
  }

  // --- parquet-mr, list encodings by hand ----------------------------------------------------

  private static final MessageType LEGACY =
      MessageTypeParser.parseMessageType(
          "message m {\n"
              + "  required int64 id;\n"
              + "  optional group two (LIST) { repeated float array; }\n"
              + "  repeated double bare;\n"
              + "  optional group three (LIST) { repeated group list { optional int32 element; } }\n"
              + "  optional group structs (LIST) { repeated group array { required float element; } }\n"
              + "  required int64 label;\n"
              + "}");

  private static void writeLegacy(Path file, long first, int rows, long badRow) throws IOException {
    SimpleGroupFactory groups = new SimpleGroupFactory(LEGACY);
    org.apache.hadoop.fs.Path p = new org.apache.hadoop.fs.Path(file.toString());
    try (ParquetWriter<Group> w =
        ExampleParquetWriter.builder(HadoopOutputFile.fromPath(p, new Configuration()))
            .withType(LEGACY)
            .build()) {
      for (long id = first; id < first + rows; id++) {
        Group g = groups.newGroup();
        g.append("id", id);
        if (id != badRow) {
          Group two = g.addGroup("two");
          two.append("array", (float) id);
          two.append("array", id + 0.5f);
        }
        g.append("bare", id * 2.0).append("bare", id * 3.0);
        Group three = g.addGroup("three");
        for (int k = 0; k < 3; k++) {
          three.addGroup("list").append("element", (int) id + k);
        }
        g.addGroup("structs").addGroup("array").append("element", (float) -id);
        g.append("label", id % 10);
        w.write(g);
      }
    }
  }

  @Test
  void readsParquetMrLegacyListEncodings() throws IOException {
    Path out = dir.resolve("legacy");
    Files.createDirectories(out);
    writeLegacy(out.resolve("part-0.parquet"), 0, 40, -1);
    writeLegacy(out.resolve("part-1.parquet"), 40, 40, -1);
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath("x")
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("id", 1)
            .addFeature("two", 2)
            .addFeature("bare", 2)
            .addFeature("three", 3)
            .addFeature("structs", 1)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    LongFunction<float[]> expected =
        id -> new float[] {id, id, id + 0.5f, id * 2f, id * 3f, id, id + 1, id + 2, -id};
    assertRecords(out, spec, 80, expected);
    assertPipeline(out, spec, 80, expected);

    // A row without its optional list.
    Path bad = dir.resolve("legacy-bad");
    Files.createDirectories(bad);
    writeLegacy(bad.resolve("part-0.parquet"), 0, 10, 7);
    assertThatThrownBy(() -> readFile(bad.resolve("part-0.parquet"), spec, r -> {}))
        .hasMessageContaining("part-0.parquet, row 7: column 'two' is null");
  }

  @Test
  void rowsOfOtherWorkersAreSkipped() throws IOException {
    Path out = dir.resolve("skip");
    Files.createDirectories(out);
    writeLegacy(
        out.resolve("part-0.parquet"), 0, 25, 12); // row 12 (null list) belongs to no one here
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath("x")
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("two", 2)
            .addFeature("three", 3)
            .setLabel("id", DatasetSpec.LabelType.INT)
            .build();
    Path file = out.resolve("part-0.parquet");
    Split split = new Split(0, file.toString(), 0, Files.size(file), 25, null);
    List<Long> ids = new ArrayList<>();
    try (ParquetStream s =
        new ParquetStream(split, spec, j -> j % 3 == 1, new Configuration(), new ArrayPool(5, 4))) {
      for (Record r = s.next(); r != null; r = s.next()) {
        ids.add((long) r.label);
        float id = (float) r.label;
        assertThat(r.features).containsExactly(id, id + 0.5f, id, id + 1, id + 2);
      }
    }
    assertThat(ids).containsExactly(1L, 4L, 7L, 10L, 13L, 16L, 19L, 22L);
  }

  // --- helpers -------------------------------------------------------------------------------

  private static List<Path> parquetFiles(Path dir) throws IOException {
    try (var files = Files.list(dir)) {
      return files.filter(f -> f.getFileName().toString().endsWith(".parquet")).sorted().toList();
    }
  }

  private static String schemaOf(Path dir) throws IOException {
    org.apache.hadoop.fs.Path p =
        new org.apache.hadoop.fs.Path(parquetFiles(dir).get(0).toString());
    try (var r = ParquetFileReader.open(HadoopInputFile.fromPath(p, new Configuration()))) {
      return r.getFooter().getFileMetaData().getSchema().toString();
    }
  }

  private static void readFile(Path file, DatasetSpec spec, Consumer<Record> to)
      throws IOException {
    Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
    int size = spec.features().stream().mapToInt(DatasetSpec.Feature::size).sum();
    try (ParquetStream s =
        new ParquetStream(split, spec, j -> true, new Configuration(), new ArrayPool(size, 4))) {
      for (Record r = s.next(); r != null; r = s.next()) {
        to.accept(r);
      }
    }
  }

  /** Reads every file with {@code next()}: one record per id (the first feature), as expected. */
  private static void assertRecords(
      Path dir, DatasetSpec spec, int n, LongFunction<float[]> expected) throws IOException {
    Map<Long, float[]> byId = new TreeMap<>();
    for (Path f : parquetFiles(dir)) {
      readFile(
          f,
          spec,
          r -> {
            long id = (long) r.features[0];
            assertThat(byId.put(id, r.features)).as("id %d twice", id).isNull();
            assertThat(r.label).isEqualTo(id % 10);
          });
    }
    assertThat(byId.keySet()).hasSize(n);
    byId.forEach(
        (id, features) -> assertThat(features).as("id %d", id).containsExactly(expected.apply(id)));
  }

  /**
   * Reads the files through a pipeline whose readers decode straight into batches ({@code
   * nextInto}).
   */
  private static void assertPipeline(
      Path dir, DatasetSpec spec, int n, LongFunction<float[]> expected) throws IOException {
    DatasetSpec s = spec.toBuilder().setPaths(List.of(dir.toString())).build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(7)
            .optDropRemainder(false)
            .optShuffleBuffer(0)
            .optDeterministic(false)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(s, o, TestData.CONF);
    int width = spec.features().stream().mapToInt(DatasetSpec.Feature::size).sum();
    List<Long> ids = new ArrayList<>();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      assertThat(p.unordered()).isTrue();
      p.hostEpoch(0, 0)
          .forEachRemaining(
              b -> {
                for (int i = 0; i < b.size; i++) {
                  float[] row = new float[width];
                  int k = 0;
                  for (int c = 0; c < spec.features().size(); c++) {
                    for (int j = 0; j < spec.features().get(c).size(); j++) {
                      row[k++] = b.feature(c, i * spec.features().get(c).size() + j);
                    }
                  }
                  long id = (long) row[0];
                  ids.add(id);
                  assertThat(row).as("id %d", id).containsExactly(expected.apply(id));
                  assertThat(b.labels[i]).isEqualTo(id % 10);
                }
              });
    }
    assertThat(ids).hasSize(n).doesNotHaveDuplicates();
  }
}
