package dev.sparktrainer.train.loop;

/**
 * A training failure that a retry would only repeat — replicas that diverged, a checkpoint that
 * does not belong to the model, workers that disagree on the data — so the driver cancels the job
 * at the first such task failure instead of letting Spark retry the stage (see {@code
 * train.job.NonRetryableFailureListener}).
 */
public class NonRetryableTrainingException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  public NonRetryableTrainingException(String message) {
    super(message);
  }

  public NonRetryableTrainingException(String message, Throwable cause) {
    super(message, cause);
  }
}
