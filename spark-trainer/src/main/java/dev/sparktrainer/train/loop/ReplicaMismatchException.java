package dev.sparktrainer.train.loop;

/**
 * Replicas that should be bit-identical are not: the job must not go on (and a retry would not
 * help).
 */
public final class ReplicaMismatchException extends NonRetryableTrainingException {
  private static final long serialVersionUID = 1L;

  public ReplicaMismatchException(String message) {
    super(message);
  }

  public ReplicaMismatchException(String message, Throwable cause) {
    super(message, cause);
  }
}
