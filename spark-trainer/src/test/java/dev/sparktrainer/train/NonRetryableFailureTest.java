package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import dev.sparktrainer.train.loop.ReplicaMismatchException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.SparkException;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Failures a retry would repeat end the job at the first failed task, with their own message — not
 * after {@code spark.stage.maxConsecutiveAttempts} (4) attempts of the barrier stage.
 */
class NonRetryableFailureTest {
  private static SparkSession spark;
  private static final AtomicInteger stageRetries = new AtomicInteger();
  private static final InMemoryDataset DIGITS = Digits.load().shuffled(7).slice(0, 512);

  @TempDir Path tmp;

  @BeforeAll
  static void start() {
    // local[2,4]: task failures may be retried, as on a cluster (local[2] would abort at once).
    spark =
        SparkSession.builder()
            .master("local[2,4]")
            .appName("non-retryable-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    spark
        .sparkContext()
        .addSparkListener(
            new SparkListener() {
              @Override
              public void onStageSubmitted(SparkListenerStageSubmitted e) {
                if (e.stageInfo().attemptNumber() > 0) {
                  stageRetries.incrementAndGet();
                }
              }
            });
  }

  @AfterAll
  static void stop() {
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  private static DistributedTrainerBuilder job(int hidden) {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, hidden))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setTrainingData(DIGITS.trainBatches(32, 1, true))
        .setNumWorkers(2)
        .optEpochs(1)
        .optSeed(3)
        .optRingHost("127.0.0.1");
  }

  /** Retries of stages that {@code body} caused. */
  private static int retriesDuring(Runnable body) throws Exception {
    spark.sparkContext().listenerBus().waitUntilEmpty();
    int before = stageRetries.get();
    body.run();
    spark.sparkContext().listenerBus().waitUntilEmpty();
    return stageRetries.get() - before;
  }

  @Test
  void divergedReplicasFailTheJobAtOnce() throws Exception {
    int retries =
        retriesDuring(
            () ->
                assertThatThrownBy(() -> job(32).optInjectDivergence(1).build().fit(spark))
                    .isInstanceOf(ReplicaMismatchException.class)
                    .hasMessageContaining("Replica parameters differ after epoch 0: rank 0 ")
                    .hasMessageContaining("the job was cancelled instead of retried")
                    .hasCauseInstanceOf(SparkException.class));
    // Spark schedules a barrier stage's resubmission 200 ms after the failure; the cancellation
    // usually comes first, at worst it stops the second attempt. Without it: 3 retries.
    assertThat(retries).as("stage retries").isLessThanOrEqualTo(1);
  }

  @Test
  void aCheckpointOfAnotherModelFailsTheJobAtOnce() throws Exception {
    String ckpt = tmp.resolve("ckpt").toString();
    job(32).optCheckpointDir(ckpt).build().fit(spark);
    int retries =
        retriesDuring(
            () ->
                assertThatThrownBy(() -> job(16).optCheckpointDir(ckpt).build().fit(spark))
                    .isInstanceOf(NonRetryableTrainingException.class)
                    .hasMessageContaining(
                        "The checkpoint in " + ckpt + " does not match the model: parameter ")
                    .hasMessageContaining("the job was cancelled instead of retried"));
    assertThat(retries).as("stage retries").isLessThanOrEqualTo(1);
  }

