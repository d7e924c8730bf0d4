package dev.sparktrainer.train.job;

import dev.sparktrainer.engine.EngineCheck;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code spark-trainer doctor}'s check ({@link EngineCheck}), run where a GPU job trains before
 * PyTorch is first used there: a libtorch that is not where {@code PYTORCH_LIBRARY_PATH} says, a
 * JNI built for another libtorch, or a device that cannot take a training step fails the job at
 * once with the check's one line, instead of a silent CPU fallback or an error deep inside a step.
 *
 * <p>Once per JVM (libtorch and its JNI are per process): the first task's assigned GPUs take the
 * test step; later tasks in the same JVM (local mode, a second job in a notebook) reuse the result
 * — a second test step could meet a training task's gradient collector, which PyTorch allows one of
 * per JVM. No GPU visible is not a failure here: training then falls back to the CPU, as before.
 */
final class ExecutorEngineCheck {
  private static final System.Logger LOG = System.getLogger(ExecutorEngineCheck.class.getName());
  private static EngineCheck.Report done;

  private ExecutorEngineCheck() {}

  /** Forgets the result (tests: a JVM checks once). */
  static synchronized void reset() {
    done = null;
  }

  /**
   * Runs the check (first call in this JVM) and throws a {@link NonRetryableTrainingException}
   * naming {@code who} and the problem when it failed.
   *
   * @param who e.g. {@code rank 1 (executor 3)}
   * @param gpuAddresses the GPU addresses Spark assigned (non-numeric ones: every visible GPU)
   */
  static synchronized void require(String who, String[] gpuAddresses) {
    if (done == null) {
      List<Integer> ids = new ArrayList<>();
      for (String a : gpuAddresses) {
        try {
          ids.add(Integer.parseInt(a.trim()));
        } catch (NumberFormatException e) {
          ids = null;
          break;
        }
      }
      done = EngineCheck.run(ids == null || ids.isEmpty() ? null : ids);
      LOG.log(
          done.ok() ? System.Logger.Level.INFO : System.Logger.Level.ERROR,
          who + ": engine check (spark-trainer doctor)\n" + done.text());
    }
    if (!done.ok()) {
      throw new NonRetryableTrainingException(
          who + ": PyTorch cannot train on this executor: " + done.problem());
    }
  }
}
