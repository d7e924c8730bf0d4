package dev.sparktrainer.it.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sparktrainer.cluster.StandaloneCluster;
import dev.sparktrainer.it.cluster.ClusterRuns.RankInfo;
import dev.sparktrainer.it.cluster.ClusterRuns.Train;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Elastic training on a real three-worker cluster: one worker's whole process tree (the worker JVM
 * and its executor) is killed for good mid-training, so Spark can never again give the barrier
 * stage its three slots. With {@code --min-workers 2} the trainer relaunches on two workers from
 * the latest checkpoint and finishes, recording the change; with the default it fails naming the
 * missing slots.
 *
 * <p>Rank 0 is held in a deterministic window as in {@link ExecutorFaultsIT}: the checkpoint
 * writer's injected rename delay pauses it while writing step {@value #HOOK_STEP}'s checkpoint, the
 * test kills the worker that runs rank 1 then.
 */
class ElasticTrainingIT {
  private static final Duration RUN = Duration.ofMinutes(6);
  private static final Path ROOT =
      Path.of("target", "it-cluster", "ElasticTrainingIT").toAbsolutePath();

  /** 3 workers x batch 32: 14 steps per epoch (1,437 digits); step 20 is in the second epoch. */
  private static final int HOOK_STEP = 20;

  private static final long HOOK_MILLIS = 4000;
  private static final String SLOT_WAIT = "10";
  private static Path data;

  @BeforeAll
  static void data() throws Exception {
    StandaloneTrainingIT.deleteRecursively(ROOT);
    Files.createDirectories(ROOT);
    data = ClusterRuns.digits(ROOT);
  }

  /** Submits {@code t} on a new 3-worker cluster, kills rank 1's worker for good mid-training. */
  private static Killed runAndKillAWorker(StandaloneCluster cluster, Train t) throws Exception {
    StandaloneCluster.Application app = t.submit(cluster, data);
    RankInfo rank1 = ClusterRuns.awaitRank(cluster, app, 1, 0, Duration.ofMinutes(3));
    ClusterRuns.await(
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
    int worker = cluster.workerOf(rank1.pid());
    assertThat(worker)
        .as("the worker running rank 1's executor (pid " + rank1.pid() + ")")
        .isNotNegative();
    List<Long> killed = cluster.killWorker(worker);
    long at = System.nanoTime();
    assertThat(killed)
        .as("the worker and its executor")
        .contains(rank1.pid())
        .hasSizeGreaterThanOrEqualTo(2);
    return new Killed(app, rank1, worker, at);
  }

  private record Killed(
      StandaloneCluster.Application app, RankInfo rank1, int worker, long atNanos) {}

  private static StandaloneCluster threeWorkers(String name) throws Exception {
    // A generous start-up deadline: the shared test machine can be very busy.
    return ClusterRuns.startCluster(
        ROOT.resolve(name), b -> b.optWorkers(3).optStartTimeout(Duration.ofMinutes(4)));
  }

  @Test
  void withMinWorkers2TheRunFinishesOnTwoWorkersWithTheResumeRecorded() throws Exception {
    try (StandaloneCluster cluster = threeWorkers("cluster-elastic")) {
      Train t =
          new Train(ROOT, "elastic")
              .workers(3)
              .checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS)
              .args("--min-workers", "2", "--slot-wait", SLOT_WAIT);
      Killed k = runAndKillAWorker(cluster, t);
      // Training again: rank 0 of the relaunched job has restored the checkpoint on 2 workers.
      String appId = k.rank1().appId();
      ClusterRuns.await(
          "rank 0 to resume on 2 workers",
          Duration.ofMinutes(3),
          k.app(),
          () -> {
            try {
              return ClusterRuns.executorLogText(cluster, appId).contains("resuming on 2 workers")
                  ? Optional.of(true)
                  : Optional.empty();
            } catch (IOException e) {
              return Optional.empty();
            }
          });
      Duration toResume = Duration.ofNanos(System.nanoTime() - k.atNanos());
      ClusterRuns.assertSucceeds(k.app(), RUN);
      Duration toEnd = Duration.ofNanos(System.nanoTime() - k.atNanos());
      System.out.printf(
          "ElasticTrainingIT: kill of worker %d (rank 1) to training again on 2 workers: %.1f s"
              + " (slot wait %s s); to the end of the run: %.1f s%n",
          k.worker(), toResume.toMillis() / 1e3, SLOT_WAIT, toEnd.toMillis() / 1e3);

      List<JsonNode> resumes = t.resumes();
      assertThat(resumes).as("resumes in metrics.json").hasSize(1);
      JsonNode workers = resumes.get(0).path("workers");
      assertThat(workers.path("from_workers").asInt()).isEqualTo(3);
      assertThat(workers.path("to_workers").asInt()).isEqualTo(2);
      // The global batch (3 x 32 = 96) kept: 2 workers x 24 x 2 accumulated.
      assertThat(workers.path("global_batch").asLong()).isEqualTo(96);
      assertThat(workers.path("batch_size").asInt()).isEqualTo(24);
      assertThat(workers.path("accumulate_steps").asInt()).isEqualTo(2);
      // The interrupted epoch goes on with the records the 3 workers had not consumed.
      assertThat(workers.path("epoch_restarted").asBoolean()).isFalse();
      assertThat(t.metrics().path("epochs").size()).isEqualTo(ClusterRuns.EPOCHS);
      assertThat(t.validationAccuracy()).isGreaterThanOrEqualTo(ClusterRuns.MIN_ACCURACY);
      String driver = ClusterRuns.read(k.app().log());
      assertThat(driver)
          .contains(
              "workers: 3 -> 2 (the barrier stage needs 3 task slots and the cluster has offered 2");
      assertThat(driver)
          .contains("Resumed from the checkpoint at step " + resumes.get(0).path("step").asLong())
          .contains("3 -> 2 workers, batch 24 x 2 accumulated (global 96)");
      assertThat(toResume)
          .as("from the kill to training again")
          .isLessThan(Duration.ofSeconds(120));
    }
  }

