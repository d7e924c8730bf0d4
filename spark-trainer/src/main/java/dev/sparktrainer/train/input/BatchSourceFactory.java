package dev.sparktrainer.train.input;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.device.BatchSource;
import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;

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
  default BatchSource create(
      int rank, int numWorkers, NDManager manager, Configuration hadoopConf) {
    return create(rank, numWorkers, manager);
  }

  /**
   * Checks on the driver, before anything starts, that the data resolves (e.g. to at least one
   * split) for {@code numWorkers} workers; throws {@link IllegalArgumentException} with a clear
   * message otherwise. The default accepts.
   */
  default void preflight(int numWorkers) {}

  /**
   * The per-worker batch size, for a resume on another number of workers to keep the global batch;
   * 0 (the default): unknown, and such a resume is refused.
   */
  default int batchSize() {
    return 0;
  }

  /**
   * Whether every epoch is one global order of records dealt to the workers in global batches, so
   * that a position (records consumed) survives a change of worker count or batch size: the sources
   * then implement {@code BatchSource.epochAfter}. False (the default): a resume on another layout
   * restarts the interrupted epoch.
   */
  default boolean globalOrder() {
    return false;
  }

  /**
   * Whether each worker's order of an epoch can be worked out again for any layout, so that a
   * resume on another layout continues the interrupted epoch with the records not yet consumed: the
   * sources then implement {@code BatchSource.epochAfter(int, List, long)}. False (the default, and
   * for sources with a {@link #globalOrder()}, which continue by position): restart it.
   */
  default boolean replaysEpochs() {
    return false;
  }

  /**
   * For {@link #replaysEpochs()}: what a worker's order of an epoch depends on besides the layout
   * (the data's plan and the order's options), recorded in checkpoints; a resume whose key differs
   * restarts the interrupted epoch rather than replay an order the data no longer gives.
   */
  default String orderKey() {
    return "";
  }

  /**
   * The same data with per-worker batch {@code batchSize} (a resume on another number of workers).
   */
  default BatchSourceFactory withBatchSize(int batchSize) {
    throw new UnsupportedOperationException(getClass().getName() + " cannot change its batch size");
  }
}
