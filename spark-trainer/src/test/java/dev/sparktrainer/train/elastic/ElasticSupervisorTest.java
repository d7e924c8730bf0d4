package dev.sparktrainer.train.elastic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.train.elastic.ElasticSupervisor.Attempt;
import dev.sparktrainer.train.elastic.ElasticSupervisor.Outcome;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The driver's relaunch loop against a scripted cluster (the facade's Spark barrier jobs stand
 * behind the same interface): what it runs, on how many workers, what it reports, and how it fails.
 * The expected messages are those the loop had in {@code DistributedTrainer}.
 */
class ElasticSupervisorTest {

  /**
   * A cluster whose runs end and whose slot counts come as scripted; it records what it is told.
   */
  private static final class Script implements ElasticSupervisor.Cluster<String> {
    final Deque<Attempt<String>> attempts = new ArrayDeque<>();
    final Deque<Integer> slots = new ArrayDeque<>();
    final List<String> events = new ArrayList<>();

    Script attempt(Attempt<String> a) {
      attempts.add(a);
      return this;
    }

    Script slots(int... counts) {
      for (int c : counts) {
        slots.add(c);
      }
      return this;
    }

    @Override
    public Attempt<String> run(int workers) {
      events.add("run " + workers);
      return attempts.remove();
    }

    @Override
    public int slots() {
      return slots.remove();
    }

    @Override
    public void preflight(int workers) {
      events.add("preflight " + workers);
    }

    @Override
    public void workersChanged(int from, int to, String reason) {
      events.add(from + " -> " + to + ": " + reason);
    }
  }

  /** 3 workers x batch 32 planned (global batch 96), the global batch kept. */
  private static ElasticSupervisor supervisor(int minWorkers, String checkpointDir) {
    ElasticPolicy policy =
        new ElasticPolicy(
            32,
            1,
            3,
            minWorkers,
            false,
            checkpointDir,
            new ElasticPolicy.DataOrder(true, false, ""));
    return new ElasticSupervisor(policy, 3, 30_000);
  }

  @Test
  void aRunThatFinishesReturnsItsResults() {
    Script c = new Script().attempt(Attempt.finished("done"));
    assertThat(supervisor(2, "/ckpt").run(3, c)).isEqualTo(new Outcome<>("done", 3));
    assertThat(c.events).containsExactly("run 3");
  }

  @Test
  void aStartOnFewerSlotsIsReported() {
    Script c = new Script().attempt(Attempt.finished("done"));
    assertThat(supervisor(2, "/ckpt").run(2, c)).isEqualTo(new Outcome<>("done", 2));
    assertThat(c.events)
        .containsExactly("3 -> 2: the cluster offers 2 task slot(s) at the start", "run 2");
  }

  @Test
  void lostSlotsRelaunchOnTheLargestCountThatKeepsTheGlobalBatch() {
    // 3 lost, 2 offered (and 2 counted now): 2 divides 96
    Script c =
        new Script().attempt(Attempt.slotsLost(2)).slots(2).attempt(Attempt.finished("done"));
    assertThat(supervisor(2, "/ckpt").run(3, c)).isEqualTo(new Outcome<>("done", 2));
    assertThat(c.events)
        .containsExactly(
            "run 3",
            "preflight 2",
            "3 -> 2: the barrier stage needs 3 task slots and the cluster has offered 2 for 30.0 s"
                + " (executors lost for good?)",
            "run 2");
  }

  @Test
  void lostSlotsWithoutACheckpointDirectoryStopTraining() {
    Script c = new Script().attempt(Attempt.slotsLost(2)).slots(2);
    assertThatThrownBy(() -> supervisor(2, null).run(3, c))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage(
            "Training stopped: the barrier stage needs 3 task slots and the cluster has offered 2"
                + " for 30.0 s (executors lost for good?). Continuing on fewer workers"
                + " (optMinWorkers 2) needs a checkpoint directory");
  }

  @Test
  void lostSlotsWithTheDefaultMinimumStopTrainingNamingTheOptions() {
    Script c = new Script().attempt(Attempt.slotsLost(2)).slots(2);
    assertThatThrownBy(() -> supervisor(3, "/ckpt").run(3, c))
        .hasMessage(
            "Training stopped: the barrier stage needs 3 task slots and the cluster has offered 2"
                + " for 30.0 s (executors lost for good?). Continuing needs 3 slots; with"
                + " --min-workers (optMinWorkers) below --workers it would go on with fewer; a rerun"
                + " resumes from the checkpoint in /ckpt");
  }

  @Test
  void tooFewSlotsForTheMinimumStopTraining() {
    Script c = new Script().attempt(Attempt.slotsLost(1)).slots(1);
    assertThatThrownBy(() -> supervisor(2, "/ckpt").run(3, c))
        .hasMessageContaining(
            "Continuing needs 3 slots or at least 2 (optMinWorkers) with a global batch they"
                + " divide; with --min-workers");
    assertThat(c.events).containsExactly("run 3");
  }

  @Test
  void stoppedToGrowRelaunchesOnMore() {
    Script c = new Script().attempt(Attempt.grow()).slots(3, 3).attempt(Attempt.finished("done"));
    assertThat(supervisor(2, "/ckpt").run(2, c)).isEqualTo(new Outcome<>("done", 3));
    assertThat(c.events)
        .containsExactly(
            "3 -> 2: the cluster offers 2 task slot(s) at the start",
            "run 2",
            "2 -> 3: the cluster offers 3 task slots again: growing at an epoch end (--grow)",
            "run 3");
  }

  @Test
  void stoppedToGrowWithoutMoreSlotsGoesOnWithAsMany() {
    Script c = new Script().attempt(Attempt.grow()).slots(2, 2).attempt(Attempt.finished("done"));
    assertThat(supervisor(2, "/ckpt").run(2, c)).isEqualTo(new Outcome<>("done", 2));
    assertThat(c.events)
        .containsExactly(
            "3 -> 2: the cluster offers 2 task slot(s) at the start", "run 2", "run 2");
  }
}
