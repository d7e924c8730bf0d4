package dev.sparktrainer.train.loop;

import dev.sparktrainer.train.step.TrainStep;
import java.io.InterruptedIOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongConsumer;

/**
 * The faults a test injects into a training job: testing only, never set by the public API, the CLI
 * or any configuration (no system property, no environment variable). A job carries {@link #NONE}
 * unless a test in this package sets one with {@code Builder.optFaultInjection}, or installs one
 * with {@link #installForTests} for the trainers its driver builds (a cluster test's driver main:
 * the value is then shipped to the executors inside the job's configuration). A rank or step of -1
 * means "never".
 *
 * @param failRank this rank throws {@link InjectedFailure} after global step {@code failAfterStep},
 *     in the first attempt only
 * @param divergeRank this rank perturbs its parameters before each epoch-end replica check
 * @param slowRank this rank pauses {@code slowStepMillis} before every step, in every attempt (a
 *     straggler)
 * @param ringDelayRank this rank waits {@code ringDelayMillis} after the rendezvous, in the first
 *     stage attempt, before it joins the ring (its neighbour's listener stays open meanwhile)
 * @param ringDelayWorkers the ring delay applies to jobs of this many workers only; 0 for any
 * @param checkpointDelayStep the writer of this step's checkpoint waits {@code
 *     checkpointDelayMillis} between writing its temporary file and renaming it (a process can be
 *     killed mid-write)
 */
