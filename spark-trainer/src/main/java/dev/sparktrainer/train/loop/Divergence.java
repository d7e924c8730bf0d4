package dev.sparktrainer.train.loop;

/**
 * Stops a run whose loss is no longer a number (Keras's {@code TerminateOnNaN}): every step after
 * it would train on NaN parameters, and a checkpoint of them would poison each resume. Checked on
 * the loss sums every rank has reduced alike (at each mid-epoch checkpoint and each epoch's end),
 * so every rank fails at the same point, before that point's checkpoint is written; a retry would
 * only repeat it, so the failure is not retried.
 */
final class Divergence {
  private Divergence() {}

  /**
   * @param lossSum the loss x samples summed over the ranks so far in the epoch
   * @param epoch the epoch (0-based)
   * @param globalStep optimizer steps done
   * @throws NonRetryableTrainingException if {@code lossSum} is NaN or infinite
   */
  static void check(double lossSum, int epoch, long globalStep) {
    if (Double.isFinite(lossSum)) {
      return;
    }
    throw new NonRetryableTrainingException(
        "Training diverged: the training loss of epoch "
            + epoch
            + " is "
            + (Double.isNaN(lossSum) ? "NaN" : "infinite")
            + " at step "
            + globalStep
            + "; stopped before writing a checkpoint of these parameters. Lower the learning rate"
            + " (--learning-rate), add warm-up (--warmup-steps) or look for"
            + " non-finite values in the data; a resume starts from the last checkpoint written"
            + " before this point");
  }
}
