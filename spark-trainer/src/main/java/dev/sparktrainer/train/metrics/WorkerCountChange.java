package dev.sparktrainer.train.metrics;

import java.io.Serializable;
import java.util.Locale;

/**
 * How a resume adapted a checkpoint written by another number of workers: the worker counts, the
 * per-worker batch and accumulation it chose (the global batch kept by default), the factor applied
 * to the learning rate ({@code optRescale(LEARNING_RATE)}: the linear scaling rule), and whether
 * the interrupted epoch continued with the records not yet consumed or restarted.
 *
 * @param fromWorkers workers that wrote the checkpoint
 * @param toWorkers workers that resumed
 * @param batchSize the per-worker batch after the resume
 * @param accumulateSteps batches per optimizer step after the resume
 * @param learningRateScale the factor on the learning-rate schedule after the resume (1: none)
 * @param epochRestarted the interrupted epoch started over (its data position could not be
 *     re-dealt)
 */
public record WorkerCountChange(
    int fromWorkers,
    int toWorkers,
    int batchSize,
    int accumulateSteps,
    double learningRateScale,
    boolean epochRestarted)
    implements Serializable {

  /** Global batch after the resume: batch x accumulation x workers. */
  public long globalBatch() {
    return (long) batchSize * accumulateSteps * toWorkers;
  }

  /**
   * A JSON object: {@code from_workers}, {@code to_workers}, {@code batch_size}, {@code
   * accumulate_steps}, {@code global_batch}, {@code lr_scale}, {@code epoch_restarted}.
   */
  public String toJson() {
    return String.format(
        Locale.ROOT,
        "{\"from_workers\": %d, \"to_workers\": %d, \"batch_size\": %d, \"accumulate_steps\": %d,"
            + " \"global_batch\": %d, \"lr_scale\": %s, \"epoch_restarted\": %b}",
        fromWorkers,
        toWorkers,
        batchSize,
        accumulateSteps,
        globalBatch(),
        learningRateScale,
        epochRestarted);
  }

  @Override
  public String toString() {
    return fromWorkers
        + " -> "
        + toWorkers
        + " workers, batch "
        + batchSize
        + " x "
        + accumulateSteps
        + " accumulated (global "
        + globalBatch()
        + ")"
        + (learningRateScale == 1
            ? ""
            : String.format(Locale.ROOT, ", learning rate x %.4g", learningRateScale))
        + (epochRestarted ? ", the interrupted epoch restarted" : "");
  }
}
