package dev.sparktrainer.train;

/**
 * A training failure that a retry would only repeat — replicas that diverged, a checkpoint that
 * does not belong to the model, workers that disagree on the data — so the driver cancels the job
 * at the first such task failure instead of letting Spark retry the stage (see {@link
 * NonRetryableFailureListener}).
 */
class NonRetryableTrainingException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  NonRetryableTrainingException(String message) {
    super(message);
  }

  NonRetryableTrainingException(String message, Throwable cause) {
    super(message, cause);
  }
}