  @Test
  void aCorruptTFRecordFailsTheJobAtOnceNamingTheFile() throws Exception {
    Path data = Files.createDirectories(tmp.resolve("digits"));
    writeDigits(data.resolve("part-0.tfrecord"), 0, 256, -1);
    // Record 100 of part-1 is framed correctly (its CRCs match: the driver's record count passes)
    // but is no tf.train.Example: the workers' decoder finds it, in the training stage.
    Path bad = data.resolve("part-1.tfrecord");
    writeDigits(bad, 256, 512, 356);
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(data.toString())
            .optFormat(DatasetSpec.Format.TFRECORD)
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    int retries =
        retriesDuring(
            () ->
                assertThatThrownBy(
                        () ->
                            job(32)
                                .setTrainingData(
                                    spec, PipelineOptions.builder().optBatchSize(32).build())
                                .build()
                                .fit(spark))
                    .isInstanceOf(NonRetryableTrainingException.class)
                    .hasMessageContaining("Corrupt TFRecord file ")
                    .hasMessageContaining("part-1.tfrecord at byte offset ")
                    .hasMessageContaining("the job was cancelled instead of retried"));
    assertThat(retries).as("stage retries").isLessThanOrEqualTo(1);
  }

  @Test
  void corruptFramingFailsTheRecordCountAtOnceNamingFileAndOffset() throws Exception {
    Path data = Files.createDirectories(tmp.resolve("framing"));
    writeDigits(data.resolve("part-0.tfrecord"), 0, 128, -1);
    Path bad = data.resolve("part-1.tfrecord");
    writeDigits(bad, 128, 256, -1);
    byte[] bytes = Files.readAllBytes(bad);
    bytes[bytes.length / 2] ^= 0x55; // inside some record: its data CRC no longer matches
    Files.write(bad, bytes);
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(data.toString())
            .optFormat(DatasetSpec.Format.TFRECORD)
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    AtomicInteger failedTasks = new AtomicInteger();
    // Only the stages of jobs started from here on: a task of an earlier test's cancelled job may
    // still end (killed) while this one runs.
    Set<Object> stages = ConcurrentHashMap.newKeySet();
    SparkListener failures =
        new SparkListener() {
          @Override
          public void onJobStart(SparkListenerJobStart e) {
            stages.addAll(CollectionConverters.asJava(e.stageIds()));
          }

          @Override
          public void onTaskEnd(SparkListenerTaskEnd e) {
            if (stages.contains(e.stageId())
                && !(e.reason() instanceof org.apache.spark.Success$)) {
              failedTasks.incrementAndGet();
            }
          }
        };
    spark.sparkContext().addSparkListener(failures);
    try {
      assertThatThrownBy(
              () ->
                  DatasetPlanner.plan(
                      spec, PipelineOptions.builder().optBatchSize(32).build(), spark))
          .isInstanceOf(TFRecordCorruptException.class)
          .hasMessageContaining("Corrupt TFRecord file ")
          .hasMessageContaining("part-1.tfrecord at byte offset ")
          .hasMessageContaining("found while counting the records of the dataset");
      spark.sparkContext().listenerBus().waitUntilEmpty();
      // The corrupt split's task succeeded with the error as its result: no task retries
      // (local[2,4]
      // would otherwise run it 4 times).
      assertThat(failedTasks.get()).as("failed task attempts").isZero();
    } finally {
      spark.sparkContext().removeSparkListener(failures);
    }
  }

  /**
   * Digits {@code from..to} as TFRecord Examples: {@code pixels} (64 floats), {@code label}
   * (int64); the record of digit {@code garbage} (if in range) is bytes that do not decode.
   */
  private static void writeDigits(Path file, int from, int to, int garbage) throws Exception {
    ExampleEncoder enc = new ExampleEncoder();
    try (OutputStream os = Files.newOutputStream(file);
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int i = from; i < to; i++) {
        if (i == garbage) {
          w.write(new byte[] {0x0a, 0x7f, 0x01}); // field 1, a 127-byte message, 1 byte present
          continue;
        }
        float[] px = DIGITS.features(i);
        enc.reset();
        enc.beginFeature("pixels", FeatureKind.FLOAT);
        enc.addFloats(px, 0, px.length);
        enc.endFeature();
        enc.beginFeature("label", FeatureKind.INT64);
        enc.addInt64(DIGITS.label(i));
        enc.endFeature();
        w.write(enc.finishExample());
      }
    }
  }
}