  @Test
  void withGrowTheRunGrowsBackToThreeWorkersWhenAWorkerJoins() throws Exception {
    try (StandaloneCluster cluster = threeWorkers("cluster-grow")) {
      // Training the digits takes seconds: rank 1 of the job on 2 workers waits 45 s before joining
      // the ring, the window in which a new worker registers while the job runs on 2 (the jobs on
      // 3 workers, before the kill and after the grow, do not wait).
      Train t =
          new Train(ROOT, "grow")
              .workers(3)
              .checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS)
              .ringConnectDelay(1, 45000, 2)
              .args("--min-workers", "2", "--grow", "--slot-wait", SLOT_WAIT);
      Killed k = runAndKillAWorker(cluster, t);
      ClusterRuns.await(
          "the driver to relaunch on 2 workers",
          Duration.ofMinutes(3),
          k.app(),
          () ->
              ClusterRuns.read(k.app().log()).contains("workers: 3 -> 2")
                  ? Optional.of(true)
                  : Optional.empty());
      cluster.addWorker(); // a machine joins: the application gets a third executor again
      ClusterRuns.assertSucceeds(k.app(), RUN);
      List<JsonNode> resumes = t.resumes();
      assertThat(resumes).as("resumes in metrics.json").hasSize(2);
      assertThat(resumes.get(1).path("workers").path("from_workers").asInt()).isEqualTo(2);
      assertThat(resumes.get(1).path("workers").path("to_workers").asInt()).isEqualTo(3);
      // Grown at an epoch end: its checkpoint, nothing of the epoch to re-deal; back to 3 x 32 x 1.
      assertThat(resumes.get(1).path("step_in_epoch").asLong()).isZero();
      assertThat(resumes.get(1).path("workers").path("batch_size").asInt()).isEqualTo(32);
      assertThat(resumes.get(1).path("workers").path("accumulate_steps").asInt()).isEqualTo(1);
      assertThat(t.metrics().path("epochs").size()).isEqualTo(ClusterRuns.EPOCHS);
      assertThat(ClusterRuns.read(k.app().log())).contains("workers: 2 -> 3 (");
      assertThat(t.validationAccuracy()).isGreaterThanOrEqualTo(ClusterRuns.MIN_ACCURACY);
    }
  }

  @Test
  void withTheDefaultMinWorkersTheRunFailsNamingTheMissingSlots() throws Exception {
    try (StandaloneCluster cluster = threeWorkers("cluster-default")) {
      Train t =
          new Train(ROOT, "default")
              .workers(3)
              .checkpointRenameDelay(HOOK_STEP, HOOK_MILLIS)
              .args("--slot-wait", SLOT_WAIT);
      Killed k = runAndKillAWorker(cluster, t);
      int exit = k.app().waitFor(RUN);
      Duration took = Duration.ofNanos(System.nanoTime() - k.atNanos());
      System.out.printf(
          "ElasticTrainingIT: without --min-workers the run failed %.1f s after the kill%n",
          took.toMillis() / 1e3);
      assertThat(exit).as("driver exit code; its log ends:\n" + k.app().logTail(40)).isEqualTo(1);
      assertThat(ClusterRuns.read(k.app().log()))
          .contains(
              "error: Training stopped: the barrier stage needs 3 task slots and the cluster has offered 2 for 10.0 s")
          .contains("--min-workers");
      assertThat(t.output.resolve("metrics.json")).doesNotExist();
    }
  }
}
