package dev.sparktrainer.monitor;

import dev.sparktrainer.train.EpochMetrics;
import dev.sparktrainer.train.History;
import dev.sparktrainer.train.StragglerReport;
import java.util.Locale;
import java.util.Map;

/**
 * {@code metrics.json}: the per-epoch history (loss, accuracy, val_loss, val_accuracy, samples_per_sec,
 * the step-time split; with a regression loss also mse, mae, r2 and their val_ forms), the resumes from
 * checkpoints, the slowest rank of each epoch ({@code stragglers}, with every rank's times) and the final
 * figures. Values that do not exist (no validation data, accuracy of a regression loss) are {@code null}.
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
    StringBuilder sb = new StringBuilder("{\n");
    for (Map.Entry<String, Object> e : info.entrySet()) {
      sb.append("  ").append(Json.quote(e.getKey())).append(": ").append(Json.value(e.getValue())).append(",\n");
    }
    sb.append("  \"epochs\": [");
    for (int i = 0; i < history.epochs().size(); i++) {
      sb.append(i == 0 ? "\n    " : ",\n    ").append(epochJson(history.epochs().get(i)));
    }
    sb.append("\n  ],\n");
    // Starts from a checkpoint (Spark stage retries, reruns of the same job): empty if none.
    sb.append("  \"resumes\": [");
    for (int i = 0; i < history.resumes().size(); i++) {
      sb.append(i == 0 ? "\n    " : ",\n    ").append(history.resumes().get(i).toJson());
    }
    sb.append(history.resumes().isEmpty() ? "],\n" : "\n  ],\n");
    // One entry per epoch with more than one worker: empty for a single worker.
    sb.append("  \"stragglers\": [");
    for (int i = 0; i < history.stragglers().size(); i++) {
      sb.append(i == 0 ? "\n    " : ",\n    ").append(stragglerJson(history.stragglers().get(i)));
    }
    sb.append(history.stragglers().isEmpty() ? "],\n" : "\n  ],\n");
    sb.append("  \"final\": ");
    if (history.epochs().isEmpty()) {
      sb.append("null");
    } else {
      EpochMetrics last = history.last();
      double total = history.epochs().stream().mapToDouble(EpochMetrics::seconds).sum();
      sb.append(String.format(Locale.ROOT,
          "{\"epochs\": %d, \"loss\": %s, \"accuracy\": %s, \"val_loss\": %s, \"val_accuracy\": %s,"
              + " \"samples_per_sec\": %s, \"training_seconds\": %s, \"wall_seconds\": %s, \"parameter_hash\": %s}",
          history.epochs().size(), Json.num(last.loss()), Json.num(last.accuracy()), Json.num(last.validationLoss()),
          Json.num(last.validationAccuracy()), Json.num(last.samplesPerSecond()), Json.num(total),
          Json.num(wallSeconds), Json.quote(last.parameterHash())));
      regression(sb, last);
    }
    sb.append("\n}\n");
    return sb.toString();
  }

  /** One epoch's straggler report: the slowest rank, and every rank's times. */
  public static String stragglerJson(StragglerReport r) {
    StragglerReport.Slowest s = r.slowest();
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT,
        "{\"epoch\": %d, \"steps\": %d, \"kept_steps\": %d, \"slowest\": {\"rank\": %d, \"host\": %s,"
            + " \"executor\": %s, \"median_slowdown\": %s, \"p95_slowdown\": %s, \"slowest_step_share\": %s,"
            + " \"others_wait_s\": %s, \"warning\": %b}, \"ranks\": [",
        r.epoch(), r.steps(), r.keptSteps(), s.rank(), Json.quote(s.host()), Json.quote(s.executorId()),
        Json.num(s.medianSlowdown()), Json.num(s.p95Slowdown()), Json.num(s.slowestStepShare()),
        Json.num(s.othersWaitSeconds()), s.warning()));
    for (int i = 0; i < r.ranks().size(); i++) {
      StragglerReport.Rank k = r.ranks().get(i);
      sb.append(i == 0 ? "" : ", ").append(String.format(Locale.ROOT,
          "{\"rank\": %d, \"host\": %s, \"executor\": %s, \"data_wait_s\": %s, \"compute_s\": %s,"
              + " \"comm_wait_s\": %s, \"step_median_s\": %s, \"step_p95_s\": %s, \"slowest_step_share\": %s}",
          k.rank(), Json.quote(k.host()), Json.quote(k.executorId()), Json.num(k.dataWaitSeconds()),
          Json.num(k.computeSeconds()), Json.num(k.commWaitSeconds()), Json.num(k.medianWorkSeconds()),
          Json.num(k.p95WorkSeconds()), Json.num(k.slowestStepShare())));
    }
    return sb.append("]}").toString();
  }

  /** Adds the regression metrics into the JSON object just appended (before its closing brace). */
  private static void regression(StringBuilder sb, EpochMetrics m) {
    if (m.regression() != null) {
      sb.setLength(sb.length() - 1);
      sb.append(String.format(Locale.ROOT,
          ", \"mse\": %s, \"mae\": %s, \"r2\": %s, \"val_mse\": %s, \"val_mae\": %s, \"val_r2\": %s}",
          Json.num(m.mse()), Json.num(m.mae()), Json.num(m.r2()), Json.num(m.validationMse()),
          Json.num(m.validationMae()), Json.num(m.validationR2())));
    }
  }

  /** One epoch's entry. */
  public static String epochJson(EpochMetrics m) {
    StringBuilder sb = new StringBuilder();
    sb.append(String.format(Locale.ROOT,
        "{\"epoch\": %d, \"steps\": %d, \"samples\": %d, \"loss\": %s, \"accuracy\": %s, \"val_loss\": %s,"
            + " \"val_accuracy\": %s, \"samples_per_sec\": %s, \"seconds\": %s, \"time\": {\"data_wait_s\": %s,"
            + " \"compute_s\": %s, \"allreduce_s\": %s, \"optimizer_s\": %s, \"backward_s\": %s, \"communication_s\": %s}, \"parameter_hash\": %s}",
        m.epoch(), m.steps(), m.samples(), Json.num(m.loss()), Json.num(m.accuracy()), Json.num(m.validationLoss()),
        Json.num(m.validationAccuracy()), Json.num(m.samplesPerSecond()), Json.num(m.seconds()),
        Json.num(m.dataWaitSeconds()), Json.num(m.computeSeconds()), Json.num(m.allReduceSeconds()),
        Json.num(m.optimizerSeconds()), Json.num(m.backwardSeconds()), Json.num(m.communicationSeconds()),
        Json.quote(m.parameterHash())));
    regression(sb, m);
    return sb.toString();
  }
}
