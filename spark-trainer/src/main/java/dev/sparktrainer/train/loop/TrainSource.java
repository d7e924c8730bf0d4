package dev.sparktrainer.train.loop;

import dev.sparktrainer.data.Batch;
import dev.sparktrainer.data.BatchSource;
import dev.sparktrainer.train.step.DevicePrefetch;
import java.util.Iterator;

/**
 * The training data's source, opened once the start has chosen the layout; closed with the loop.
 */
final class TrainSource implements AutoCloseable {
  BatchSource source;

  /** The epoch's prefetch-to-device slot (GPU only: on the CPU there is nothing to upload). */
  private DevicePrefetch prefetch;

  /** The epoch's batches, one made ahead on its own thread when {@code toGpu}. */
  Iterator<Batch> ahead(Iterator<Batch> batches, boolean toGpu, int rank) {
    closePrefetch();
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

  @Override
  public void close() {
    try {
      closePrefetch();
    } finally {
      if (source != null) {
        source.close();
      }
    }
  }
}
