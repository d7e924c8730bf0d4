package dev.sparktrainer.train;

/**
 * Replicas that should be bit-identical are not: the job must not go on (and a retry would not
 * help).
 */
final class ReplicaMismatchException extends NonRetryableTrainingException {
  private static final long serialVersionUID = 1L;

  ReplicaMismatchException(String message) {
    super(message);
  }

  ReplicaMismatchException(String message, Throwable cause) {
    super(message, cause);
  }
}
