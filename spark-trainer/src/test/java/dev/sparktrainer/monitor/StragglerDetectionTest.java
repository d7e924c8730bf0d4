package dev.sparktrainer.monitor;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.Digits;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.InProcessTraining;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Straggler detection end to end: three in-process workers, one made slower with the fault hook;
 * the report names it in the history, on the driver's progress line, in TensorBoard and
 * metrics.json.
 */
class StragglerDetectionTest {
  private static final int SLOW = 2;
  private static final long SLOW_MILLIS = 40;

  @TempDir Path tmp;

  /** The console's lines and the slowest ranks the driver receives. */
  static final class Recorder implements ProgressView {
    final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    final ConsoleProgress console =
        new ConsoleProgress(new PrintStream(bytes, true, StandardCharsets.UTF_8), false, 3600);
    final List<StragglerReport.Slowest> slowest = new CopyOnWriteArrayList<>();

    @Override
    public void onStep(StepProgress step) {
      console.onStep(step);
    }

    @Override
    public void onStraggler(StragglerReport.Slowest s) {
      slowest.add(s);
      console.onStraggler(s);
    }

    @Override
    public void onEpochEnd(EpochMetrics metrics) {
      console.onEpochEnd(metrics);
    }
  }

  @Test
  void theSlowRankIsNamedEverywhere() throws Exception {
    Recorder view = new Recorder();
    Path logs = tmp.resolve("logs");
    TrainedModel trained;
    try (TrainingMonitor monitor = TrainingMonitor.start("127.0.0.1", view, logs.toString())) {
      DistributedTrainerBuilder b =
          DistributedTrainer.builder()
              .setModel(MlpSpec.of(64, 10, 16))
              .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
              .setOptimizer(OptimizerSpec.sgd().optLearningRate(0.1f).build())
              // 960 rows, 3 workers x batch 8: 40 steps an epoch
              .setTrainingData(Digits.load().slice(0, 960).trainBatches(8, 5, true))
              .setNumWorkers(3)
              .optEpochs(2)
              .optSeed(42)
              .optCallback(monitor.callback());
      trained =
          InProcessTraining.fit(
              InProcessTraining.injectSlowRank(b, SLOW, SLOW_MILLIS).build(),
              0,
              new Configuration());
    }

    List<StragglerReport> reports = trained.history().stragglers();
    assertThat(reports).extracting(StragglerReport::epoch).containsExactly(0, 1);
    for (StragglerReport r : reports) {
      StragglerReport.Slowest s = r.slowest();
      assertThat(r.steps()).isEqualTo(40);
      assertThat(r.keptSteps()).as("every step kept").isEqualTo(40);
      assertThat(s.rank()).isEqualTo(SLOW);
      assertThat(s.host()).isEqualTo("127.0.0.1");
      assertThat(s.executorId()).isEqualTo("local");
      assertThat(s.workers()).isEqualTo(3);
      // 40 ms a step more than ranks whose step is a few ms: far more than 20 % slower.
      assertThat(s.medianSlowdown()).isGreaterThan(StragglerReport.WARN_SLOWDOWN);
      assertThat(s.p95Slowdown()).isGreaterThan(0);
      assertThat(s.slowestStepShare()).isGreaterThan(StragglerReport.WARN_STEP_SHARE);
      assertThat(s.warning()).isTrue();
      // The two others waited about 40 ms a step each for it (less what they computed meanwhile).
      assertThat(s.othersWaitSeconds())
          .isBetween(2 * 40 * SLOW_MILLIS / 1e3 * 0.5, 2 * 40 * SLOW_MILLIS / 1e3 * 3);
      assertThat(r.ranks()).extracting(StragglerReport.Rank::rank).containsExactly(0, 1, 2);
      StragglerReport.Rank slow = r.ranks().get(SLOW);
      assertThat(slow.computeSeconds())
          .as("the pause counts as compute")
          .isGreaterThan(40 * SLOW_MILLIS / 1e3);
      assertThat(slow.medianWorkSeconds()).isGreaterThanOrEqualTo(SLOW_MILLIS / 1e3);
      for (StragglerReport.Rank k : r.ranks()) {
        if (k.rank() != SLOW) {
          // (Not their communication wait against its: on a loaded machine the ring's own time
          // varies
          // more between ranks than the 40 ms.)
          assertThat(k.commWaitSeconds()).as("rank %d", k.rank()).isGreaterThan(0);
          assertThat(k.medianWorkSeconds()).isLessThan(slow.medianWorkSeconds());
        }
      }
    }

    // The driver: the slowest rank before each epoch's end, on the epoch's line, and the warning.
    assertThat(view.slowest).containsExactly(reports.get(0).slowest(), reports.get(1).slowest());
    String console = view.bytes.toString(StandardCharsets.UTF_8);
    assertThat(console)
        .containsPattern("epoch 1 done in .*  slow: rank 2 on 127\\.0\\.0\\.1 \\+\\d+ %\\R");
    assertThat(console)
        .containsPattern("epoch 2 done in .*  slow: rank 2 on 127\\.0\\.0\\.1 \\+\\d+ %\\R");
    assertThat(console)
        .contains(
            "warning: straggler: epoch 1: slowest rank 2 on 127.0.0.1 (executor local) of 3,");

    // TensorBoard: per-rank scalars at each epoch.
    List<EventFiles.Event> events;
    try (Stream<Path> files = Files.list(logs.resolve("train"))) {
      events = EventFiles.read(files.findFirst().orElseThrow());
    }
    List<EventFiles.Event> straggler =
        events.stream().filter(e -> e.scalars().containsKey("straggler/rank")).toList();
    assertThat(straggler).extracting(EventFiles.Event::step).containsExactly(0L, 1L);
    Map<String, Float> e0 = straggler.get(0).scalars();
    assertThat(e0).containsEntry("straggler/rank", (float) SLOW);
    for (int r = 0; r < 3; r++) {
      assertThat(e0)
          .containsKeys(
              "rank_time/compute_s/rank_" + r,
              "rank_time/data_wait_s/rank_" + r,
              "rank_time/comm_wait_s/rank_" + r,
              "rank_time/step_median_ms/rank_" + r,
              "rank_time/step_p95_ms/rank_" + r);
    }
    assertThat(e0.get("rank_time/step_median_ms/rank_2"))
        .isGreaterThan(e0.get("rank_time/step_median_ms/rank_0"));

    // metrics.json
    JsonNode json =
        new ObjectMapper().readTree(MetricsReport.toJson(trained.history(), 1, Map.of()));
    JsonNode s0 = json.get("stragglers").get(0);
    assertThat(s0.get("slowest").get("rank").asInt()).isEqualTo(SLOW);
    assertThat(s0.get("slowest").get("executor").asText()).isEqualTo("local");
    assertThat(s0.get("slowest").get("warning").asBoolean()).isTrue();
    assertThat(s0.get("ranks")).hasSize(3);
    assertThat(s0.get("ranks").get(SLOW).get("compute_s").asDouble())
        .isEqualTo(reports.get(0).ranks().get(SLOW).computeSeconds());
  }
}
