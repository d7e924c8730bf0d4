package dev.sparktrainer.monitor;

import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.History;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.StragglerReport;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code metrics.json}: the per-epoch history (loss, accuracy, val_loss, val_accuracy,
 * samples_per_sec, the step-time split; with a regression loss also mse, mae, r2 and their val_
 * forms), the resumes from checkpoints, the slowest rank of each epoch ({@code stragglers}, with
 * every rank's times) and the final figures. Values that do not exist (no validation data, accuracy
 * of a regression loss) are {@code null}.
 */
public final class MetricsReport {
  private MetricsReport() {}

  /**
   * The report as a JSON object.
   *
   * @param history the run's history
   * @param wallSeconds the whole run's wall time, driver included
   * @param info extra top-level string fields (model, workers, paths...), in order
   */
  public static String toJson(History history, double wallSeconds, Map<String, Object> info) {
    Map<String, Object> report = new LinkedHashMap<>(info);
    List<Object> epochs = new ArrayList<>();
    for (EpochMetrics m : history.epochs()) {
      epochs.add(epoch(m));
    }
    report.put("epochs", epochs);
    // Starts from a checkpoint (Spark stage retries, reruns of the same job): empty if none.
    List<Object> resumes = new ArrayList<>();
    for (Resume r : history.resumes()) {
      resumes.add(resume(r));
    }
    report.put("resumes", resumes);
    // One entry per epoch with more than one worker: empty for a single worker.
    List<Object> stragglers = new ArrayList<>();
    for (StragglerReport r : history.stragglers()) {
      stragglers.add(straggler(r));
    }
    report.put("stragglers", stragglers);
    Map<String, Object> fin = null;
    if (!history.epochs().isEmpty()) {
      EpochMetrics last = history.last();
      fin = new LinkedHashMap<>();
      fin.put("epochs", history.epochs().size());
      fin.put("loss", last.loss());
      fin.put("accuracy", last.accuracy());
      fin.put("val_loss", last.validationLoss());
      fin.put("val_accuracy", last.validationAccuracy());
      fin.put("samples_per_sec", last.samplesPerSecond());
      fin.put(
          "training_seconds", history.epochs().stream().mapToDouble(EpochMetrics::seconds).sum());
      fin.put("wall_seconds", wallSeconds);
      fin.put("parameter_hash", last.parameterHash());
      regression(fin, last);
    }
    report.put("final", fin);
    return Json.report(report);
  }

  /** One epoch's entry. */
  public static String epochJson(EpochMetrics m) {
    return Json.value(epoch(m));
  }

  private static Map<String, Object> epoch(EpochMetrics m) {
    Map<String, Object> e = new LinkedHashMap<>();
    e.put("epoch", m.epoch());
    e.put("steps", m.steps());
    e.put("samples", m.samples());
    e.put("loss", m.loss());
    e.put("accuracy", m.accuracy());
    e.put("val_loss", m.validationLoss());
    e.put("val_accuracy", m.validationAccuracy());
    e.put("samples_per_sec", m.samplesPerSecond());
    e.put("seconds", m.seconds());
    if (m.images() != null) {
      e.put("images_per_sec", m.imagesPerSecond());
      e.put("decode_ms_per_image", m.decodeMillisPerImage());
    }
    Map<String, Object> time = new LinkedHashMap<>();
    time.put("data_wait_s", m.dataWaitSeconds());
    time.put("compute_s", m.computeSeconds());
    time.put("allreduce_s", m.allReduceSeconds());
    time.put("optimizer_s", m.optimizerSeconds());
    time.put("backward_s", m.backwardSeconds());
    time.put("communication_s", m.communicationSeconds());
    e.put("time", time);
    e.put("parameter_hash", m.parameterHash());
    regression(e, m);
    return e;
  }

  /** With a regression loss: mse, mae, r2 and their val_ forms. */
  private static void regression(Map<String, Object> e, EpochMetrics m) {
    if (m.regression() != null) {
      e.put("mse", m.mse());
      e.put("mae", m.mae());
      e.put("r2", m.r2());
      e.put("val_mse", m.validationMse());
      e.put("val_mae", m.validationMae());
      e.put("val_r2", m.validationR2());
    }
  }

  /** One epoch's straggler report: the slowest rank, and every rank's times. */
  public static String stragglerJson(StragglerReport r) {
    return Json.value(straggler(r));
  }

  private static Map<String, Object> straggler(StragglerReport r) {
    StragglerReport.Slowest s = r.slowest();
    Map<String, Object> e = new LinkedHashMap<>();
    e.put("epoch", r.epoch());
    e.put("steps", r.steps());
    e.put("kept_steps", r.keptSteps());
    Map<String, Object> slowest = new LinkedHashMap<>();
    slowest.put("rank", s.rank());
    slowest.put("host", s.host());
    slowest.put("executor", s.executorId());
    slowest.put("median_slowdown", s.medianSlowdown());
    slowest.put("p95_slowdown", s.p95Slowdown());
    slowest.put("slowest_step_share", s.slowestStepShare());
    slowest.put("others_wait_s", s.othersWaitSeconds());
    slowest.put("warning", s.warning());
    e.put("slowest", slowest);
    List<Object> ranks = new ArrayList<>();
    for (StragglerReport.Rank k : r.ranks()) {
      Map<String, Object> x = new LinkedHashMap<>();
      x.put("rank", k.rank());
      x.put("host", k.host());
      x.put("executor", k.executorId());
      x.put("data_wait_s", k.dataWaitSeconds());
      x.put("compute_s", k.computeSeconds());
      x.put("comm_wait_s", k.commWaitSeconds());
      x.put("step_median_s", k.medianWorkSeconds());
      x.put("step_p95_s", k.p95WorkSeconds());
      x.put("slowest_step_share", k.slowestStepShare());
      ranks.add(x);
    }
    e.put("ranks", ranks);
    return e;
  }

  private static Map<String, Object> resume(Resume r) {
    Map<String, Object> e = new LinkedHashMap<>();
    e.put("step", r.step());
    e.put("epoch", r.epoch());
    e.put("step_in_epoch", r.stepInEpoch());
    e.put("stage_attempt", r.stageAttempt());
    e.put("checkpoint", r.checkpoint());
    e.put("from_scratch", r.fromScratch());
    List<Object> skipped = new ArrayList<>();
    for (SkippedCheckpoint k : r.skipped()) {
      Map<String, Object> s = new LinkedHashMap<>();
      s.put("file", k.file());
      s.put("reason", k.reason());
      skipped.add(s);
    }
    e.put("skipped", skipped);
    if (r.workers() != null) {
      Map<String, Object> w = new LinkedHashMap<>();
      w.put("from_workers", r.workers().fromWorkers());
      w.put("to_workers", r.workers().toWorkers());
      w.put("batch_size", r.workers().batchSize());
      w.put("accumulate_steps", r.workers().accumulateSteps());
      w.put("global_batch", r.workers().globalBatch());
      w.put("lr_scale", r.workers().learningRateScale());
      w.put("epoch_restarted", r.workers().epochRestarted());
      e.put("workers", w);
    }
    return e;
  }
}
