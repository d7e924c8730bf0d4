package dev.sparktrainer.data;

import java.io.Serializable;

/**
 * A part of an epoch consumed by one layout before the job resumed on another: {@code workers}
 * workers each took their first {@code batches} batches of {@code batchSize} records (micro-batches
 * when gradients were accumulated) of the epoch's order for that layout. The position of an
 * interrupted epoch is the list of its segments, oldest first; see {@link
 * BatchSource#epochAfter(int, java.util.List, long)}.
 */
public record EpochSegment(int workers, int batchSize, long batches) implements Serializable {
  public EpochSegment {
    if (workers < 1 || batchSize < 1 || batches < 0) {
      throw new IllegalArgumentException(
          "Invalid epoch segment: "
              + workers
              + " workers x batch "
              + batchSize
              + " x "
              + batches
              + " batches");
    }
  }

  /** Records the segment consumed (padding included). */
  public long records() {
    return (long) workers * batchSize * batches;
  }

  @Override
  public String toString() {
    return workers + " workers x " + batches + " batches of " + batchSize;
  }
}
