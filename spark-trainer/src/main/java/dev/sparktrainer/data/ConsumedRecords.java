package dev.sparktrainer.data;

import java.io.IOException;
import java.util.BitSet;
import java.util.List;

/**
 * The records of one epoch that earlier layouts consumed, worked out again from the plan: every
 * worker's order of an epoch is a function of the seed, the epoch, its rank and the layout ({@link
 * ShufflePlan} computes it on record indices, without reading a record), so the first {@code b}
 * batches of each worker of each earlier {@link EpochSegment} name exactly which records they held.
 * Per split of the plan, a set of record indices. Memory: one bit per record of the dataset, plus
 * one epoch plan of one worker at a time (two ints per record it owns).
 */
final class ConsumedRecords {
  private final BitSet[] bySplit;

  private ConsumedRecords(int splits) {
    this.bySplit = new BitSet[splits];
    for (int i = 0; i < splits; i++) {
      bySplit[i] = new BitSet();
    }
  }

  /**
   * The records of epoch {@code epoch} consumed by {@code segments}, in order: the first segment's
   * workers read the epoch's shards of its layout, each later one the remainder ({@link
   * WorkerShard#remainder}) left by those before it.
   *
   * @throws IllegalArgumentException naming the segment when a worker's shard of it cannot hold the
   *     batches it says it consumed
   */
  static ConsumedRecords replay(
      DatasetPlan plan, PipelineOptions options, int epoch, List<EpochSegment> segments)
      throws IOException {
    for (Split s : plan.splits()) {
      if (s.records() > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "Split " + s + " has more records than the position of a resumed epoch indexes");
      }
    }
    ConsumedRecords done = new ConsumedRecords(plan.splits().size());
    for (int seg = 0; seg < segments.size(); seg++) {
      EpochSegment segment = segments.get(seg);
      PipelineOptions o = options.toBuilder().optBatchSize(segment.batchSize()).build();
      ConsumedRecords now = new ConsumedRecords(plan.splits().size());
      for (int rank = 0; rank < segment.workers(); rank++) {
        WorkerShard shard =
            seg == 0
                ? plan.shard(rank, segment.workers(), o)
                : WorkerShard.remainder(plan, rank, segment.workers(), o, done);
        if (segment.batches() > shard.stepsPerEpoch()) {
          throw new IllegalArgumentException(
              "Resumed epoch "
                  + epoch
                  + ": segment "
                  + (seg + 1)
                  + " of its position ("
                  + segment
                  + ") consumed more batches than rank "
                  + rank
                  + "'s "
                  + shard.stepsPerEpoch()
                  + " in it; the data or the options changed since the checkpoint");
        }
        if (segment.batches() == 0) {
          continue;
        }
        ShufflePlan order = new ShufflePlan(shard, o, epoch, rank);
        long limit = segment.batches() * segment.batchSize();
        for (int v = 0; v < order.items(); v++) {
          int i = order.split(v);
          int[] positions = order.positions(v);
          BitSet into = now.bySplit[shard.splits().get(i).index()];
          long j = -1;
          for (int k = 0; k < positions.length; k++) {
            j = shard.nextOwned(i, j + 1);
            if (positions[k] >= 0 && positions[k] < limit) {
              into.set((int) j);
            }
          }
        }
      }
      for (int i = 0; i < done.bySplit.length; i++) {
        done.bySplit[i].or(now.bySplit[i]);
      }
    }
    return done;
  }

  /** Records of split number {@code split} (the plan's index) consumed. */
  long count(int split) {
    return bySplit[split].cardinality();
  }

  /** The indices of {@code s}'s records not consumed. */
  BitSet remaining(Split s) {
    BitSet b = new BitSet((int) s.records());
    b.set(0, (int) s.records());
    b.andNot(bySplit[s.index()]);
    return b;
  }

  /** Records consumed in all. */
  long total() {
    long n = 0;
    for (BitSet b : bySplit) {
      n += b.cardinality();
    }
    return n;
  }
}
