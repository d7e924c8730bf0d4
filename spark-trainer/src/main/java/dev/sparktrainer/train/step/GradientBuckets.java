package dev.sparktrainer.train.step;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Where gradients wait for their all-reduce: one direct buffer (the arena) holding every trainable
 * parameter's gradient in the order backward produces them (last segment first), cut into buckets
 * as DDP cuts them: a bucket closes with the parameter that brings it to {@code bucketBytes} or
 * more (the first at {@link #FIRST_BUCKET_BYTES}, so communication starts early), so a bucket holds
 * at most its limit plus one parameter; then one bucket of the non-trainable values (batch-norm
 * statistics) that every replica averages. A parameter is never split. The layout depends only on
 * the model and the sizes, so every rank cuts the same buckets. Gradients are copied from the
 * engine straight into the arena, reduced there in place, and read from there by the optimizer.
 */
final class GradientBuckets {
  static final int FIRST_BUCKET_BYTES = 1 << 20;

  final ByteBuffer arena;
  final FloatBuffer floats;

  /** Float offset of each trainable parameter's gradient (index j into ReplicaSet.trainable). */
  final int[] offset;

  /** Float offset of each statistic (index j into ReplicaSet.stats). */
  final int[] statOffset;

  /** Each bucket's first float and float count; the last one holds the statistics (maybe empty). */
  final int[] start;

  final int[] count;

  /** Trainable indices j of each gradient bucket, in arena order. */
  final int[][] members;

  /** The bucket of each trainable j. */
  final int[] bucketOf;

  /**
   * @param readyOrder trainable indices j in the order their gradients become final
   * @param sizes element count of each trainable j
   * @param statSizes element count of each statistic
   */
  GradientBuckets(int[] readyOrder, int[] sizes, int[] statSizes, int bucketBytes) {
    int capFirst = Math.min(FIRST_BUCKET_BYTES, bucketBytes) / 4;
    int cap = bucketBytes / 4;
    offset = new int[sizes.length];
    bucketOf = new int[sizes.length];
    List<int[]> ranges = new ArrayList<>();
    List<List<Integer>> groups = new ArrayList<>();
    long at = 0;
    int bucketStart = 0;
    List<Integer> group = new ArrayList<>();
    for (int j : readyOrder) {
      offset[j] = (int) at;
      bucketOf[j] = ranges.size();
      group.add(j);
      at += sizes[j];
      if (at > Integer.MAX_VALUE / 4) {
        throw new IllegalArgumentException(
            "The model's gradients (" + at + " floats and more) exceed one 2 GiB buffer");
      }
      // Closed once it holds its limit, with the parameter that reached it (DDP's rule): a large
      // parameter ends the bucket it joins instead of opening one that waits for every earlier
      // layer (the CNN's 1.6 MB dense layer would otherwise wait for the convolutions' backward).
      if (at - bucketStart >= (ranges.isEmpty() ? capFirst : cap)) {
        ranges.add(new int[] {bucketStart, (int) (at - bucketStart)});
        groups.add(group);
        group = new ArrayList<>();
        bucketStart = (int) at;
      }
    }
    if (!group.isEmpty()) {
      ranges.add(new int[] {bucketStart, (int) (at - bucketStart)});
      groups.add(group);
    }
    statOffset = new int[statSizes.length];
    int statsStart = (int) at;
    for (int j = 0; j < statSizes.length; j++) {
      statOffset[j] = (int) at;
      at += statSizes[j];
    }
    ranges.add(new int[] {statsStart, (int) (at - statsStart)});
    start = new int[ranges.size()];
    count = new int[ranges.size()];
    members = new int[groups.size()][];
    for (int b = 0; b < ranges.size(); b++) {
      start[b] = ranges.get(b)[0];
      count[b] = ranges.get(b)[1];
    }
    for (int b = 0; b < groups.size(); b++) {
      members[b] = groups.get(b).stream().mapToInt(Integer::intValue).toArray();
    }
    arena = ByteBuffer.allocateDirect((int) Math.max(4, at * 4)).order(ByteOrder.LITTLE_ENDIAN);
    floats = arena.asFloatBuffer();
    int statCount = count[count.length - 1];
    statsWide =
        ByteBuffer.allocateDirect(Math.max(8, statCount * 8))
            .order(ByteOrder.LITTLE_ENDIAN)
            .limit(statCount * 8);
  }

  /**
   * The statistics as float64 for their all-reduce: they travel at full precision whatever the
   * gradients' wire precision (a BF16-rounded running variance would drift from step to step).
   */
  final ByteBuffer statsWide;

  /** Copies the statistics bucket into {@link #statsWide}. */
  void widenStats() {
    int from = start[start.length - 1];
    for (int x = 0, n = count[count.length - 1]; x < n; x++) {
      statsWide.putDouble(x * 8, floats.get(from + x));
    }
  }

  /** Copies the reduced {@link #statsWide} back into the statistics bucket. */
  void narrowStats() {
    int from = start[start.length - 1];
    for (int x = 0, n = count[count.length - 1]; x < n; x++) {
      floats.put(from + x, (float) statsWide.getDouble(x * 8));
    }
  }

  /** Gradient buckets (the statistics bucket is {@link #statsBucket()}, after them). */
  int gradientBuckets() {
    return members.length;
  }

  /** Index of the statistics bucket (the last). */
  int statsBucket() {
    return start.length - 1;
  }

  /** Number of buckets, the statistics one included. */
  int buckets() {
    return start.length;
  }
}
