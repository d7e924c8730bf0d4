package dev.sparktrainer.train.job;

import org.apache.spark.SparkException;

/**
 * Training failed after Spark's stage retries. Its message leads with the error of the training
 * task that failed last (e.g. {@code rank 0 of 2, allReduce #67 ...: timed out after 20000 ms
 * waiting for data from rank 1 at host:port}), which Spark's own "Job aborted due to stage failure
 * ... barrier task finished unsuccessfully" does not say; Spark's exception is the cause. A {@link
 * SparkException}, so callers that catch Spark's failures still do.
 */
public final class TrainingFailedException extends SparkException {
  private static final long serialVersionUID = 1L;

  public TrainingFailedException(String message, Throwable cause) {
    super(message, cause);
  }

  /** Throws {@code e} (checked, as Spark's own exceptions are thrown through {@code collect()}). */
  @SuppressWarnings("unchecked")
  public static <T extends Throwable> void throwUnchecked(Throwable e) throws T {
    throw (T) e;
  }
}
