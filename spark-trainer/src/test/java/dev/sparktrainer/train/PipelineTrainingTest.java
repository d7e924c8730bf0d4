package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.metrics.EpochMetrics;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The trainer fed by the input pipeline: TFRecord shards, and a DataFrame that must be staged. */
class PipelineTrainingTest {
  private static SparkSession spark;
  @TempDir static Path data;

  @BeforeAll
  static void start() throws IOException {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("pipeline-training-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    // The digits as TFRecord shards: 4 training files, 1 test file.
    InMemoryDataset digits = Digits.load().shuffled(7);
    write(digits, 0, 1437, data.resolve("train"), 4);
    write(digits, 1437, digits.size(), data.resolve("test"), 1);
  }

  private static void write(InMemoryDataset d, int from, int to, Path dir, int files)
      throws IOException {
    Files.createDirectories(dir);
    int per = (to - from + files - 1) / files;
    for (int f = 0; f < files; f++) {
      try (OutputStream os = Files.newOutputStream(dir.resolve("part-" + f + ".tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = from + f * per; i < Math.min(to, from + (f + 1) * per); i++) {
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("pixels", Feature.ofFloats(d.features(i)));
          m.put("label", Feature.ofInt64(d.label(i)));
          w.write(Examples.encodeExample(m));
        }
      }
    }
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  private static DatasetSpec spec(String dir) {
    return DatasetSpec.builder()
        .addPath(data.resolve(dir).toString())
        .addFeature("pixels", 64)
        .setLabel("label", DatasetSpec.LabelType.INT)
        .build();
  }

  private static DistributedTrainerBuilder job() {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 64))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setNumWorkers(2)
        .optEpochs(8)
        .optSeed(3)
        .optRingHost("127.0.0.1");
  }

  @Test
  void twoWorkersConvergeReadingTFRecordShards() {
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(32).optShuffleBuffer(500).optSeed(5).build();
    TrainedModel model =
        job()
            .setTrainingData(spec("train"), options)
            .optValidationData(spec("test"), options)
            .build()
            .fit(spark);
    EpochMetrics last = model.history().last();
    assertThat(last.validationAccuracy()).isGreaterThanOrEqualTo(0.95);
    assertThat(model.history().epochs()).hasSize(8);
    // FILE sharding of 4 files (360, 360, 360, 357 records) over 2 workers: 720 and 717 records,
    // so 22 steps of 32 on both (the smaller one pads by repeating).
    assertThat(last.samples()).isEqualTo(2 * 22 * 32);
  }

  /**
   * deterministic=false without a shuffle buffer: readers make the batches; the same steps, and it
   * learns.
   */
  @Test
  void twoWorkersTrainOnBatchesMadeByTheReaders() {
    PipelineOptions options =
        PipelineOptions.builder()
            .optBatchSize(32)
            .optShuffleBuffer(0)
            .optDeterministic(false)
            .optSeed(5)
            .build();
    TrainedModel model =
        job()
            .setTrainingData(spec("train"), options)
            .optValidationData(spec("test"), options)
            .build()
            .fit(spark);
    EpochMetrics last = model.history().last();
    assertThat(last.validationAccuracy()).isGreaterThanOrEqualTo(0.9);
    assertThat(model.history().epochs()).hasSize(8);
    assertThat(last.samples()).isEqualTo(2 * 22 * 32);
  }

  /**
   * The builder's transform maps the training examples only: training on every label rewritten to
   * 0, the model predicts 0, and the validation data — its labels untouched — scores only its share
   * of zeros (were the validation labels rewritten too, it would score 100%).
   */
  @Test
  void theBuildersTransformMapsTrainingDataOnly() {
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(32).optShuffleBuffer(100).optSeed(5).build();
    TrainedModel model =
        job()
            .optEpochs(2)
            .setTrainingData(spec("train"), options)
            .optValidationData(spec("test"), options)
            .optTransform(ex -> ex.setLabel(0))
            .build()
            .fit(spark);
    EpochMetrics last = model.history().last();
    assertThat(last.accuracy()).as("training labels are all 0").isGreaterThan(0.99);
    assertThat(last.validationAccuracy())
        .as("validation labels are the digits'")
        .isBetween(0.02, 0.25);

    assertThatThrownBy(
            () ->
                job()
                    .setTrainingData(Digits.load().trainBatches(32, 1, true))
                    .optTransform(ex -> {})
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Invalid optTransform")
        .hasMessageContaining("not a BatchSourceFactory");
  }

  @Test
  void aDataFrameThatIsNotAFileScanIsStagedAndCleanedUp() throws IOException {
    Path staging = data.resolve("staging");
    Dataset<Row> frame =
        spark
            .read()
            .format("tfrecord")
            .load(data.resolve("train").toString())
            .where("label >= 0"); // a filter: not a plain scan
    Dataset<Row> testFrame = spark.read().format("tfrecord").load(data.resolve("test").toString());
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(32).optShuffleBuffer(500).build();
    DatasetSpec columns =
        DatasetSpec.builder()
            .addPath("unused")
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    TrainedModel model =
        job()
            .optEpochs(2)
            .setTrainingData(frame, columns, options)
            .optValidationData(testFrame, columns, options)
            .optStagingDir(staging.toString())
            .build()
            .fit(spark);
    assertThat(model.history().epochs()).hasSize(2);
    assertThat(model.history().last().validationAccuracy()).isGreaterThan(0.8);
    try (var left = Files.list(staging)) {
      assertThat(left.toList()).as("staging cleaned up").isEmpty();
    }
    DatasetSpec wrong = DatasetSpec.builder().addPath("unused").addFeature("pixelz", 64).build();
    assertThatThrownBy(() -> job().setTrainingData(frame, wrong, options).build().fit(spark))
        .hasMessageContaining(
            "No feature column 'pixelz' in the DataFrame (columns: label, pixels)");
  }
}
