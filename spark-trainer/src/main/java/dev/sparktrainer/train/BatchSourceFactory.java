package dev.sparktrainer.train;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.BatchSource;
import java.io.Serializable;

/**
 * Creates one worker's {@link BatchSource} inside its task: the bridge between a dataset
 * description (shipped to the executors, so small and serializable) and the input pipeline.
 *
 * <p>For training data every worker's source must report the same {@link
 * BatchSource#stepsPerEpoch()} (checked at start) and be reproducible for a seed, so that a resumed
 * worker sees the batches it would have seen. Validation sources may differ in length per worker.
 */
@FunctionalInterface
public interface BatchSourceFactory extends Serializable {
  /**
   * The batches of worker {@code rank} of {@code numWorkers}; arrays are created with (children of)
   * {@code manager}, on its device.
   */
  BatchSource create(int rank, int numWorkers, NDManager manager);

  /**
   * As {@link #create(int, int, NDManager)}, with the job's Hadoop configuration (for sources that
   * read files); the trainer calls this one. The default ignores the configuration.
   */
  default BatchSource create(int rank, int numWorkers, NDManager manager,
      org.apache.hadoop.conf.Configuration hadoopConf) {
    return create(rank, numWorkers, manager);
  }

  /**
   * Checks on the driver, before anything starts, that the data resolves (e.g. to at least one
   * split) for {@code numWorkers} workers; throws {@link IllegalArgumentException} with a clear
   * message otherwise. The default accepts.
   */
  default void preflight(int numWorkers) {}
}
