package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.StragglerReport;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A {@link StragglerReport} as TensorBoard scalars of its epoch: per rank ({@code
 * rank_time/<tag>/rank_<r>}, the ranks' charts side by side in the {@code rank_time} section) its
 * data wait, compute and communication wait over the epoch and its median and p95 step work in
 * milliseconds; and the slowest rank ({@code straggler/...}).
 */
final class StragglerScalars {
  private StragglerScalars() {}

  static Map<String, Double> of(StragglerReport r) {
    Map<String, Double> m = new LinkedHashMap<>();
    StragglerReport.Slowest s = r.slowest();
    m.put("straggler/rank", (double) s.rank());
    m.put("straggler/median_slowdown", s.medianSlowdown());
    m.put("straggler/p95_slowdown", s.p95Slowdown());
    m.put("straggler/slowest_step_share", s.slowestStepShare());
    m.put("straggler/others_wait_s", s.othersWaitSeconds());
    for (StragglerReport.Rank k : r.ranks()) {
      String rank = "/rank_" + k.rank();
      m.put("rank_time/data_wait_s" + rank, k.dataWaitSeconds());
      m.put("rank_time/compute_s" + rank, k.computeSeconds());
      m.put("rank_time/comm_wait_s" + rank, k.commWaitSeconds());
      m.put("rank_time/step_median_ms" + rank, k.medianWorkSeconds() * 1e3);
      m.put("rank_time/step_p95_ms" + rank, k.p95WorkSeconds() * 1e3);
    }
    return m;
  }
}
