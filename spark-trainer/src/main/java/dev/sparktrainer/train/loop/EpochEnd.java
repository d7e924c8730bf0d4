package dev.sparktrainer.train.loop;

import ai.djl.training.loss.Loss;
import dev.sparktrainer.checkpoint.AsyncCheckpointWriter;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.data.PipelineStats;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.BatchSource;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.GrowRequest;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepTimes;
import dev.sparktrainer.train.metrics.StragglerReport;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.StepTimings;
import dev.sparktrainer.train.step.TrainStep;
import java.io.IOException;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;

/**
 * The end of one epoch on one rank: what the epoch's steps left (its sums, step times, clock), and
 * what the {@link EpochEndStep}s make of it, run in their order ({@link #run}). Each step reads
 * what the earlier ones wrote: the history entry needs the reduced sums, the validation and the
 * replica hash; the checkpoint needs the history.
 */
public final class EpochEnd {
  private static final System.Logger LOG = System.getLogger(EpochEnd.class.getName());

  /**
   * What every epoch's end of a run works with.
   *
   * @param snapshots rank 0's checkpoint writer; null on other ranks or without checkpoints
   * @param writer rank 0's background writer (the grow check waits for it); null elsewhere
   * @param history the run's metrics so far, appended to by {@link EpochEndStep#HISTORY}
   * @param stragglers the run's straggler reports, appended to by {@link EpochEndStep#STRAGGLERS}
   */
  record Run(
      TrainingConfig cfg,
      Communicator comm,
      Configuration hadoopConf,
      ReplicaSet replicas,
      TrainStep step,
      BatchSource validation,
      Loss loss,
      StepTimes times,
      ProgressHook progress,
      SnapshotWriter snapshots,
      AsyncCheckpointWriter writer,
      List<EpochMetrics> history,
      List<StragglerReport> stragglers) {}

  private final Run run;
  private final int epoch;
  private final long steps;
  private final double[] trainSums;
  private final long dataWaitNanos;
  private final int imageColumns;
  private final PipelineStats pipeline;
  private EpochMetrics.Images images;
  private final StepTimings timings;
  private final long startNanos;
  private final double trainSeconds;
  private final double restoredSamples;
  private final long globalStep;

  private EpochSums sums;
  private double[] validationSums;
  private double[] seconds;
  private String replicaHash;
  private EpochMetrics metrics;
  private boolean stopToGrow;

  /**
   * @param steps the epoch's optimizer steps
   * @param trainSums this rank's loss x samples, correct, samples, regression sums
   * @param timings the step times of this epoch (this attempt's part of it)
   * @param startNanos when this attempt's part of the epoch began
   * @param restoredSamples samples restored from a checkpoint (trained and timed by an earlier
   *     attempt)
   * @param globalStep optimizer steps done at the epoch's end
   */
  EpochEnd(
      Run run,
      int epoch,
      long steps,
      double[] trainSums,
      long dataWaitNanos,
      int imageColumns,
      PipelineStats pipeline,
      StepTimings timings,
      long startNanos,
      double restoredSamples,
      long globalStep) {
    this.run = run;
    this.epoch = epoch;
    this.steps = steps;
    this.trainSums = trainSums;
    this.dataWaitNanos = dataWaitNanos;
    this.imageColumns = imageColumns;
    this.pipeline = pipeline;
    this.timings = timings;
    this.startNanos = startNanos;
    this.trainSeconds = (System.nanoTime() - startNanos) / 1e9;
    this.restoredSamples = restoredSamples;
    this.globalStep = globalStep;
  }

  /** The epoch (0-based). */
  public int epoch() {
    return epoch;
  }

  /** The epoch's metrics, once {@link EpochEndStep#HISTORY} has run; else null. */
  public EpochMetrics metrics() {
    return metrics;
  }

  /** The training step: parameters and optimizer state (what a fault hook may disturb). */
  public TrainStep step() {
    return run.step;
  }

  /** Optimizer steps done at the epoch's end. */
  long globalStep() {
    return globalStep;
  }

  /** Whether every rank agreed to stop and relaunch on more workers. */
  boolean stopToGrow() {
    return stopToGrow;
  }

