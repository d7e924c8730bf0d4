package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.imageio.ImageIO;
import org.apache.spark.ml.feature.VectorAssembler;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PlannerAndFormatsTest {
  @TempDir Path dir;

  private static SparkSession spark() {
    return SparkSession.builder()
        .master("local[2]")
        .appName("data-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate();
  }

  /** Other test classes in this JVM configure their own session. */
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

  private static Set<Long> allIds(DatasetPlan plan, PipelineOptions o, int width) {
    Set<Long> ids = new HashSet<>();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      p.hostEpoch(0, 0)
          .forEachRemaining(
              b -> {
                for (int i = 0; i < b.size; i++) {
                  assertThat(ids.add(TestData.idOf(b, i, width))).isTrue();
                }
              });
    }
    return ids;
  }

  @Test
  void listsGlobsDirectoriesAndSkipsHiddenFiles() throws IOException {
    Path d = dir.resolve("d");
    TestData.writeTFRecords(d, 2, 0, TFRecordCompression.NONE, 10, 20, 30);
    Files.writeString(d.resolve("_SUCCESS"), "");
    Files.writeString(d.resolve(".part-000.tfrecord.crc"), "junk");
    Files.createDirectories(d.resolve("_temporary"));
    Files.writeString(d.resolve("_temporary").resolve("part-9.tfrecord"), "junk");
    PipelineOptions o = PipelineOptions.builder().build();
    DatasetPlan all = DatasetPlanner.plan(TestData.spec(d, 2), o, TestData.CONF);
    assertThat(all.splits()).hasSize(3);
    assertThat(all.totalRecords()).isEqualTo(60);
    DatasetSpec glob =
        DatasetSpec.builder()
            .addPath(d + "/part-00[01]*")
            .addFeature("x", 2)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    assertThat(DatasetPlanner.plan(glob, o, TestData.CONF).totalRecords()).isEqualTo(30);
    DatasetSpec missing =
        DatasetSpec.builder().addPath(d + "/nothing-*").addFeature("x", 2).build();
    assertThatThrownBy(() -> DatasetPlanner.plan(missing, o, TestData.CONF))
        .isInstanceOf(FileNotFoundException.class)
        .hasMessageContaining("nothing-* matches no file");
  }

  @Test
  void bigUncompressedFilesAreSplitAndReadExactlyOnce() throws IOException {
    Path d = dir.resolve("big");
    TestData.writeTFRecords(d, 16, 0, TFRecordCompression.NONE, 3000);
    TestData.writeTFRecords(dir.resolve("gz"), 16, 3000, TFRecordCompression.GZIP, 500);
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(d.toString())
            .addPath(dir.resolve("gz").toString())
            .addFeature("x", 16)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optSplitSizeBytes(10_000)
            .optBatchSize(7)
            .optDropRemainder(false)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(spec, o, TestData.CONF);
    assertThat(plan.splits().size()).isGreaterThan(20);
    assertThat(plan.splits().stream().filter(s -> s.path().endsWith(".gz")).count()).isEqualTo(1);
    assertThat(plan.totalRecords()).isEqualTo(3500);
    assertThat(allIds(plan, o, 16)).hasSize(3500);

    DatasetPlan distributed = DatasetPlanner.plan(spec, o, spark());
    assertThat(distributed.splits().stream().map(Split::records).toList())
        .isEqualTo(plan.splits().stream().map(Split::records).toList());
  }

  @Test
  void readsParquetWrittenBySparkIncludingVectors() throws IOException {
    SparkSession spark = spark();
    Dataset<Row> df =
        spark
            .range(0, 300)
            .selectExpr(
                "id",
                "transform(sequence(0, 3), k -> cast(id + 0.5 * k as float)) as x",
                "cast(id % 10 as int) as label",
                "cast(id as double) as a",
                "cast(id * 2 as double) as b");
    Dataset<Row> withVector =
        new VectorAssembler().setInputCols(new String[] {"a", "b"}).setOutputCol("v").transform(df);
    String out = dir.resolve("pq").toString();
    withVector.repartition(3).write().parquet(out);
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(out)
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("x", 4)
            .addFeature("v", 2)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o = PipelineOptions.builder().optBatchSize(10).optDropRemainder(false).build();
    DatasetPlan plan = DatasetPlanner.plan(spec, o, TestData.CONF);
    assertThat(plan.totalRecords()).isEqualTo(300);
    // Ordered, and readers making whole batches (deterministic=false): rows copied from decoded
    // records.
    for (PipelineOptions po :
        List.of(o, o.toBuilder().optShuffleBuffer(0).optDeterministic(false).build())) {
      List<Long> ids = new ArrayList<>();
      try (InputPipeline p = InputPipeline.create(plan, po, 0, 1, TestData.CONF)) {
        assertThat(p.unordered()).isEqualTo(!po.deterministic());
        p.hostEpoch(0, 0)
            .forEachRemaining(
                b -> {
                  for (int i = 0; i < b.size; i++) {
                    long id = (long) b.feature(0, i * 4);
                    ids.add(id);
                    assertThat(b.feature(0, i * 4 + 3)).isEqualTo(id + 1.5f);
                    assertThat(b.feature(1, i * 2)).isEqualTo((float) id);
                    assertThat(b.feature(1, i * 2 + 1)).isEqualTo(2f * id);
                    assertThat(b.labels[i]).isEqualTo(id % 10);
                  }
                });
      }
      assertThat(ids).hasSize(300).doesNotHaveDuplicates();
    }
    DatasetSpec noColumn =
        DatasetSpec.builder()
            .addPath(out)
            .optFormat(DatasetSpec.Format.PARQUET)
            .addFeature("nope", 1)
            .build();
    DatasetPlan bad = DatasetPlanner.plan(noColumn, o, TestData.CONF);
    try (InputPipeline p = InputPipeline.create(bad, o, 0, 1, TestData.CONF)) {
      assertThatThrownBy(() -> p.hostEpoch(0, 0).next())
          .hasMessageContaining("has no column 'nope'");
    }
  }

  @Test
  void dataFramesArePlainScansOrStaged() throws IOException {
    SparkSession spark = spark();
    String tf = dir.resolve("tf").toString();
    TestData.writeTFRecords(dir.resolve("tf"), 4, 0, TFRecordCompression.NONE, 50, 50);
    DatasetSpec columns =
        DatasetSpec.builder()
            .addPath("ignored")
            .addFeature("x", 4)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    String staging = dir.resolve("staging").toString();

    Dataset<Row> plain = spark.read().format("tfrecord").load(tf).select("x", "label");
    try (DataFrameInput in = DataFrameInput.of(plain, columns, staging)) {
      assertThat(in.staged()).isFalse();
      assertThat(in.spec().format()).isEqualTo(DatasetSpec.Format.TFRECORD);
      assertThat(in.spec().paths()).hasSize(2);
    }
    Dataset<Row> engineered = spark.read().format("tfrecord").load(tf).where("label < 5");
    Path stagedDir;
    try (DataFrameInput in = DataFrameInput.of(engineered, columns, staging)) {
      assertThat(in.staged()).isTrue();
      assertThat(in.spec().format()).isEqualTo(DatasetSpec.Format.PARQUET);
      stagedDir =
          Path.of(
              URI.create(
                  in.spec().paths().get(0).startsWith("file:")
                      ? in.spec().paths().get(0)
                      : "file://" + in.spec().paths().get(0)));
      DatasetPlan plan =
          DatasetPlanner.plan(in.spec(), PipelineOptions.builder().build(), TestData.CONF);
      assertThat(plan.totalRecords()).isEqualTo(50);
    }
    assertThat(Files.exists(stagedDir)).isFalse();

    assertThatThrownBy(
            () ->
                DataFrameInput.of(
                    plain, DatasetSpec.builder().addPath("i").addFeature("y", 1).build(), staging))
        .hasMessage("No feature column 'y' in the DataFrame (columns: x, label)");
    Dataset<Row> text = spark.sql("select 'a' as x, 1 as label");
    assertThatThrownBy(() -> DataFrameInput.of(text, columns, staging))
        .hasMessage(
            "Feature column 'x' has type string: expected a number, an array of numbers or an ml Vector");
  }

  @Test
  void decodesEncodedImages() throws IOException {
    Path d = Files.createDirectories(dir.resolve("img"));
    try (OutputStream os = Files.newOutputStream(d.resolve("images.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int id = 0; id < 6; id++) {
        BufferedImage img = new BufferedImage(3, 2, BufferedImage.TYPE_INT_RGB);
        img.setRGB(1, 0, (id * 40) << 16 | 255);
        ByteArrayOutputStream png = new ByteArrayOutputStream();
        ImageIO.write(img, "png", png);
        Map<String, Feature> m = new LinkedHashMap<>();
        m.put("image", Feature.ofBytes(png.toByteArray()));
        m.put("label", Feature.ofInt64(id));
        w.write(Examples.encodeExample(m));
      }
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(d.toString())
            .addImageFeature("image", 2, 3, 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(6)
            .optShuffleBuffer(0)
            .optShuffleSplits(false)
            .build();
    try (InputPipeline p =
        InputPipeline.create(DatasetPlanner.plan(spec, o, TestData.CONF), o, 0, 1, TestData.CONF)) {
      HostBatch b = p.hostEpoch(0, 0).next();
      for (int i = 0; i < 6; i++) {
        int px = i * 18 + (0 * 3 + 1) * 3; // row 0, column 1
        assertThat(b.feature(0, px)).isEqualTo((float) (b.labels[i] * 40) / 255f);
        assertThat(b.feature(0, px + 2)).isEqualTo(1f);
        assertThat(b.feature(0, px + 1)).isEqualTo(0f);
      }
    }
    // Another size is resized (#33: shorter side to 4, then the centre 4x4) ...
    DatasetSpec otherSize =
        DatasetSpec.builder().addPath(d.toString()).addImageFeature("image", 4, 4, 3).build();
    try (InputPipeline p =
        InputPipeline.create(
            DatasetPlanner.plan(otherSize, o, TestData.CONF), o, 0, 1, TestData.CONF)) {
      assertThat(p.hostEpoch(0, 0).next().size()).isEqualTo(6);
    }
    // ... unless the resize asked for cannot cover the model's size: named with file and offset
    PipelineOptions tooSmall = o.toBuilder().optImageResize(ImageResize.shorter(3)).build();
    try (InputPipeline p =
        InputPipeline.create(
            DatasetPlanner.plan(otherSize, tooSmall, TestData.CONF),
            tooSmall,
            0,
            1,
            TestData.CONF)) {
      assertThatThrownBy(() -> p.hostEpoch(0, 0).next())
          .hasMessageContaining(
              "images.tfrecord at byte offset 0: feature 'image': resize shorter:3 makes a 2x3"
                  + " image 3x4, smaller than the 4x4 the model takes");
    }
  }

  /**
   * Streams a dataset several times larger than the heap of a separate JVM, two epochs with the
   * second started ahead: it must finish — with a shuffle buffer (records decoded by the readers)
   * and without (examples decoded straight into batches from the readers' handed-over buffers).
   */
  @Test
  void boundedMemoryInASmallHeap() throws Exception {
    Path d = dir.resolve("large");
    int width = 1024; // 4 KiB per record
    TestData.writeTFRecords(
        d, width, 0, TFRecordCompression.NONE, 12_000, 12_000, 12_000, 12_000); // ~200 MB
    // shuffle buffer; none (decoded in the batch); none and deterministic=false (readers make
    // batches)
    for (int mode = 0; mode < 3; mode++) {
      int shuffle = mode == 0 ? 1000 : 0;
      List<String> cmd =
          new ArrayList<>(
              List.of(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "-Xmx48m",
                  "-cp",
                  System.getProperty("java.class.path"),
                  StreamMain.class.getName(),
                  d.toString(),
                  String.valueOf(width),
                  String.valueOf(16 << 20),
                  String.valueOf(shuffle),
                  "2",
                  mode == 2 ? "unordered" : "ordered"));
      Process proc = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      try {
        String out = new String(proc.getInputStream().readAllBytes());
        assertThat(proc.waitFor()).as(out).isEqualTo(0);
        assertThat(out)
            .contains("records=96000 decodesInBatch=" + (mode == 1) + " unordered=" + (mode == 2));
      } finally {
        proc.destroyForcibly();
      }
    }
  }
}
