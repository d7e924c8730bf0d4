package dev.sparktrainer.train.loop;

import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.BatchSource;
import java.util.Iterator;
import java.util.List;

/**
 * Where one epoch starts and ends on this layout: from its beginning, or — the epoch a run resumes
 * — from where the checkpoint left it, by steps on the same layout or by the records of the global
 * order not yet consumed on another one.
 *
 * @param epoch the epoch (0-based)
 * @param startStep the first optimizer step to run
 * @param endStep the epoch's optimizer steps on this layout (its step count)
 * @param consumedRecords records of the epoch's global order consumed before {@code startStep}
 * @param byRecords continue with the records not yet consumed (a resume on another layout)
 * @param earlier the segments earlier layouts of this epoch ran (a source that replays epochs)
 * @param segmentStart the step at which this layout's segment of the epoch began
 * @param resumed whether this is the epoch the run resumed in (rank 0 carries its partial sums)
 */
record EpochPlan(
    int epoch,
    long startStep,
    long endStep,
    long consumedRecords,
    boolean byRecords,
    List<EpochSegment> earlier,
    long segmentStart,
    boolean resumed) {
  private static final System.Logger LOG = System.getLogger(TrainingLoop.class.getName());

  /**
   * Epoch {@code epoch} of a run that started in {@code state}, over {@code source} with {@code
   * steps} optimizer steps in a whole epoch.
   */
  static EpochPlan of(TrainingState state, int epoch, BatchSource source, long steps) {
    int accumulate = state.accumulateSteps;
    boolean resumed = epoch == state.epoch;
    long startStep = resumed ? state.stepInEpoch : 0;
    long consumed = resumed ? state.consumedRecords : 0;
    boolean byRecords = resumed && state.continueByRecords;
    List<EpochSegment> earlier = resumed ? state.earlierSegments : List.<EpochSegment>of();
    long segmentStart = earlier.isEmpty() ? 0 : state.segmentStartStep;
    long endStep =
        byRecords
            ? startStep + source.stepsAfter(consumed) / accumulate
            : earlier.isEmpty()
                ? steps
                : segmentStart + source.stepsAfter(epoch, earlier) / accumulate;
    return new EpochPlan(
        epoch, startStep, endStep, consumed, byRecords, earlier, segmentStart, resumed);
  }

  /** The epoch's batches from {@link #startStep} on, {@code accumulate} per optimizer step. */
  Iterator<Batch> batches(BatchSource source, int accumulate) {
    return byRecords
        ? source.epochAfter(epoch, consumedRecords)
        : source.epochAfter(epoch, earlier, (startStep - segmentStart) * accumulate);
  }

  /** The checkpoint position after optimizer step {@code stepInEpoch} of this epoch. */
  Snapshot snapshot(long stepInEpoch, long consumed, long globalStep, double[] partial) {
    return new Snapshot(epoch, stepInEpoch, consumed, earlier, segmentStart, globalStep, partial);
  }

  /**
   * A whole epoch's optimizer steps on this layout: the source's batches per epoch, checked equal
   * on every rank, over {@code accumulate} micro-batches per step.
   */
  static long optimizerSteps(Communicator comm, BatchSource source, int accumulate) {
    return optimizerSteps(checkedStepsPerEpoch(comm, source), accumulate, comm.rank());
  }

  /**
   * Optimizer steps per epoch: {@code batches / accumulate}; the batches left over (fewer than one
   * accumulated step) are not trained on, and rank 0 says so.
   */
  private static long optimizerSteps(long batches, int accumulate, int rank) {
    long steps = batches / accumulate;
    if (steps <= 0) {
      throw new NonRetryableTrainingException(
          "Invalid accumulateSteps "
              + accumulate
              + ": an epoch has only "
              + batches
              + " batch(es) per worker, fewer than one accumulated step");
    }
    if (rank == 0 && accumulate > 1) {
      LOG.log(
          System.Logger.Level.INFO,
          "rank 0: gradient accumulation over "
              + accumulate
              + " micro-batches: "
              + steps
              + " optimizer steps per epoch"
              + (batches % accumulate == 0
                  ? ""
                  : "; the last "
                      + batches % accumulate
                      + " batch(es) of each epoch's "
                      + batches
                      + " are not trained on (fewer than one step)"));
    }
    return steps;
  }

  private static long checkedStepsPerEpoch(Communicator comm, BatchSource source) {
    long steps = source.stepsPerEpoch();
    long[] minMax = {-steps, steps};
    comm.allReduce(minMax, ReduceOp.MAX);
    if (-minMax[0] != minMax[1]) {
      throw new NonRetryableTrainingException(
          "Invalid training data: workers have different stepsPerEpoch (from "
              + (-minMax[0])
              + " to "
              + minMax[1]
              + "); synchronous training needs the same number on every worker");
    }
    if (steps <= 0) {
      throw new NonRetryableTrainingException(
          "Invalid training data: 0 steps per epoch (fewer rows than one global batch?)");
    }
    return steps;
  }
}
