package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.metrics.History;
import dev.sparktrainer.train.metrics.StragglerReport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.sql.SparkSession;
import org.assertj.core.groups.Tuple;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trainer on a local Spark (two task slots, task retries allowed): barrier launch, retry,
 * resume.
 */
class SparkTrainerTest {
  private static SparkSession spark;
  private static InMemoryDataset train;
  private static InMemoryDataset test;
  private static final AtomicInteger retriedStages = new AtomicInteger();

  @TempDir Path tmp;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2,4]")
            .appName("spark-trainer-tests")
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
                  retriedStages.incrementAndGet();
                }
              }
            });
    InMemoryDataset digits = Digits.load().shuffled(7);
    train = digits.slice(0, 1437);
    test = digits.slice(1437, digits.size());
  }

  @AfterAll
  static void stop() {
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  private static DistributedTrainerBuilder digitsJob(int workers, int epochs) {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 64))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setTrainingData(train.trainBatches(32, 1, true))
        .optValidationData(test.evalBatches(64))
        .setNumWorkers(workers)
        .optEpochs(epochs)
        .optSeed(3)
        .optRingHost("127.0.0.1");
  }

  @Test
  void twoWorkersConvergeOnDigits() {
    TrainedModel model =
        digitsJob(2, 8).optOutputDir(tmp.resolve("model").toString()).build().fit(spark);
    History h = model.history();
    assertThat(h.epochs()).hasSize(8);
    assertThat(h.last().validationAccuracy()).isGreaterThanOrEqualTo(0.95);
    assertThat(h.last().samples()).isEqualTo(1437 / 64 * 64);
    assertThat(h.epochs()).allSatisfy(e -> assertThat(e.parameterHash()).hasSize(64));
    assertThat(Files.exists(tmp.resolve("model/model.params"))).isTrue();
    // Each epoch's straggler report names the tasks' executors (local mode: "driver") and hosts.
    assertThat(h.stragglers())
        .hasSize(8)
        .allSatisfy(
            r ->
                assertThat(r.ranks())
                    .extracting(StragglerReport.Rank::executorId, r2 -> r2.host().isEmpty())
                    .containsExactly(Tuple.tuple("driver", false), Tuple.tuple("driver", false)));
  }

  @Test
  void failedTaskIsRetriedByStageAndResumesFromCheckpoint() throws Exception {
    TrainedModel reference = digitsJob(2, 3).build().fit(spark);
    // 22 steps per epoch: fail rank 1 after step 30 (mid epoch 1); checkpoints every 8 steps.
    TrainedModel resumed =
        digitsJob(2, 3)
            .optCheckpointDir(tmp.resolve("ckpt").toString())
            .optCheckpointEverySteps(8)
            .optInjectFailure(1, 30)
            .build()
            .fit(spark);
    spark.sparkContext().listenerBus().waitUntilEmpty();
    assertThat(retriedStages.get()).as("the barrier stage was retried").isPositive();
    assertThat(resumed.history().epochs()).hasSize(3);
    assertThat(
            tmp.resolve("ckpt")
                .toFile()
                .list((d, n) -> n.startsWith("ckpt-") && n.endsWith(".bin")))
        .hasSize(3);
    assertThat(resumed.history().last().parameterHash())
        .isEqualTo(reference.history().last().parameterHash());
    assertThat(resumed.parameterBytes()).isEqualTo(reference.parameterBytes());
  }

  @Test
  void ringTransportFollowsTheOptionAndLeavesTheResultAlone() {
    // The communicator logs each link's transport (System.Logger, here backed by
    // java.util.logging).
    Logger log = Logger.getLogger("dev.sparktrainer.collective.Communicator");
    List<String> lines = Collections.synchronizedList(new ArrayList<>());
    Handler capture =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            lines.add(r.getMessage());
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    Level level = log.getLevel();
    log.setLevel(Level.INFO);
    log.addHandler(capture);
    try {
      TrainedModel viaShm = digitsJob(2, 1).build().fit(spark);
      assertThat(lines)
          .filteredOn(l -> l.contains(" -> rank "))
          .hasSize(2)
          .allSatisfy(l -> assertThat(l).contains("shared memory (same host"));
      lines.clear();
      TrainedModel viaTcp = digitsJob(2, 1).optRingSharedMemory(false).build().fit(spark);
      assertThat(lines)
          .filteredOn(l -> l.contains(" -> rank "))
          .hasSize(2)
          .allSatisfy(l -> assertThat(l).contains("TCP (shared memory is off)"));
      assertThat(viaTcp.parameterBytes()).isEqualTo(viaShm.parameterBytes());
    } finally {
      log.removeHandler(capture);
      log.setLevel(level);
    }
  }

  @Test
  void preflightRejectsMoreWorkersThanSlots() {
    assertThatThrownBy(() -> digitsJob(3, 1).optSlotWait(Duration.ZERO).build().fit(spark))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Not enough task slots for 3 barrier tasks")
        .hasMessageContaining("has 2");
  }

  @Test
  void preflightRejectsUnwritableCheckpointDir() throws Exception {
    Path file = Files.writeString(tmp.resolve("a-file"), "x");
    assertThatThrownBy(() -> digitsJob(2, 1).optCheckpointDir(file.toString()).build().fit(spark))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Invalid checkpointDir '" + file + "'");
  }
}
