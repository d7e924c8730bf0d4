package dev.sparktrainer.device;

import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.data.PipelineStats;
import java.util.Iterator;
import java.util.List;

/**
 * The batches of one worker, on its device: the contract between where batches come from (the input
 * pipeline's host batches uploaded, {@link PipelineSource}; data held in memory) and the trainer.
 *
 * <p>Every worker of a job gets the same {@link #stepsPerEpoch()}, so synchronous training never
 * waits on a worker that ran out of data. For a fixed seed, the sequence of batches of an epoch is
 * reproducible, so a worker resuming from a checkpoint at step k of epoch e calls {@code epoch(e,
 * k)} and sees exactly the batches it would have seen.
 */
public interface BatchSource extends AutoCloseable {
  /** Steps (batches) per epoch, equal on every worker. */
  long stepsPerEpoch();

  /**
   * The batches of {@code epoch} for this worker, starting after {@code skipSteps} batches. The
   * iterator yields exactly {@code stepsPerEpoch() - skipSteps} batches; the caller closes each.
   * Reader failures surface from {@code hasNext()/next()} as exceptions naming the file.
   */
  Iterator<Batch> epoch(int epoch, long skipSteps);

  /**
   * For sources whose every epoch is one global order of records dealt to the workers in global
   * batches (the factory's {@code globalOrder()}), so that the records consumed by an epoch's first
   * steps are a prefix of that order whatever the number of workers and the batch size: this
   * worker's batches of {@code epoch} after the first {@code consumedRecords} records of the
   * epoch's order, the rest dealt as global batches of this layout; every worker gets the same
   * number, {@link #stepsAfter}.
   */
  default Iterator<Batch> epochAfter(int epoch, long consumedRecords) {
    throw new UnsupportedOperationException("this batch source has no global order");
  }

  /** The number of batches {@link #epochAfter} yields (the same on every worker). */
  default long stepsAfter(long consumedRecords) {
    throw new UnsupportedOperationException("this batch source has no global order");
  }

  /**
   * For sources whose order of an epoch can be worked out again for any layout (the factory's
   * {@code replaysEpochs()}): this worker's batches of {@code epoch} after {@code earlier} layouts
   * consumed parts of it ({@link EpochSegment}s, oldest first), starting after {@code skipSteps} of
   * them. The records they consumed are worked out again and the rest are dealt to this layout's
   * workers with the sharding policy; each gets {@link #stepsAfter(int, List)} batches. With no
   * earlier segment, this is {@link #epoch}.
   */
  default Iterator<Batch> epochAfter(int epoch, List<EpochSegment> earlier, long skipSteps) {
    if (earlier.isEmpty()) {
      return epoch(epoch, skipSteps);
    }
    throw new UnsupportedOperationException("this batch source cannot replay an epoch");
  }

  /** The number of batches {@link #epochAfter(int, List, long)} yields from its start. */
  default long stepsAfter(int epoch, List<EpochSegment> earlier) {
    if (earlier.isEmpty()) {
      return stepsPerEpoch();
    }
    throw new UnsupportedOperationException("this batch source cannot replay an epoch");
  }

  /**
   * A hint: the next {@link #epoch} call will be {@code epoch(epoch, 0)}, so the source may start
   * reading it once the current epoch is read (tf.data's prefetch across the epoch boundary). A
   * source may ignore it; a different next call is still correct.
   */
  default void prepare(int epoch) {}

  /**
   * Image columns of the examples (encoded images the source decodes): images per example, for
   * images/s. 0 for none.
   */
  default int imageColumns() {
    return 0;
  }

  /**
   * The input pipeline's measurements of the current (or last) epoch (images/s, decode time per
   * image); null for a source without one (data in memory) or before its first epoch.
   */
  default PipelineStats stats() {
    return null;
  }

  /** Stops reader threads and releases buffers. */
  @Override
  void close();
}
