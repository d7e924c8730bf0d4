package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;

/**
 * What the driver does with rank 0's progress: draw it ({@link ConsoleProgress}), record it, ...
 */
public interface ProgressView {
  /**
   * A step (throttled by the sender: a few per second at most, and the last step of each epoch).
   */
  void onStep(StepProgress step);

  /**
   * An epoch's slowest rank (more than one worker), just before {@link #onEpochEnd} of that epoch.
   */
  default void onStraggler(StragglerReport.Slowest slowest) {}

  /** An epoch ended, with its global metrics. */
  void onEpochEnd(EpochMetrics metrics);

  /** The trainer relaunched on {@code to} workers instead of {@code from} (elastic training). */
  default void onWorkersChanged(int from, int to, String reason) {}
}
