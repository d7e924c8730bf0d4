package dev.sparktrainer.data;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * One epoch's output order, worked out on record indices from the plan's record counts before any
 * record is read: the deterministic interleave and the shuffle buffer of the producer path ({@link
 * EpochStream}), with the same random draws, run over (item, record) numbers instead of records.
 * The result is the position in the epoch's output of every record each item holds — the same order
 * the producer path yields, so the two paths give the same batches for the same seed.
 *
 * <p>An item is a position in the epoch's split order, repeated once per pass over the shard (PAD):
 * item {@code v} is split {@code order[v % order.length]} in pass {@code v / order.length}. Memory:
 * two ints per record of the epoch (indices, not records) and the shuffle buffer's size in ints.
 */
final class ShufflePlan {
  /** The split positions (in the shard's list) in the epoch's order. */
  final int[] order;

  /** Per item: each owned record's position in the epoch's output, or -1 when it is not output. */
  private final List<int[]> positions = new ArrayList<>();

  /**
   * Per item: each owned record's position in the interleaved stream (what the readers are paced
   * by).
   */
  private final List<int[]> interleaved = new ArrayList<>();

  /** Per batch: the last interleaved record any batch up to it needs (a running maximum). */
  private final int[] need;

  private final int batches;
  private final int lastBatchSize;

  ShufflePlan(WorkerShard shard, PipelineOptions o, int epoch, int rank) throws IOException {
    this.order = shard.epochOrder(epoch, o);
    long[] counts = new long[order.length];
    for (int j = 0; j < order.length; j++) {
      counts[j] = shard.ownedRecords(order[j]);
    }
    int b = o.batchSize();
    long target = shard.stepsPerEpoch();
    Random rnd = new Random(Seeds.mix(o.seed(), epoch, rank, 2));
    int cap = Math.max(1, o.shuffleBuffer());
    int[] bufV = new int[cap];
    int[] bufK = new int[cap];
    int[] bufI = new int[cap];
    int held = 0;
    int[] rowV = new int[b];
    int[] rowK = new int[b];
    int n = 0;
    int rowNeed = -1;
    int out = 0;
    int[] needs = new int[16];
    int emitted = 0;
    Interleave in = new Interleave(counts, o.cycleLength(), o.blockLength());
    boolean sourceDone = false;
    long fromThisPass = 0;
    int lastSize = b;
    while (emitted < target) {
      int v = -1;
      int k = 0;
      int i = 0;
      if (!sourceDone) {
        if (!in.next()) {
          sourceDone = true;
        } else {
          fromThisPass++;
          if (o.shuffleBuffer() <= 1) {
            v = in.v;
            k = in.k;
            i = in.index;
          } else if (held < cap) {
            bufV[held] = in.v;
            bufK[held] = in.k;
            bufI[held++] = in.index;
            continue;
          } else {
            int x = rnd.nextInt(held);
            v = bufV[x];
            k = bufK[x];
            i = bufI[x];
            bufV[x] = in.v;
            bufK[x] = in.k;
            bufI[x] = in.index;
          }
        }
      }
      if (v < 0 && sourceDone) {
        if (held > 0) {
          int x = rnd.nextInt(held);
          v = bufV[x];
          k = bufK[x];
          i = bufI[x];
          held--;
          bufV[x] = bufV[held];
          bufK[x] = bufK[held];
          bufI[x] = bufI[held];
        } else {
          if (n > 0 && !o.dropRemainder() && emitted == target - 1) {
            needs = add(needs, emitted++, rowNeed);
            lastSize = n;
            n = 0;
            break;
          }
          if (o.uneven() == PipelineOptions.UnevenPolicy.NONE) {
            break;
          }
          if (fromThisPass == 0) {
            throw new IOException(
                "Worker " + rank + " owns no records to fill its " + target + " steps");
          }
          in.restart();
          sourceDone = false;
          fromThisPass = 0;
          continue;
        }
      }
      if (v < 0) {
        continue;
      }
      positions.get(v)[k] = out++;
      rowV[n] = v;
      rowK[n] = k;
      rowNeed = Math.max(rowNeed, i);
      if (++n == b) {
        needs = add(needs, emitted++, rowNeed);
        n = 0;
        rowNeed = -1;
      }
    }
    for (int r = 0; r < n; r++) {
      positions.get(rowV[r])[rowK[r]] = -1; // a partial batch the producer path drops
    }
    this.batches = emitted;
    this.lastBatchSize = lastSize;
    this.need = Arrays.copyOf(needs, emitted);
    for (int j = 1; j < need.length; j++) {
      need[j] = Math.max(need[j], need[j - 1]);
    }
  }

