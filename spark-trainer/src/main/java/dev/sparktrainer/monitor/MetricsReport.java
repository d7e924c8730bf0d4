package dev.sparktrainer.monitor;

import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.train.EpochMetrics;
import dev.sparktrainer.train.History;
import dev.sparktrainer.train.Resume;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code metrics.json}: the per-epoch history (loss, accuracy, val_loss, val_accuracy, samples_per_sec,
 * the step-time split), the resumes from checkpoints and the final figures. Values that do not exist
 * (no validation data, a regression loss) are {@code null}.
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
      fin.put("training_seconds", history.epochs().stream().mapToDouble(EpochMetrics::seconds).sum());
      fin.put("wall_seconds", wallSeconds);
      fin.put("parameter_hash", last.parameterHash());
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
    Map<String, Object> time = new LinkedHashMap<>();
    time.put("data_wait_s", m.dataWaitSeconds());
    time.put("compute_s", m.computeSeconds());
    time.put("allreduce_s", m.allReduceSeconds());
    time.put("optimizer_s", m.optimizerSeconds());
    time.put("backward_s", m.backwardSeconds());
    time.put("communication_s", m.communicationSeconds());
    e.put("time", time);
    e.put("parameter_hash", m.parameterHash());
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
    return e;
  }
}
