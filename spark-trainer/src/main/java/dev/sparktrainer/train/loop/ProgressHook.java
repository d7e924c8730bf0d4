package dev.sparktrainer.train.loop;

import dev.sparktrainer.data.PipelineStats;
import dev.sparktrainer.device.BatchSource;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;
import dev.sparktrainer.train.metrics.TrainingCallback;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;

/**
 * The {@link TrainingCallback} of a job as the worker loop uses it: only on rank 0, started once
 * the steps per epoch are known, and isolated — a failing callback is logged and dropped, never
 * fails training.
 */
final class ProgressHook implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(ProgressHook.class.getName());

  private final TrainingConfig cfg;
  private final int size;
  private final TrainingCallback callback;
  private TrainingCallback.Listener listener;
  private double lastLoss;
  private double lastSamples;
  private long epochStartNanos;
  private double epochStartSamples;
  private BatchSource source;
  private int imageColumns;

  ProgressHook(TrainingConfig cfg, TrainingCallback callback, int rank, int size) {
    this.cfg = rank == 0 ? cfg : null;
    this.callback = rank == 0 ? callback : null;
    this.size = size;
  }

  void start(long stepsPerEpoch, long globalStep, int attempt, Configuration conf) {
    if (cfg == null || callback == null) {
      return;
    }
    try {
      listener =
          callback.start(size, cfg.data().epochs(), stepsPerEpoch, globalStep, attempt, conf);
    } catch (IOException | RuntimeException e) {
      drop("start", e);
    }
  }

  /** The training data, whose image columns and decode time the progress reports. */
  void source(BatchSource s) {
    this.source = s;
    this.imageColumns = s.imageColumns();
  }

  /** At the start (or resumption) of an epoch; {@code acc} holds its sums so far. */
  void epochBegin(double[] acc) {
    epochStartNanos = System.nanoTime();
    epochStartSamples = acc[2];
    lastLoss = acc[0];
    lastSamples = acc[2];
  }

  /** After a step; {@code acc} holds (loss x samples, correct, samples) of the epoch so far. */
  void step(int epoch, long step, long stepsPerEpoch, long globalStep, double[] acc) {
    if (listener == null) {
      return;
    }
    double images = Double.NaN;
    double decodeMs = Double.NaN;
    double n = acc[2] - lastSamples;
    double batchLoss = n > 0 ? (acc[0] - lastLoss) / n : Double.NaN;
    lastLoss = acc[0];
    lastSamples = acc[2];
    double seconds = (System.nanoTime() - epochStartNanos) / 1e9;
    // rank 0's own samples x N: every worker takes the same number of equally sized steps.
    double rate = seconds > 0 ? (acc[2] - epochStartSamples) * size / seconds : Double.NaN;
    if (source != null && imageColumns > 0) {
      images = rate * imageColumns;
      PipelineStats s = source.stats();
      decodeMs = s == null ? Double.NaN : s.decodeMillisPerImage();
    }
    try {
      listener.onStep(
          new StepProgress(
              epoch,
              cfg.data().epochs(),
              step,
              stepsPerEpoch,
              globalStep,
              batchLoss,
              acc[2] > 0 ? acc[0] / acc[2] : Double.NaN,
              rate,
              cfg.model().optimizer().learningRate(globalStep - 1, size),
              seconds,
              size,
              images,
              decodeMs));
    } catch (RuntimeException e) {
      drop("onStep", e);
    }
  }

  /**
   * Rank 0's straggler report of an epoch: logged (a warning when it fired), then to the listener.
   */
  void stragglers(StragglerReport r) {
    StragglerReport.Slowest s = r.slowest();
    // The driver prints the warning on its console; this is rank 0's record of it in the executor's
    // log (bin/log4j2.properties keeps it off the console, where local mode would print it twice).
    LOG.log(
        s.warning() ? System.Logger.Level.INFO : System.Logger.Level.DEBUG,
        (s.warning() ? "Straggler: " : "") + s.summary());
    if (listener == null) {
      return;
    }
    try {
      listener.onStragglers(r);
    } catch (RuntimeException e) {
      drop("onStragglers", e);
    }
  }

  void epochEnd(EpochMetrics m) {
    if (listener == null) {
      return;
    }
    try {
      listener.onEpochEnd(m);
    } catch (RuntimeException e) {
      drop("onEpochEnd", e);
    }
  }

  private void drop(String where, Exception e) {
    LOG.log(
        System.Logger.Level.WARNING,
        "Training callback failed in " + where + " (training goes on without it): " + e,
        e);
    close();
  }

  @Override
  public void close() {
    if (listener != null) {
      TrainingCallback.Listener l = listener;
      listener = null;
      try {
        l.close();
      } catch (RuntimeException e) {
        LOG.log(System.Logger.Level.WARNING, "Training callback failed to close: " + e, e);
      }
    }
  }
}
