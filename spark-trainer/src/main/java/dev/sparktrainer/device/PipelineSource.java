package dev.sparktrainer.device;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.data.HostBatch;
import dev.sparktrainer.data.InputPipeline;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.PipelineStats;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One worker's input pipeline as the trainer reads it: the {@link InputPipeline}'s host batches,
 * each uploaded to the worker's device as it is taken ({@link BatchUpload}), on the thread that
 * takes it (the training thread, or a {@link DevicePrefetch}'s).
 *
 * <pre>{@code
 * DatasetPlan plan = DatasetPlanner.plan(spec, options, spark);       // driver
 * try (PipelineSource in =
 *     PipelineSource.create(plan, options, null, rank, numWorkers, manager, conf)) {
 *   for (int epoch = 0; epoch < epochs; epoch++) {
 *     Iterator<Batch> it = in.epoch(epoch, 0);
 *     if (epoch + 1 < epochs) in.prepare(epoch + 1);                  // read ahead across the boundary
 *     while (it.hasNext()) {
 *       try (Batch b = it.next()) { ... }
 *     }
 *   }
 * }
 * }</pre>
 */
public final class PipelineSource implements BatchSource {
  private static final Logger LOG = LoggerFactory.getLogger(PipelineSource.class);

  private final InputPipeline pipeline;
  private final BatchUpload upload;

  private PipelineSource(InputPipeline pipeline, BatchUpload upload) {
    this.pipeline = pipeline;
    this.upload = upload;
  }

  /**
   * The pipeline of worker {@code rank} of {@code numWorkers}, its batches created on {@code
   * manager}'s device and normalized by {@code normalization} (null: none). Image columns travel as
   * uint8 where {@link DeviceImages#plan} says so for that device, and the host pipeline then only
   * draws the augmentation's random choices.
   *
   * @throws IllegalArgumentException if the options do not fit the memory budget, a worker would
   *     get no step, or the normalization does not fit the data
   */
  public static PipelineSource create(
      DatasetPlan plan,
      PipelineOptions options,
      Normalization normalization,
      int rank,
      int numWorkers,
      NDManager manager,
      Configuration conf) {
    DeviceImages images =
        DeviceImages.plan(
            plan.spec(), options, normalization, manager != null && manager.getDevice().isGpu());
    if (!images.active()
        && options.imageTransfer() == PipelineOptions.ImageTransfer.UINT8
        && plan.spec().features().stream()
            .anyMatch(f -> f.encoding() == DatasetSpec.Encoding.IMAGE)) {
      LOG.info("--image-transfer uint8 asked for, images travel as float32: {}", images.reason());
    }
    PipelineOptions host = images.active() ? images.hostOptions(options) : options;
    // Images travelling as uint8 stay bytes on the host from the decoder on (TFRecord data).
    InputPipeline pipeline =
        InputPipeline.create(images.hostPlan(plan), host, rank, numWorkers, conf);
    try {
      return new PipelineSource(
          pipeline, new BatchUpload(plan.spec(), normalization, images, manager));
    } catch (RuntimeException e) {
      pipeline.close();
      throw e;
    }
  }

  /** The host pipeline underneath (its shard, its measurements). */
  public InputPipeline pipeline() {
    return pipeline;
  }

  /** How this pipeline's image columns cross to the device. */
  public DeviceImages images() {
    return upload.images();
  }

  /** Measurements of the current (or last) epoch ({@link InputPipeline#stats}). */
  @Override
  public PipelineStats stats() {
    return pipeline.stats();
  }

  @Override
  public int imageColumns() {
    int n = 0;
    for (DatasetSpec.Feature f : pipeline.spec().features()) {
      if (f.encoding() == DatasetSpec.Encoding.IMAGE) {
        n++;
      }
    }
    return n;
  }

  @Override
  public long stepsPerEpoch() {
    return pipeline.stepsPerEpoch();
  }

  @Override
  public Iterator<Batch> epoch(int epoch, long skipSteps) {
    return uploaded(pipeline.epoch(epoch, skipSteps));
  }

  @Override
  public Iterator<Batch> epochAfter(int epoch, List<EpochSegment> earlier, long skipSteps) {
    return uploaded(pipeline.epochAfter(epoch, earlier, skipSteps));
  }

  @Override
  public long stepsAfter(int epoch, List<EpochSegment> earlier) {
    return pipeline.stepsAfter(epoch, earlier);
  }

  @Override
  public void prepare(int epoch) {
    pipeline.prepare(epoch);
  }

  private Iterator<Batch> uploaded(Iterator<HostBatch> host) {
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        return host.hasNext();
      }

      @Override
      public Batch next() {
        return upload.upload(host.next());
      }
    };
  }

  @Override
  public void close() {
    pipeline.close();
  }
}
