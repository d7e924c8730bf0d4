package dev.sparktrainer.train;

import java.util.concurrent.locks.LockSupport;

/**
 * The slow rank a test asked for ({@code optInjectSlowRank}): that rank pauses before every step, in
 * every attempt, to play a straggler (a slower GPU, a busy host). Testing only.
 */
final class InjectedSlowdown {
  private InjectedSlowdown() {}

  /** Pauses if {@code rank} is the configured slow rank. */
  static void pause(TrainingConfig cfg, int rank) {
    if (rank != cfg.slowRank || cfg.slowStepMillis <= 0) {
      return;
    }
    long deadline = System.nanoTime() + cfg.slowStepMillis * 1_000_000L;
    for (long left; (left = deadline - System.nanoTime()) > 0; ) {
      LockSupport.parkNanos(left);
      if (Thread.currentThread().isInterrupted()) {
        return; // the task is being killed: let the step see it
      }
    }
  }
}
