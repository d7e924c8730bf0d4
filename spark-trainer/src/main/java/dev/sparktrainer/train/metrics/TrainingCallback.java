package dev.sparktrainer.train.metrics;

import java.io.IOException;
import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;

/**
 * A hook into training, run by rank 0 (the chief) inside its task: live progress to the driver,
 * TensorBoard event files, anything that watches a run. Shipped to the task with the job, so it
 * must be small and serializable; {@link #start} is called once per task attempt (a retried stage
 * calls it again) and the returned listener lives for that attempt.
 *
 * <p>A callback never fails training: an exception from it is logged and the listener is dropped
 * for the rest of the attempt.
 */
public interface TrainingCallback extends Serializable {
  /**
   * Called on rank 0 before its first step.
   *
   * @param numWorkers N
   * @param epochs the job's epochs
   * @param stepsPerEpoch synchronous steps per epoch
   * @param globalStep global steps already done (non-zero when resuming from a checkpoint)
   * @param attempt the stage attempt (0 for the first)
   * @param hadoopConf the job's Hadoop configuration, for writing files
   */
  Listener start(
      int numWorkers,
      int epochs,
      long stepsPerEpoch,
      long globalStep,
      int attempt,
      Configuration hadoopConf)
      throws IOException;

  /**
   * Called on the driver, not in a task, when the trainer relaunches on another number of workers
   * ({@code optMinWorkers}, {@code optGrow}); {@code reason} says why. The default does nothing.
   */
  default void onWorkersChanged(int from, int to, String reason) {}

  /** Receives rank 0's events during one task attempt; closed when the attempt ends. */
  interface Listener extends AutoCloseable {
    /** After every step (cheap: throttle inside if reporting is expensive). */
    default void onStep(StepProgress step) {}

    /**
     * After every epoch with more than one worker, just before {@link #onEpochEnd}: who was
     * slowest.
     */
    default void onStragglers(StragglerReport report) {}

    /** After every epoch, with the globally reduced metrics. */
    default void onEpochEnd(EpochMetrics metrics) {}

    @Override
    default void close() {}
  }
}
