package dev.sparktrainer.train.step;

/**
 * Where a {@link TrainStep}'s time went so far, in nanoseconds: a snapshot, so a caller measures an
 * interval as {@code after.since(before)}.
 *
 * @param computeNanos forward and backward
 * @param backwardNanos backward (part of compute)
 * @param exposedNanos communication the step waited for
 * @param communicationNanos communication, overlapped or not
 * @param optimizerNanos the optimizer's update and the write-back, less the exposed communication
 */
public record StepTimings(
    long computeNanos,
    long backwardNanos,
    long exposedNanos,
    long communicationNanos,
    long optimizerNanos) {

  /** Nothing yet. */
  public static final StepTimings ZERO = new StepTimings(0, 0, 0, 0, 0);

  /** The time spent between {@code earlier} and this snapshot. */
  public StepTimings since(StepTimings earlier) {
    return new StepTimings(
        computeNanos - earlier.computeNanos,
        backwardNanos - earlier.backwardNanos,
        exposedNanos - earlier.exposedNanos,
        communicationNanos - earlier.communicationNanos,
        optimizerNanos - earlier.optimizerNanos);
  }
}
