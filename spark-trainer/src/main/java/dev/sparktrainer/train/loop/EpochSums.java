package dev.sparktrainer.train.loop;

import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.step.StepTimings;

/**
 * What every rank adds up at an epoch's end, summed over the ranks in one all-reduce of {@link
 * #SIZE} doubles (the layout of {@link #toArray}): the training sums, the seconds each part of the
 * steps took on this rank, and the regression sums of an {@code l2} loss.
 *
 * @param loss the summed loss
 * @param correct the correct predictions
 * @param samples the samples trained on
 * @param dataWaitSeconds waiting for batches
 * @param computeSeconds forward and backward
 * @param backwardSeconds backward
 * @param exposedCommunicationSeconds communication the step waited for
 * @param communicationSeconds communication
 * @param optimizerSeconds the optimizer's update
 * @param regression squared error, absolute error, label, label squared ({@link
 *     EpochMetrics.Regression#SUMS})
 */
record EpochSums(
    double loss,
    double correct,
    double samples,
    double dataWaitSeconds,
    double computeSeconds,
    double backwardSeconds,
    double exposedCommunicationSeconds,
    double communicationSeconds,
    double optimizerSeconds,
    double[] regression) {

  /** The doubles of the all-reduce. */
  static final int SIZE = 9 + EpochMetrics.Regression.SUMS;

  /**
   * This rank's sums: {@code acc} (loss, correct, samples, then the regression sums) and the
   * epoch's step times.
   */
  static EpochSums of(double[] acc, long waitNanos, StepTimings t) {
    double[] regression = new double[EpochMetrics.Regression.SUMS];
    System.arraycopy(acc, 3, regression, 0, regression.length);
    return new EpochSums(
        acc[0],
        acc[1],
        acc[2],
        waitNanos / 1e9,
        t.computeNanos() / 1e9,
        t.backwardNanos() / 1e9,
        t.exposedNanos() / 1e9,
        t.communicationNanos() / 1e9,
        t.optimizerNanos() / 1e9,
        regression);
  }

  /** The sums over every rank (one all-reduce, every rank in the same order). */
  EpochSums allReduce(Communicator comm) {
    double[] sums = toArray();
    comm.allReduce(sums, ReduceOp.SUM);
    return fromArray(sums);
  }

  /** The all-reduce's layout: the components in their order, the regression sums last. */
  double[] toArray() {
    double[] a = new double[SIZE];
    a[0] = loss;
    a[1] = correct;
    a[2] = samples;
    a[3] = dataWaitSeconds;
    a[4] = computeSeconds;
    a[5] = backwardSeconds;
    a[6] = exposedCommunicationSeconds;
    a[7] = communicationSeconds;
    a[8] = optimizerSeconds;
    System.arraycopy(regression, 0, a, 9, regression.length);
    return a;
  }

  static EpochSums fromArray(double[] a) {
    double[] regression = new double[EpochMetrics.Regression.SUMS];
    System.arraycopy(a, 9, regression, 0, regression.length);
    return new EpochSums(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], regression);
  }
}