  private static int[] add(int[] a, int at, int value) {
    if (at == a.length) {
      a = Arrays.copyOf(a, 2 * a.length);
    }
    a[at] = value;
    return a;
  }

  /** The items the output needs, in the order their readers open them. */
  int items() {
    return positions.size();
  }

  /** The split position (in the shard's list) of item {@code v}. */
  int split(int v) {
    return order[v % order.length];
  }

  /** Output positions of item {@code v}'s records (-1: not output). */
  int[] positions(int v) {
    return positions.get(v);
  }

  /** Interleaved-stream positions of item {@code v}'s records. */
  int[] interleaved(int v) {
    return interleaved.get(v);
  }

  /** Batches of the epoch (the last one possibly partial). */
  int batches() {
    return batches;
  }

  /** Rows of batch {@code j}. */
  int rows(int j, int batchSize) {
    return j == batches - 1 ? lastBatchSize : batchSize;
  }

  /** The last interleaved record needed to complete every batch up to {@code j}. */
  int need(int j) {
    return need[j];
  }

  /** tf.data's deterministic interleave ({@link Interleaver}) over record numbers. */
  private final class Interleave {
    private final long[] counts;
    private final int blockLength;
    private final int[] slots;
    private final int[] taken;
    private int pass;
    private int nextItem;
    private int cur;
    private int takenInBlock;
    private int next; // the interleaved position of the next record
    int v;
    int k;
    int index;

    Interleave(long[] counts, int cycleLength, int blockLength) {
      this.counts = counts;
      this.blockLength = blockLength;
      this.slots = new int[Math.min(cycleLength, Math.max(1, counts.length))];
      this.taken = new int[slots.length];
      start();
    }

    private void start() {
      nextItem = 0;
      cur = 0;
      takenInBlock = 0;
      Arrays.fill(slots, -1);
      for (int s = 0; s < slots.length && nextItem < counts.length; s++) {
        open(s);
      }
    }

    private void open(int s) {
      int item = pass * counts.length + nextItem++;
      long c = counts[item % counts.length];
      if (c > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "Split " + item + " has " + c + " records: more than an epoch plan indexes");
      }
      int[] p = new int[(int) c];
      Arrays.fill(p, -1);
      positions.add(p);
      interleaved.add(new int[(int) c]);
      slots[s] = item;
      taken[s] = 0;
    }

    void restart() {
      pass++;
      start();
    }

    boolean next() {
      while (true) {
        boolean any = false;
        for (int s : slots) {
          any |= s >= 0;
        }
        if (!any) {
          return false;
        }
        int s = slots[cur];
        if (s < 0) {
          advance();
          continue;
        }
        if (taken[cur] == positions.get(s).length) {
          if (nextItem < counts.length) {
            open(cur);
          } else {
            slots[cur] = -1;
          }
          advance();
          continue;
        }
        if (next == Integer.MAX_VALUE) {
          throw new IllegalArgumentException(
              "An epoch of more than "
                  + Integer.MAX_VALUE
                  + " records on one worker is more than an epoch plan indexes");
        }
        v = s;
        k = taken[cur]++;
        index = next++;
        interleaved.get(v)[k] = index;
        if (++takenInBlock >= blockLength) {
          advance();
        }
        return true;
      }
    }

    private void advance() {
      cur = (cur + 1) % slots.length;
      takenInBlock = 0;
    }
  }
}
