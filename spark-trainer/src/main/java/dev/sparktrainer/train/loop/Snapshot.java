package dev.sparktrainer.train.loop;

import dev.sparktrainer.data.EpochSegment;
import java.util.List;

/**
 * Where training stands, as a checkpoint records it: the position in the data and the schedule, and
 * the epoch's partial sums. The loop's live state (parameters, optimizer slots, history) is added
 * by the {@link SnapshotWriter} when it copies the whole state out.
 *
 * @param epoch the epoch to continue with
 * @param stepInEpoch optimizer steps of that epoch done
 * @param consumedRecords records of the epoch's global order consumed so far
 * @param earlierSegments the epoch's segments run by earlier layouts (worker counts)
 * @param segmentStartStep the step of the epoch at which this layout's segment began
 * @param globalStep optimizer steps done in all
 * @param partial the epoch's sums so far, over every rank (loss, correct, samples, regression)
 */
public record Snapshot(
    int epoch,
    long stepInEpoch,
    long consumedRecords,
    List<EpochSegment> earlierSegments,
    long segmentStartStep,
    long globalStep,
    double[] partial) {

  /** The start of epoch {@code epoch} after {@code globalStep} steps. */
  static Snapshot epochStart(int epoch, long globalStep) {
    return new Snapshot(epoch, 0, 0, List.of(), 0, globalStep, new double[3]);
  }
}