public record FaultInjection(
    int failRank,
    long failAfterStep,
    int divergeRank,
    int slowRank,
    long slowStepMillis,
    int ringDelayRank,
    long ringDelayMillis,
    int ringDelayWorkers,
    long checkpointDelayStep,
    long checkpointDelayMillis)
    implements Serializable, LoopHook {
  private static final long serialVersionUID = 1L;
  private static final System.Logger LOG = System.getLogger(FaultInjection.class.getName());

  /** No fault: what every production job carries. */
  public static final FaultInjection NONE = new FaultInjection(-1, -1, -1, -1, 0, -1, 0, 0, -1, 0);

  /** What a new {@code Builder} starts from: {@link #NONE} unless a test installed another. */
  private static volatile FaultInjection installed = NONE;

  /**
   * Testing only: the faults every {@code DistributedTrainer.builder()} in this JVM starts from (a
   * test's driver main sets it before it runs the CLI). Nothing in production calls it.
   */
  public static void installForTests(FaultInjection faults) {
    installed = Objects.requireNonNull(faults, "faults");
  }

  /** The faults a new builder starts from ({@link #NONE} outside tests). */
  public static FaultInjection installed() {
    return installed;
  }

  public FaultInjection withFailure(int rank, long step) {
    return new FaultInjection(
        rank,
        step,
        divergeRank,
        slowRank,
        slowStepMillis,
        ringDelayRank,
        ringDelayMillis,
        ringDelayWorkers,
        checkpointDelayStep,
        checkpointDelayMillis);
  }

  public FaultInjection withDivergence(int rank) {
    return new FaultInjection(
        failRank,
        failAfterStep,
        rank,
        slowRank,
        slowStepMillis,
        ringDelayRank,
        ringDelayMillis,
        ringDelayWorkers,
        checkpointDelayStep,
        checkpointDelayMillis);
  }

  public FaultInjection withSlowRank(int rank, long millis) {
    return new FaultInjection(
        failRank,
        failAfterStep,
        divergeRank,
        rank,
        millis,
        ringDelayRank,
        ringDelayMillis,
        ringDelayWorkers,
        checkpointDelayStep,
        checkpointDelayMillis);
  }

  public FaultInjection withRingConnectDelay(int rank, long millis) {
    return withRingConnectDelay(rank, millis, 0);
  }

  /**
   * A ring-connect delay of {@code rank} in jobs of {@code workers} workers only (0: any), e.g. the
   * relaunch on fewer workers of an elastic run.
   */
  public FaultInjection withRingConnectDelay(int rank, long millis, int workers) {
    return new FaultInjection(
        failRank,
        failAfterStep,
        divergeRank,
        slowRank,
        slowStepMillis,
        rank,
        millis,
        workers,
        checkpointDelayStep,
        checkpointDelayMillis);
  }

  public FaultInjection withCheckpointRenameDelay(long step, long millis) {
    return new FaultInjection(
        failRank,
        failAfterStep,
        divergeRank,
        slowRank,
        slowStepMillis,
        ringDelayRank,
        ringDelayMillis,
        ringDelayWorkers,
        step,
        millis);
  }

  /**
   * Throws {@link InjectedFailure} if {@code rank} is to fail after {@code globalStep} in this
   * attempt.
   */
  void failAfterStep(int rank, long globalStep, int attempt) {
    if (rank == failRank && globalStep == failAfterStep && attempt == 0) {
      throw new InjectedFailure(
          "rank "
              + rank
              + ": injected failure after global step "
              + globalStep
              + " (attempt "
              + attempt
              + ")");
    }
  }

  /** Whether {@code rank} is to perturb its parameters before the epoch-end replica check. */
  boolean diverges(int rank) {
    return rank == divergeRank;
  }

  @Override
  public void beforeStep(int rank, long globalStep) {
    pauseBeforeStep(rank);
  }

  @Override
  public void afterStep(int rank, long globalStep, int attempt) {
    failAfterStep(rank, globalStep, attempt);
  }

  /** The divergence: the diverging rank moves one parameter value by one ulp. */
  @Override
  public void beforeEpochEnd(int rank, EpochEndStep step, EpochEnd end) {
    if (step == EpochEndStep.REPLICA_CHECK && diverges(rank)) {
      TrainStep train = end.step();
      float[][] values = train.parameterValues();
      values[0][0] = Math.nextUp(values[0][0]);
      train.restore(values, train.optimizerSlots(), train.optimizerSteps());
    }
  }

  /** Pauses if {@code rank} is the slow rank; returns early (interrupt flag set) if interrupted. */
  void pauseBeforeStep(int rank) {
    if (rank != slowRank || slowStepMillis <= 0) {
      return;
    }
    long deadline = System.nanoTime() + slowStepMillis * 1_000_000L;
    for (long left; (left = deadline - System.nanoTime()) > 0; ) {
      LockSupport.parkNanos(left);
      if (Thread.currentThread().isInterrupted()) {
        return; // the task is being killed: let the step see it
      }
    }
  }

  /**
   * Waits before joining the ring if {@code rank} is the delayed rank and this is the first
   * attempt.
   */
  public void pauseBeforeRing(int rank, int stageAttempt, int workers) {
    if (rank != ringDelayRank
        || ringDelayMillis <= 0
        || stageAttempt != 0
        || (ringDelayWorkers > 0 && workers != ringDelayWorkers)) {
      return;
    }
    LOG.log(
        System.Logger.Level.WARNING,
        "Injected fault (testing only): rank "
            + rank
            + " waits "
            + ringDelayMillis
            + " ms before joining the ring");
    try {
      Thread.sleep(ringDelayMillis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("rank " + rank + ": interrupted before joining the ring", e);
    }
  }

  /**
   * The hook a {@code CheckpointStore} runs before each rename, given the step: a pause at {@code
   * checkpointDelayStep}, nothing otherwise. An interrupted pause throws an {@link
   * UncheckedIOException} around an {@link InterruptedIOException}.
   */
  public LongConsumer beforeCheckpointRename() {
    long step = checkpointDelayStep;
    long millis = checkpointDelayMillis;
    return s -> {
      if (s != step || millis <= 0) {
        return;
      }
      LOG.log(
          System.Logger.Level.WARNING,
          "Injected fault (testing only): pausing "
              + millis
              + " ms before renaming the checkpoint of step "
              + s);
      try {
        Thread.sleep(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new UncheckedIOException(
            new InterruptedIOException("Interrupted while writing the checkpoint of step " + s));
      }
    };
  }
}