  /** Runs one epoch-end step. */
  void run(EpochEndStep s) throws IOException {
    switch (s) {
      case METRICS -> {
        sums = EpochSums.of(trainSums, dataWaitNanos, timings).allReduce(run.comm);
        Divergence.check(sums.loss(), epoch, globalStep);
        if (imageColumns > 0) { // the same on every rank: the same spec
          double[] decoded = {
            pipeline == null ? 0 : pipeline.decodedImages(),
            pipeline == null ? 0 : pipeline.decodedImages() * pipeline.decodeMillisPerImage()
          };
          if (!Double.isFinite(decoded[1])) {
            decoded[1] = 0;
          }
          run.comm.allReduce(decoded, ReduceOp.SUM);
          images =
              new EpochMetrics.Images(
                  Double.NaN, decoded[0] > 0 ? decoded[1] / decoded[0] : Double.NaN);
        }
      }
      case STRAGGLERS -> {
        StragglerReport straggler = run.times.exchange(run.comm, epoch);
        if (straggler != null) {
          run.stragglers.add(straggler);
          run.progress.stragglers(straggler);
        }
      }
      case VALIDATION -> validate();
      case EPOCH_TIME -> {
        seconds = new double[] {trainSeconds, (System.nanoTime() - startNanos) / 1e9};
        run.comm.allReduce(seconds, ReduceOp.MAX);
      }
      case REPLICA_CHECK -> replicaHash = checkReplicasIdentical();
      case HISTORY -> record();
      case CHECKPOINT -> {
        if (run.snapshots != null) {
          run.snapshots.write(Snapshot.epochStart(epoch + 1, globalStep));
        }
      }
      case GROW_CHECK -> stopToGrow = epoch + 1 < run.cfg.data().epochs() && growRequested();
    }
  }

  private void validate() {
    validationSums = new double[3 + EpochMetrics.Regression.SUMS];
    if (run.validation == null) {
      return;
    }
    for (Iterator<Batch> it = run.validation.epoch(0, 0); it.hasNext(); ) {
      try (Batch b = it.next()) {
        run.replicas.evaluate(b, run.cfg.model().loss(), run.loss, validationSums);
      }
    }
    run.comm.allReduce(validationSums, ReduceOp.SUM);
  }

  private String checkReplicasIdentical() {
    byte[] mine = run.replicas.hash();
    List<byte[]> all = run.comm.allGather(mine);
    HexFormat hex = HexFormat.of();
    for (int r = 1; r < all.size(); r++) {
      if (!MessageDigest.isEqual(all.get(0), all.get(r))) {
        StringBuilder sb =
            new StringBuilder("Replica parameters differ after epoch " + epoch + ":");
        for (int k = 0; k < all.size(); k++) {
          sb.append(" rank ").append(k).append(' ').append(hex.formatHex(all.get(k)));
        }
        throw new ReplicaMismatchException(sb.toString());
      }
    }
    return hex.formatHex(all.get(0));
  }

  private void record() {
    int size = run.comm.size();
    LossSpec loss = run.cfg.model().loss();
    boolean validated = run.validation != null;
    boolean accuracy = loss.hasAccuracy();
    double[] val = validationSums;
    metrics =
        new EpochMetrics(
            epoch,
            steps,
            (long) sums.samples(),
            sums.loss() / sums.samples(),
            accuracy ? sums.correct() / sums.samples() : Double.NaN,
            validated ? val[0] / val[2] : Double.NaN,
            validated && accuracy ? val[1] / val[2] : Double.NaN,
            seconds[1],
            (sums.samples() - restoredSamples) / seconds[0],
            sums.dataWaitSeconds() / size,
            sums.computeSeconds() / size,
            sums.exposedCommunicationSeconds() / size,
            sums.optimizerSeconds() / size,
            sums.backwardSeconds() / size,
            sums.communicationSeconds() / size,
            replicaHash,
            regression(loss, sums, val, validated),
            images == null
                ? null
                : new EpochMetrics.Images(
                    (sums.samples() - restoredSamples) / seconds[0] * imageColumns,
                    images.decodeMillisPerImage()));
    run.history.add(metrics);
    run.progress.epochEnd(metrics);
    if (run.comm.rank() == 0) {
      LOG.log(System.Logger.Level.INFO, "epoch " + metrics.toJson());
    }
  }

  /**
   * MSE, MAE and R² of an {@code l2} epoch from the reduced sums (validation's at 3 of {@code
   * val}); else null.
   */
  private static EpochMetrics.Regression regression(
      LossSpec loss, EpochSums sums, double[] val, boolean validated) {
    if (loss != LossSpec.L2) {
      return null;
    }
    double[] t = EpochMetrics.Regression.of(sums.regression(), 0, sums.samples());
    double[] v = EpochMetrics.Regression.of(val, 3, validated ? val[2] : 0);
    return new EpochMetrics.Regression(t[0], t[1], t[2], v[0], v[1], v[2]);
  }

  /**
   * With {@code optGrow} on fewer workers than planned: whether the driver asked for more ({@link
   * GrowRequest}), agreed by every rank; if so rank 0 first waits until the epoch's checkpoint is
   * written.
   */
  private boolean growRequested() throws IOException {
    TrainingConfig cfg = run.cfg;
    if (!cfg.elastic().grow()
        || cfg.checkpoints().dir() == null
        || run.comm.size() >= cfg.elastic().plannedWorkers()) {
      return false;
    }
    return GrowRequest.in(cfg.checkpoints().dir()).agreed(run.comm, run.hadoopConf, run.writer);
  }
}
