package dev.sparktrainer.train.input;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.Split;
import dev.sparktrainer.device.BatchSource;
import dev.sparktrainer.device.PipelineSource;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.zip.CRC32C;
import org.apache.hadoop.conf.Configuration;

/**
 * The input pipeline as the trainer's data: a {@link DatasetPlan} made on the driver, and each
 * worker's pipeline built inside its task from it, its host batches uploaded to the worker's device
 * ({@link PipelineSource}).
 */
public final class DatasetSource implements BatchSourceFactory {
  private static final long serialVersionUID = 1L;

  private final DatasetPlan plan;
  private final PipelineOptions options;
  private final Normalization normalization;

  private DatasetSource(DatasetPlan plan, PipelineOptions options, Normalization normalization) {
    this.plan = plan;
    this.options = options;
    this.normalization = normalization;
  }

  /**
   * This data with every batch normalized by {@code n} (fitted on the training data); null: none.
   */
  public DatasetSource withNormalization(Normalization n) {
    return new DatasetSource(plan, options, n);
  }

  /** Training data: equal steps on every worker, reshuffled every epoch. */
  public static DatasetSource training(DatasetPlan plan, PipelineOptions options) {
    if (options.uneven() == PipelineOptions.UnevenPolicy.NONE) {
      throw new IllegalArgumentException(
          "Invalid uneven policy NONE for training data: synchronous training needs PAD or TRUNCATE");
    }
    return new DatasetSource(plan, options, null);
  }

  /**
   * Evaluation data: every worker reads each of its records exactly once (no padding, a last
   * partial batch kept, no shuffling), so reduced metrics count every record once.
   */
  public static DatasetSource evaluation(DatasetPlan plan, PipelineOptions options) {
    return new DatasetSource(
        plan,
        options.toBuilder()
            .optUneven(PipelineOptions.UnevenPolicy.NONE)
            .optDropRemainder(false)
            .optShuffleBuffer(0)
            .optShuffleSplits(false)
            .optCacheDir(null)
            .build(),
        null);
  }

  public DatasetPlan plan() {
    return plan;
  }

  @Override
  public BatchSource create(int rank, int numWorkers, NDManager manager) {
    return create(rank, numWorkers, manager, new Configuration());
  }

  @Override
  public BatchSource create(int rank, int numWorkers, NDManager manager, Configuration hadoopConf) {
    return PipelineSource.create(
        plan, options, normalization, rank, numWorkers, manager, hadoopConf);
  }

  @Override
  public int batchSize() {
    return options.batchSize();
  }

  @Override
  public BatchSourceFactory withBatchSize(int batchSize) {
    return new DatasetSource(
        plan, options.toBuilder().optBatchSize(batchSize).build(), normalization);
  }

  /**
   * True unless readers hand on batches in the order they are ready (deterministic=false without a
   * shuffle buffer): every other pipeline's order is a function of the seed, the epoch and the
   * layout.
   */
  @Override
  public boolean replaysEpochs() {
    return options.deterministic() || options.shuffleBuffer() > 1;
  }

  /**
   * The plan's splits, records and files (paths and listed versions: a file rewritten in place
   * changes it) and the options that shape an epoch's order (not the batch).
   */
  @Override
  public String orderKey() {
    CRC32C files = new CRC32C();
    for (Split s : plan.splits()) {
      files.update(
          (s.path() + "\0" + s.start() + "\0" + s.fileVersion() + "\n")
              .getBytes(StandardCharsets.UTF_8));
    }
    return String.format(
        Locale.ROOT,
        "%d splits/%d records (files %08x), seed %d, shuffle %d%s, cycle %d, block %d, %s sharding, %s%s",
        plan.splits().size(),
        plan.totalRecords(),
        files.getValue(),
        options.seed(),
        options.shuffleBuffer(),
        options.shuffleSplits() ? "+splits" : "",
        options.cycleLength(),
        options.blockLength(),
        options.sharding(),
        options.uneven(),
        options.dropRemainder() ? ", drop remainder" : "");
  }

  @Override
  public void preflight(int numWorkers) {
    for (int r = 0; r < numWorkers; r++) {
      plan.shard(r, numWorkers, options); // throws naming the numbers if a worker gets no step
    }
  }
}
