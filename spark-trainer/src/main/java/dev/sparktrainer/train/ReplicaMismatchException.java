package dev.sparktrainer.train;

/** Replicas that should be bit-identical are not: the job must not go on. */
final class ReplicaMismatchException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  ReplicaMismatchException(String message) {
    super(message);
  }
}
