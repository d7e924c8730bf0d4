package dev.sparktrainer.it.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.cluster.StandaloneCluster;
import dev.sparktrainer.it.cluster.ClusterRuns.RankInfo;
import dev.sparktrainer.it.cluster.ClusterRuns.Train;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Faults on a real multi-JVM cluster, each ending with nothing lost: an executor killed with
 * SIGKILL mid-training, a kill while rank 0 writes a checkpoint, the driver killed and the same
 * command run again (how Airflow retries a task), and an executor that stops responding (SIGSTOP).
 *
 * <p>Training the digits takes about a second, too short to hit by chance, so the chief is held in
 * a deterministic window: an injected fault ({@code Train.checkpointRenameDelay}, testing only, see
 * {@code dev.sparktrainer.train.FaultInjectingCli}) makes rank 0 pause between writing the
 * temporary file of step {@value #HOOK_STEP} and renaming it; the other rank is then blocked in the
 * next step's all-reduce. The test waits for that temporary file to appear, then strikes. Step 50
 * is in the third epoch (22 steps each); the complete checkpoints before it are 30, 40 and 44
 * (every 10 steps and at each epoch end, the last three kept). When a task fails, Spark fails the
 * barrier stage and kills the other task with an interrupt, so a checkpoint being written at that
 * moment is abandoned: every retry here resumes from step 44, the latest complete checkpoint.
 */
class ExecutorFaultsIT {
  private static final Duration RUN = Duration.ofMinutes(5);
  private static final Path ROOT =
      Path.of("target", "it-cluster", "ExecutorFaultsIT").toAbsolutePath();
  private static final int HOOK_STEP = 50;
  private static final long HOOK_MILLIS = 6000;

  /** The resumed run's held-out accuracy vs the uninterrupted run's. */
  private static final double TOLERANCE = 0.02;

  private static StandaloneCluster cluster;
  private static Path data;
  private static Train reference;

  @BeforeAll
  static void startCluster() throws Exception {
    StandaloneTrainingIT.deleteRecursively(ROOT);
    Files.createDirectories(ROOT);
    data = ClusterRuns.digits(ROOT);
    cluster = ClusterRuns.startCluster(ROOT.resolve("cluster"), b -> {});
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close(); // drivers, workers with their executors, master: by process id
    }
  }

  /** Each test starts on an idle cluster: the previous application's executors are gone. */
  @BeforeEach
  void idleCluster() throws Exception {
    awaitNoExecutors();
  }

  private static void awaitNoExecutors() throws InterruptedException {
    ClusterRuns.await(
        "the previous application's executors to exit",
        Duration.ofSeconds(90),
        null,
        () -> cluster.executors().isEmpty() ? Optional.of(true) : Optional.empty());
  }

  private static synchronized Train reference() throws Exception {
    if (reference == null) {
      Train t = new Train(ROOT, "reference");
      ClusterRuns.assertSucceeds(t.submit(cluster, data), RUN);
      assertThat(t.resumes()).isEmpty();
      reference = t;
      awaitNoExecutors();
    }
    return reference;
  }

  /**
   * Waits until rank 0 is inside the hook: the temporary file of step {@value #HOOK_STEP} exists.
   */
  private static Path awaitCheckpointBeingWritten(Train t, StandaloneCluster.Application app)
      throws Exception {
    return ClusterRuns.await(
        "rank 0 to be writing the checkpoint of step " + HOOK_STEP,
        Duration.ofMinutes(3),
        app,
        () -> {
          try {
            return t.checkpointTemps().stream()
                .filter(p -> p.getFileName().toString().startsWith("_tmp-" + HOOK_STEP + "-"))
                .findFirst();
          } catch (IOException e) {
            return Optional.empty();
          }
        });
  }

  private static ProcessHandle executorOf(RankInfo rank) {
    Optional<ProcessHandle> h = cluster.executor(rank.pid());
    assertThat(h)
        .as(
            "rank "
                + rank.rank()
                + "'s executor (pid "
                + rank.pid()
                + ") among this cluster's executors "
                + cluster.executors().stream().map(ProcessHandle::pid).toList())
        .isPresent();
    return h.get();
  }

  private static void kill9(ProcessHandle p) throws Exception {
    p.destroyForcibly(); // SIGKILL
    assertThat(p.onExit().get(30, TimeUnit.SECONDS).isAlive()).isFalse();
  }

  private static JsonNode onlyResume(Train t) throws Exception {
    List<JsonNode> resumes = t.resumes();
    assertThat(resumes).as("resumes in metrics.json").hasSize(1);
    return resumes.get(0);
  }

  @Test
  void killMinus9OfAnExecutorMidTrainingResumesFromTheLatestCheckpoint() throws Exception {
    Train ref = reference();
    Train t = new Train(ROOT, "kill-executor").checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS);
    StandaloneCluster.Application app = t.submit(cluster, data);
    RankInfo rank1 = ClusterRuns.awaitRank(cluster, app, 1, 0, Duration.ofMinutes(3));
    awaitCheckpointBeingWritten(t, app);
    List<Long> complete = t.checkpointSteps();
    // The non-chief rank. Spark fails the barrier stage and kills the other task with an interrupt;
    // rank 0's executor lives on, and so does its background checkpoint writer.
    kill9(executorOf(rank1));
    ClusterRuns.assertSucceeds(app, RUN);

    JsonNode resume = onlyResume(t);
    assertThat(complete).isNotEmpty();
    // Checkpoints are written in the background: the killed attempt's rank 0 stops training at
    // once,
    // but its executor lives on and its writer finishes the snapshot of step HOOK_STEP it had taken
    // (a consistent state: every rank had finished that step), and any snapshot queued behind it.
    // The
    // retry resumes from whichever was the newest complete checkpoint when it started: one of
    // those,
    // or the one complete before the kill.
    long latest = resume.path("step").asLong();
    assertThat(latest)
        .as("resumed from the newest complete checkpoint")
        .isGreaterThanOrEqualTo(complete.get(complete.size() - 1))
        .isLessThanOrEqualTo((long) HOOK_STEP + ClusterRuns.STEPS_PER_EPOCH);
    assertThat(resume.path("epoch").asLong()).isEqualTo(latest / ClusterRuns.STEPS_PER_EPOCH);
    assertThat(resume.path("stage_attempt").asInt())
        .as("a Spark stage retry")
        .isGreaterThanOrEqualTo(1);
    assertThat(t.metrics().path("epochs").size()).isEqualTo(ClusterRuns.EPOCHS);
    // The retry ran in a new executor JVM launched by the worker in place of the killed one.
    List<RankInfo> retry =
        ClusterRuns.ranks(cluster, app).stream().filter(r -> r.stageAttempt() >= 1).toList();
    assertThat(retry).extracting(RankInfo::rank).contains(0, 1);
    assertThat(retry).extracting(RankInfo::pid).doesNotContain(rank1.pid());
    assertThat(ClusterRuns.executorLogText(cluster, rank1.appId()))
        .contains("rank 0: resuming from the checkpoint at step " + latest);
    assertThat(t.validationAccuracy())
        .as("held-out accuracy vs the uninterrupted run's")
        .isCloseTo(ref.validationAccuracy(), within(TOLERANCE));
    assertThat(t.validationAccuracy()).isGreaterThanOrEqualTo(ClusterRuns.MIN_ACCURACY);
    // Stronger than the tolerance: a resume restores the data position and the per-step seeds.
    assertThat(t.parameterHash())
        .as("final parameters vs the uninterrupted run's")
        .isEqualTo(ref.parameterHash());
  }

  @Test
  void aKillWhileACheckpointIsWrittenResumesFromThePreviousCompleteOne() throws Exception {
    Train ref = reference();
    Train t =
        new Train(ROOT, "kill-during-checkpoint").checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS);
    StandaloneCluster.Application app = t.submit(cluster, data);
    RankInfo rank0 = ClusterRuns.awaitRank(cluster, app, 0, 0, Duration.ofMinutes(3));
    Path temp = awaitCheckpointBeingWritten(t, app);
    List<Long> complete = t.checkpointSteps();
    kill9(executorOf(rank0)); // the writer, between its temporary file and the rename
    assertThat(temp).as("the interrupted checkpoint's temporary file").exists();
    assertThat(t.checkpointSteps())
        .as("no checkpoint of step " + HOOK_STEP)
        .doesNotContain((long) HOOK_STEP);
    assertThat(complete).as("complete checkpoints when the writer was killed").isNotEmpty();
    long previous = complete.get(complete.size() - 1);
    assertThat(previous).isLessThan(HOOK_STEP);
    ClusterRuns.assertSucceeds(app, RUN);

    JsonNode resume = onlyResume(t);
    assertThat(resume.path("step").asLong())
        .as("resumed from the previous complete checkpoint")
        .isEqualTo(previous);
    assertThat(resume.path("stage_attempt").asInt()).isGreaterThanOrEqualTo(1);
    assertThat(t.checkpointTemps()).as("temporary files left in " + t.checkpoints).isEmpty();
    long last = (long) ClusterRuns.EPOCHS * ClusterRuns.STEPS_PER_EPOCH;
    assertThat(t.checkpointSteps()).last().isEqualTo(last);
    CheckpointStore store = new CheckpointStore(t.checkpoints.toString(), new Configuration(), 3);
    assertThat(store.latest())
        .as("the last checkpoint verifies")
        .get()
        .extracting(CheckpointState::step)
        .isEqualTo(last);
    assertThat(t.validationAccuracy()).isGreaterThanOrEqualTo(ClusterRuns.MIN_ACCURACY);
    assertThat(t.parameterHash())
        .as("final parameters vs the uninterrupted run's")
        .isEqualTo(ref.parameterHash());
  }

  /**
   * The driver is killed mid-training (the machine running spark-submit dies, or a scheduler kills
   * the task), then the very same command is run again, as Airflow retries a task: it resumes from
   * the checkpoint instead of starting over.
   */
  @Test
  void theSameCommandRunAgainAfterAFailureResumesInsteadOfRestarting() throws Exception {
    Train ref = reference();
    Train t = new Train(ROOT, "rerun").checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS);
    StandaloneCluster.Application first = t.submit(cluster, data, "rerun-first");
    awaitCheckpointBeingWritten(t, first);
    first.kill(); // SIGKILL to the driver JVM: the master removes the application, the workers its
    // executors
    assertThat(first.isAlive()).isFalse();
    awaitNoExecutors();
    assertThat(t.output.resolve("metrics.json"))
        .as("the killed run finished nothing")
        .doesNotExist();
    List<Long> complete = t.checkpointSteps();
    assertThat(complete).as("checkpoints the killed run left").isNotEmpty();
    long latest = complete.get(complete.size() - 1);

    StandaloneCluster.Application second =
        t.submit(cluster, data, "rerun-second"); // the same command line
    ClusterRuns.assertSucceeds(second, RUN);
    JsonNode resume = onlyResume(t);
    assertThat(resume.path("step").asLong())
        .as("the rerun's starting step")
        .isEqualTo(latest)
        .isPositive();
    assertThat(resume.path("stage_attempt").asInt()).as("a new job, not a stage retry").isZero();
    assertThat(ClusterRuns.read(second.log()))
        .contains("Resumed from the checkpoint at step " + latest);
    JsonNode epochs = t.metrics().path("epochs");
    assertThat(epochs.size())
        .as("the history has every epoch, the first run's included")
        .isEqualTo(ClusterRuns.EPOCHS);
    assertThat(t.validationAccuracy()).isGreaterThanOrEqualTo(ClusterRuns.MIN_ACCURACY);
    assertThat(t.parameterHash())
        .as("final parameters vs the uninterrupted run's")
        .isEqualTo(ref.parameterHash());
  }

  /**
   * An executor that stops responding (SIGSTOP: a wedged process, a machine that froze) fails the
   * job with an error naming the silent rank and its address within the configured collective
   * timeout, instead of hanging; the checkpoints written before it stay usable. Stage retries are
   * off here so the first failure is final (with retries Spark would retry once the frozen executor
   * is declared lost after spark.network.timeout and replaced, and the retry would resume).
   */
  @Test
  void aPausedWorkerFailsTheJobWithATimeoutNamingTheRank() throws Exception {
    Train t =
        new Train(ROOT, "paused-worker")
            .checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS)
            .args("--collective-timeout", "20")
            .conf("spark.stage.maxConsecutiveAttempts", "1");
    StandaloneCluster.Application app = t.submit(cluster, data);
    ProcessHandle paused = null;
    try {
      RankInfo rank1 = ClusterRuns.awaitRank(cluster, app, 1, 0, Duration.ofMinutes(3));
      awaitCheckpointBeingWritten(t, app);
      paused = executorOf(rank1);
      ClusterRuns.signal(paused, "STOP");
      long start = System.nanoTime();
      int exit = app.waitFor(Duration.ofMinutes(3));
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      String log = ClusterRuns.read(app.log());
      assertThat(exit).as("driver exit code; its log ends:\n" + app.logTail(40)).isEqualTo(1);
      // e.g. "error: Training failed: dev.sparktrainer.collective.CollectiveException: rank 0 of 2,
      // allReduce #67
      // (FLOAT32 MEAN, 4810 elements): timed out after 20000 ms waiting for data from rank 1 at
      // 127.0.0.1:38107 [...]"
      assertThat(log)
          .containsPattern(
              "error: Training failed: .*rank 0 of 2, allReduce #\\d+ \\([^)]*\\): timed out"
                  + " after 20000 ms waiting for data from rank 1 at "
                  + Pattern.quote(rank1.host() + ":" + rank1.port()));
      // at least the timeout, at most a checkpoint write + timeout + shutdown
      assertThat(took)
          .as("from the pause to the driver's exit")
          .isBetween(Duration.ofSeconds(20), Duration.ofSeconds(75));
      assertThat(t.output.resolve("metrics.json")).doesNotExist();
      // The checkpoint of HOOK_STEP (its write paused by the hook, in the background: training went
      // on)
      // and any taken after it before rank 1 froze are complete and verify.
      CheckpointStore store = new CheckpointStore(t.checkpoints.toString(), new Configuration(), 3);
      assertThat(store.latest())
          .as("the checkpoints written before the pause verify")
          .get()
          .extracting(CheckpointState::step)
          .satisfies(step -> assertThat(step).isGreaterThanOrEqualTo(HOOK_STEP));
    } finally {
      if (paused != null && paused.isAlive()) {
        ClusterRuns.signal(paused, "CONT");
        kill9(paused);
      }
      if (app.isAlive()) {
        app.kill();
      }
    }
  }
}
