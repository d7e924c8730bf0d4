package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.fmt;
import static dev.sparktrainer.train.BenchSupport.median;
import static dev.sparktrainer.train.BenchSupport.num;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The rows of bin/bench-scaling and their report: each run's JSON line ({@link #finish}: the
 * driver's figures with the model's settings and the scaling efficiency), the table, and the
 * targets on the medians of the rounds.
 */
final class ScalingReport {
  private ScalingReport() {}

  /**
   * The JSON lines of one model: the driver's figures with the model's settings, and each spark-2
   * run's scaling efficiency against spark-1 of the same placement and round (the median of
   * spark-1's rounds when that round has none).
   */
  static List<Map<String, Object>> finish(
      ScalingSetup s, List<Map<String, Object>> driverRows, int epochs, double linkCheck) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Map<String, Object> d : driverRows) {
      Map<String, Object> r = new LinkedHashMap<>();
      boolean two = "spark-2".equals(d.get("mode"));
      r.put("model", s.model());
      r.put("params", s.params());
      r.put("mode", d.get("mode"));
      r.put("workers", two ? 2 : 1);
      r.put("overlap", d.get("overlap"));
      r.put("placement", d.get("placement"));
      r.put("link_gbps", new BigDecimal(String.valueOf(d.get("link"))));
      r.put("samples_per_s", d.get("samples_per_s"));
      double base = Double.NaN;
      if (two) {
        base = spark1Rate(driverRows, d.get("placement"), d.get("round"));
      }
      r.put("scaling_efficiency", two ? num(d, "samples_per_s") / (2 * base) : Double.NaN);
      for (String k :
          List.of(
              "data_wait_fraction",
              "compute_fraction",
              "exposed_comm_fraction",
              "optimizer_fraction",
              "overlap_ratio",
              "comm_to_backward",
              "step_ms",
              "backward_ms",
              "communication_ms",
              "exposed_comm_ms",
              "optimizer_ms")) {
        r.put(k, d.getOrDefault(k, Double.NaN));
      }
      r.put("batch", s.batch());
      r.put("steps", d.getOrDefault("steps", s.steps()));
      r.put("epochs", epochs);
      r.put("measured_epochs", d.getOrDefault("measured_epochs", 0));
      r.put("round", d.get("round"));
      r.put("ring_transport", "tcp");
      r.put("link_desc", "namespace loopback, tc tbf, shared by all traffic in both directions");
      r.put("link_check_gbps", linkCheck);
      r.put("load_avg_before", d.getOrDefault("load_avg_before", Double.NaN));
      r.put("load_avg_after", d.getOrDefault("load_avg_after", Double.NaN));
      r.put("omp_wait_policy", String.valueOf(System.getenv("OMP_WAIT_POLICY")));
      r.put("time", d.get("time"));
      if (d.containsKey("error")) {
        r.put("error", d.get("error"));
      }
      out.add(r);
    }
    return out;
  }

  private static double spark1Rate(List<Map<String, Object>> rows, Object placement, Object round) {
    List<Double> all = new ArrayList<>();
    for (Map<String, Object> r : rows) {
      if ("spark-1".equals(r.get("mode"))
          && placement.equals(r.get("placement"))
          && !r.containsKey("error")) {
        if (r.get("round").equals(round)) {
          return num(r, "samples_per_s");
        }
        all.add(num(r, "samples_per_s"));
      }
    }
    return median(all);
  }

  static void printTable(List<Map<String, Object>> rows) {
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "%-6s %11s %-11s %-7s %-9s %6s %10s %6s %6s %7s %7s %7s %7s %8s %8s%n",
        "model",
        "params",
        "mode",
        "overlap",
        "placement",
        "link",
        "samples/s",
        "eff",
        "wait",
        "compute",
        "exposed",
        "optim",
        "overlap",
        "comm/bwd",
        "step_ms");
    for (Map<String, Object> r : rows) {
      boolean one = "spark-1".equals(r.get("mode")) || "torch-1".equals(r.get("mode"));
      if (r.containsKey("error")) {
        System.out.printf(
            Locale.ROOT,
            "%-6s %11s %-11s %-7s %-9s %6s FAILED: %s%n",
            r.get("model"),
            String.format(Locale.ROOT, "%,d", ((Number) r.get("params")).longValue()),
            r.get("mode"),
            Boolean.TRUE.equals(r.get("overlap")) ? "on" : "off",
            r.get("placement"),
            one ? "any" : link(r),
            r.get("error"));
        continue;
      }
      System.out.printf(
          Locale.ROOT,
          "%-6s %11s %-11s %-7s %-9s %6s %10.0f %6s %6s %7s %7s %7s %7s %8s %8.1f%n",
          r.get("model"),
          String.format(Locale.ROOT, "%,d", ((Number) r.get("params")).longValue()),
          r.get("mode"),
          Boolean.TRUE.equals(r.get("overlap")) ? "on" : "off",
          r.get("placement"),
          one ? "any" : link(r),
          num(r, "samples_per_s"),
          fmt(num(r, "scaling_efficiency"), "%.3f"),
          fmt(num(r, "data_wait_fraction"), "%.3f"),
          fmt(num(r, "compute_fraction"), "%.3f"),
          fmt(num(r, "exposed_comm_fraction"), "%.3f"),
          fmt(num(r, "optimizer_fraction"), "%.3f"),
          fmt(num(r, "overlap_ratio"), "%.3f"),
          fmt(num(r, "comm_to_backward"), "%.3f"),
          num(r, "step_ms"));
    }
    System.out.println(
        "link: Gbit/s of the namespace's loopback (unl = no limit; spark-1 ran unlimited, no ring"
            + " traffic); eff = samples/s / (2 x spark-1's, same model and placement); wait, compute, exposed"
            + " (communication the training thread waited for), optim: fractions of step time; overlap = (communication"
            + " - exposed) / min(communication, backward); comm/bwd = communication / backward."
            + " torch-1, torch-ddp-2: PyTorch eager (bin/torch-train.py), 1 process, and DDP over"
            + " gloo with 2 processes x 1 thread on the same link; eff = against torch-1.");
  }

  /** The three targets, each on the median of its configuration's rounds. */
  static void printTargets(List<Map<String, Object>> rows) {
    List<Map<String, Object>> ok = rows.stream().filter(r -> !r.containsKey("error")).toList();
    System.out.println();
    System.out.println("Targets (medians over rounds):");

    System.out.println(
        "  1. overlap ratio >= 0.7 wherever communication >= 1/3 of backward (spark-2, overlap on):");
    int n = 0;
    int met = 0;
    for (Map<String, Object> key :
        configurations(
            ok, r -> "spark-2".equals(r.get("mode")) && Boolean.TRUE.equals(r.get("overlap")))) {
      List<Map<String, Object>> runs = same(ok, key);
      double ctb = median(runs.stream().map(r -> num(r, "comm_to_backward")).toList());
      if (!(ctb >= 1.0 / 3)) {
        continue;
      }
      double ratio = median(runs.stream().map(r -> num(r, "overlap_ratio")).toList());
      n++;
      met += ratio >= 0.7 ? 1 : 0;
      System.out.printf(
          Locale.ROOT,
          "     %-6s %-6s %4s Gbit/s: comm/backward %.2f, overlap ratio %s: %s%n",
          key.get("model"),
          key.get("placement"),
          link(key),
          ctb,
          fmt(ratio, "%.3f"),
          ratio >= 0.7 ? "met" : "NOT MET");
    }
    if (n == 0) {
      System.out.println(
          "     not evaluated: no overlap-on spark-2 run had communication >= 1/3 of backward"
              + " (communication and backward seconds are 0 where the trainer does not measure them)");
    } else {
      System.out.printf(Locale.ROOT, "     %d of %d: %s%n", met, n, met == n ? "met" : "NOT MET");
    }

    System.out.println(
        "  2. ResNet 2-worker scaling efficiency at 2.5 Gbit/s >= 0.8 (overlap on):");
    boolean any = false;
    for (Map<String, Object> key :
        configurations(
            ok,
            r ->
                "resnet".equals(r.get("model"))
                    && "spark-2".equals(r.get("mode"))
                    && link(r).equals("2.5"))) {
      any = true;
      double eff = median(same(ok, key).stream().map(r -> num(r, "scaling_efficiency")).toList());
      boolean on = Boolean.TRUE.equals(key.get("overlap"));
      System.out.printf(
          Locale.ROOT,
          "     resnet %-6s overlap %-3s: efficiency %s%s%n",
          key.get("placement"),
          on ? "on" : "off",
          fmt(eff, "%.3f"),
          on ? (eff >= 0.8 ? ": met" : ": NOT MET") : " (for comparison)");
    }
    if (!any) {
      System.out.println(
          "     not run (needs --models resnet, --links 2.5, --modes spark-1,spark-2)");
    }

    System.out.println(
        "  3. CNN at 1 Gbit/s: with overlap strictly faster than without (per placement):");
    any = false;
    for (Map<String, Object> key :
        configurations(
            ok,
            r ->
                "cnn".equals(r.get("model"))
                    && "spark-2".equals(r.get("mode"))
                    && link(r).equals("1")
                    && Boolean.TRUE.equals(r.get("overlap")))) {
      Map<String, Object> off = new LinkedHashMap<>(key);
      off.put("overlap", false);
      List<Map<String, Object>> offRuns = same(ok, off);
      if (offRuns.isEmpty()) {
        continue;
      }
      any = true;
      double on = median(same(ok, key).stream().map(r -> num(r, "samples_per_s")).toList());
      double without = median(offRuns.stream().map(r -> num(r, "samples_per_s")).toList());
      System.out.printf(
          Locale.ROOT,
          "     cnn %-6s: %.0f samples/s with overlap, %.0f without (%+.1f%%): %s%n",
          key.get("placement"),
          on,
          without,
          100 * (on / without - 1),
          on > without ? "met" : "NOT MET");
    }
    if (!any) {
      System.out.println("     not run (needs --models cnn, --links 1, --overlap off,on)");
    }

    System.out.println(
        "  4. 2 workers at least as fast as PyTorch DDP (gloo, 2 x 1 thread) on the same link"
            + " (the target is the CNN's; best spark-2 configuration, and each):");
    any = false;
    for (Map<String, Object> key : configurations(ok, r -> "torch-ddp-2".equals(r.get("mode")))) {
      double ddp = median(same(ok, key).stream().map(r -> num(r, "samples_per_s")).toList());
      String best = null;
      double bestRate = Double.NaN;
      StringBuilder each = new StringBuilder();
      for (Map<String, Object> k2 :
          configurations(
              ok,
              r ->
                  "spark-2".equals(r.get("mode"))
                      && key.get("model").equals(r.get("model"))
                      && link(r).equals(key.get("link_gbps")))) {
        double rate = median(same(ok, k2).stream().map(r -> num(r, "samples_per_s")).toList());
        String name =
            k2.get("placement")
                + "/overlap "
                + (Boolean.TRUE.equals(k2.get("overlap")) ? "on" : "off");
        each.append(String.format(Locale.ROOT, "; %s %.2fx", name, rate / ddp));
        if (!(rate <= bestRate)) {
          bestRate = rate;
          best = name;
        }
      }
      if (best == null) {
        continue;
      }
      any = true;
      System.out.printf(
          Locale.ROOT,
          "     %-6s %4s Gbit/s: PyTorch DDP %.0f samples/s, spark-2 best (%s) %.0f: %.2fx%s%s%n",
          key.get("model"),
          key.get("link_gbps"),
          ddp,
          best,
          bestRate,
          bestRate / ddp,
          each,
          "cnn".equals(key.get("model")) ? (bestRate >= ddp ? ": met" : ": NOT MET") : "");
    }
    if (!any) {
      System.out.println(
          "     not run (needs --modes spark-2,torch-ddp-2 and a python3 with torch)");
    }
  }

  /** The distinct (model, mode, overlap, placement, link) of the rows that pass {@code filter}. */
  private static List<Map<String, Object>> configurations(
      List<Map<String, Object>> rows, Predicate<Map<String, Object>> filter) {
    List<Map<String, Object>> keys = new ArrayList<>();
    for (Map<String, Object> r : rows) {
      if (filter.test(r)) {
        Map<String, Object> k = key(r);
        if (!keys.contains(k)) {
          keys.add(k);
        }
      }
    }
    return keys;
  }

  private static Map<String, Object> key(Map<String, Object> r) {
    Map<String, Object> k = new LinkedHashMap<>();
    for (String f : List.of("model", "mode", "overlap", "placement")) {
      k.put(f, r.get(f));
    }
    k.put("link_gbps", link(r));
    return k;
  }

  private static List<Map<String, Object>> same(
      List<Map<String, Object>> rows, Map<String, Object> key) {
    return rows.stream().filter(r -> key(r).equals(key)).toList();
  }

  /** The link as given ("1", "2.5"), "unl" for no limit. */
  private static String link(Map<String, Object> r) {
    Object v = r.get("link_gbps");
    if (v instanceof String s) {
      return s;
    }
    BigDecimal d = v instanceof BigDecimal b ? b : new BigDecimal(String.valueOf(v));
    return d.signum() == 0 ? "unl" : d.stripTrailingZeros().toPlainString();
  }
}
