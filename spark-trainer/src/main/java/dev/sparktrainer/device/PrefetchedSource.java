package dev.sparktrainer.device;

import java.util.Iterator;
import java.util.function.Supplier;

/**
 * The training data's source with its prefetch-to-device slot, epoch after epoch: the source is
 * opened once the start has chosen the layout ({@link #open}), and closed with the loop.
 */
public final class PrefetchedSource implements AutoCloseable {
  private BatchSource source;

  /** The epoch's prefetch-to-device slot (GPU only: on the CPU there is nothing to upload). */
  private DevicePrefetch prefetch;

  /** Takes {@code s} as the source, closed by {@link #close}; returns it. */
  public BatchSource open(BatchSource s) {
    this.source = s;
    return s;
  }

  /**
   * The epoch's batches, one made ahead on its own thread when {@code toGpu}. The last epoch's
   * prefetch is closed before {@code open} starts this epoch's stream: starting it closes the last
   * one's, which the prefetch thread may still be reading.
   */
  public Iterator<Batch> ahead(Supplier<Iterator<Batch>> open, boolean toGpu, int rank) {
    closePrefetch();
    Iterator<Batch> batches = open.get();
    if (!toGpu) {
      return batches;
    }
    prefetch = new DevicePrefetch(batches, "device-prefetch-rank" + rank);
    return prefetch;
  }

  private void closePrefetch() {
    if (prefetch != null) {
      prefetch.close();
      prefetch = null;
    }
  }

  /**
   * Closes the prefetch, then the source. When the prefetch thread cannot be stopped (it is still
   * in the source after {@link DevicePrefetch}'s timeout) the source is left open, not closed under
   * it, and the prefetch's error is thrown.
   */
  @Override
  public void close() {
    closePrefetch();
    if (source != null) {
      source.close();
    }
  }
}
