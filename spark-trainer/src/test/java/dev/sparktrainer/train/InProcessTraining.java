package dev.sparktrainer.train;

import dev.sparktrainer.train.loop.InjectedFailure;
import org.apache.hadoop.conf.Configuration;

/**
 * Test fixture for tests outside this package (the integration tests, through this module's test
 * jar): the trainer's package-private in-process runner and fault hooks, which stay off the public
 * API.
 */
public final class InProcessTraining {
  private InProcessTraining() {}

  /**
   * {@code DistributedTrainer.fitInProcess}: the workers as threads of this JVM, without Spark;
   * {@code attempt} plays Spark's stage attempt number (an injected failure fires in attempt 0
   * only).
   */
  public static TrainedModel fit(DistributedTrainer trainer, int attempt, Configuration conf)
      throws Exception {
    return trainer.fitInProcess(attempt, conf);
  }

  /**
   * {@code Builder.optInjectFailure}: {@code rank} fails after global step {@code step}, in attempt
   * 0.
   */
  public static DistributedTrainerBuilder injectFailure(
      DistributedTrainerBuilder builder, int rank, long step) {
    return builder.optInjectFailure(rank, step);
  }

  /** {@code Builder.optInjectSlowRank}: {@code rank} pauses {@code millis} before every step. */
  public static DistributedTrainerBuilder injectSlowRank(
      DistributedTrainerBuilder builder, int rank, long millis) {
    return builder.optInjectSlowRank(rank, millis);
  }

  /** Whether {@code t} is the failure {@link #injectFailure} asked for. */
  public static boolean isInjectedFailure(Throwable t) {
    return t instanceof InjectedFailure;
  }
}
