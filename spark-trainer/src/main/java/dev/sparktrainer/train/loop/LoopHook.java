package dev.sparktrainer.train.loop;

/**
 * What may watch (or, in tests, disturb) a {@link TrainingLoop} at fixed points, without a line of
 * the loop knowing what: before and after each optimizer step, and before each epoch-end step.
 * {@link FaultInjection} is one (the injected straggler, failure and divergence); a test records
 * the epoch-end order with another. A hook runs on the loop's thread, on every rank.
 */
public interface LoopHook {
  /** Before optimizer step {@code globalStep} (0-based) begins. */
  default void beforeStep(int rank, long globalStep) {}

  /** After optimizer step {@code globalStep} (1-based: the steps done) ends. */
  default void afterStep(int rank, long globalStep, int attempt) {}

  /** Before the epoch-end step {@code step} of {@code end.epoch()}. */
  default void beforeEpochEnd(int rank, EpochEndStep step, EpochEnd end) {}
}
