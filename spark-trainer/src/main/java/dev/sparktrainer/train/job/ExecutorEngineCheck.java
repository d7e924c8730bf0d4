package dev.sparktrainer.train.job;

import dev.sparktrainer.engine.EngineCheck;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import dev.sparktrainer.train.step.ReplicaSet;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

/**
 * {@code spark-trainer doctor}'s check ({@link EngineCheck}), run where a GPU job trains before
 * PyTorch is first used there: a libtorch that is not where {@code PYTORCH_LIBRARY_PATH} says, a
 * JNI built for another libtorch, or a device that cannot take a training step fails the job at
 * once with the check's one line, instead of a silent CPU fallback or an error deep inside a step.
 *
 * <p>Each GPU address a task is given is checked once per JVM (libtorch and its JNI are per
 * process, a device that took the test step stays good): a later task given a GPU not checked yet
 * (another task of a local-mode JVM, an executor with several GPUs) has that one checked. A failure
 * is not remembered: the next task or job checks again (after its setting was fixed, or a device
 * recovered). The test step holds the JVM's gradient lock ({@link ReplicaSet#withJvmLock}): PyTorch
 * allows one gradient collector per JVM, and a task of this JVM may be training. No GPU visible is
 * not a failure here: training then falls back to the CPU, as before.
 */
final class ExecutorEngineCheck {
  private static final System.Logger LOG = System.getLogger(ExecutorEngineCheck.class.getName());

  /** GPU ids whose check passed in this JVM. */
  private static final Set<Integer> passed = new HashSet<>();

  /** The check of every visible GPU (addresses that are not GPU ids) passed in this JVM. */
  private static boolean passedAll;

  private ExecutorEngineCheck() {}

  /** Forgets the results (tests: a JVM checks each device once). */
  static synchronized void reset() {
    passed.clear();
    passedAll = false;
  }

  /**
   * Runs the check for those of {@code gpuAddresses} not checked yet in this JVM and throws a
   * {@link NonRetryableTrainingException} naming {@code who} and the problem when it failed.
   *
   * @param who e.g. {@code rank 1 (executor 3)}
   * @param gpuAddresses the GPU addresses Spark assigned (non-numeric ones: every visible GPU)
   */
  static void require(String who, String[] gpuAddresses) {
    require(who, gpuAddresses, EngineCheck::run);
  }

  /** As {@link #require(String, String[])}, with {@code check} as the engine check. */
  static synchronized void require(
      String who, String[] gpuAddresses, Function<List<Integer>, EngineCheck.Report> check) {
    List<Integer> ids = new ArrayList<>();
    for (String a : gpuAddresses) {
      try {
        ids.add(Integer.parseInt(a.trim()));
      } catch (NumberFormatException e) {
        ids = null;
        break;
      }
    }
    boolean all = ids == null || ids.isEmpty();
    List<Integer> unchecked = new ArrayList<>();
    if (!all) {
      for (int id : ids) {
        if (!passed.contains(id) && !unchecked.contains(id)) {
          unchecked.add(id);
        }
      }
    }
    if (all ? passedAll : unchecked.isEmpty()) {
      return;
    }
    EngineCheck.Report report =
        ReplicaSet.withJvmLock(() -> check.apply(all ? null : List.copyOf(unchecked)));
    LOG.log(
        report.ok() ? System.Logger.Level.INFO : System.Logger.Level.ERROR,
        who + ": engine check (spark-trainer doctor)\n" + report.text());
    if (!report.ok()) {
      throw new NonRetryableTrainingException(
          who + ": PyTorch cannot train on this executor: " + report.problem());
    }
    if (all) {
      passedAll = true;
    } else {
      passed.addAll(unchecked);
    }
  }
}
