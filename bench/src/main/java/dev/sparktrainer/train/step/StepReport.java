package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.fmt;
import static dev.sparktrainer.train.BenchSupport.num;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The table of bin/bench-step: one row per model, workers, placement, precision and step variant
 * (its fastest round), the legend, and the PyTorch anchor's line per model.
 */
final class StepReport {
  private StepReport() {}

  /**
   * One table row per model, workers, placement and step variant: its fastest round (on a shared
   * machine, the least disturbed; every round is in the JSON lines), with the median of the rounds
   * and the ratios of the fastest rounds; a failed row where no round succeeded.
   */
  private static List<Map<String, Object>> best(List<Map<String, Object>> rows) {
    Map<String, List<Map<String, Object>>> byKey = new LinkedHashMap<>();
    for (Map<String, Object> r : rows) {
      String key = r.get("model") + "/" + r.get("workers") + "/" + place(r) + "/" + r.get("step");
      byKey.computeIfAbsent(key, k -> new ArrayList<>()).add(r);
    }
    Map<String, Map<String, Object>> best = new LinkedHashMap<>();
    byKey.forEach(
        (key, runs) -> {
          List<Map<String, Object>> ok =
              runs.stream().filter(r -> !r.containsKey("error")).toList();
          if (ok.isEmpty()) {
            best.put(key, runs.get(runs.size() - 1));
            return;
          }
          double[] v = ok.stream().mapToDouble(r -> num(r, "samples_per_s")).sorted().toArray();
          Map<String, Object> b =
              new LinkedHashMap<>(
                  ok.stream()
                      .max(Comparator.comparingDouble(r -> num(r, "samples_per_s")))
                      .orElseThrow());
          b.put("table_runs", ok.size());
          b.put(
              "table_median",
              v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2);
          b.put("vs_torch", num(b, "samples_per_s") / num(b, "torch_samples_per_s"));
          best.put(key, b);
        });
    best.forEach(
        (key, b) -> {
          Map<String, Object> base = best.get(key.substring(0, key.lastIndexOf('/')) + "/baseline");
          if ("current".equals(b.get("step")) && base != null && !base.containsKey("error")) {
            b.put("vs_baseline", num(b, "samples_per_s") / num(base, "samples_per_s"));
          } else {
            b.remove("vs_baseline");
          }
        });
    return new ArrayList<>(best.values());
  }

  /** The placement, and the precision when not fp32: {@code device}, {@code device/bf16}. */
  private static String place(Map<String, Object> r) {
    Object p = r.get("precision");
    return r.get("placement") + (p == null || "fp32".equals(p) ? "" : "/" + p);
  }

  /** The model's name in the table: {@code torchscript:/a/b.pt} as {@code ts:b.pt}. */
  private static String display(Map<String, Object> r) {
    String m = String.valueOf(r.get("model"));
    return m.startsWith(StepModels.FILE_PREFIX)
        ? "ts:" + java.nio.file.Path.of(m.substring(StepModels.FILE_PREFIX.length())).getFileName()
        : m;
  }

  static void printTable(List<Map<String, Object>> all) {
    List<Map<String, Object>> rows = best(all);
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "%-12s %-8s %-3s %1s %-6s %5s %4s %10s %10s %8s %8s %8s %8s %8s %8s %8s %8s %7s %5s %8s"
            + " %8s %8s %8s %8s %11s %11s%n",
        "model",
        "step",
        "dev",
        "w",
        "place",
        "batch",
        "runs",
        "samples/s",
        "median",
        "cur/base",
        "vs_torch",
        "step_ms",
        "compute",
        "backward",
        "exposed",
        "comm",
        "optim",
        "tensors",
        "bkts",
        "calls",
        "c_optim",
        "c_wback",
        "c_grads",
        "c_other",
        "B_to_dev",
        "B_to_host");
    for (Map<String, Object> r : rows) {
      if (r.containsKey("error")) {
        System.out.printf(
            Locale.ROOT,
            "%-12s %-8s %-3s %1s %-6s %5s FAILED: %s%n",
            display(r),
            r.get("step"),
            r.get("device"),
            r.get("workers"),
            place(r),
            r.get("batch"),
            r.get("error"));
        continue;
      }
      System.out.printf(
          Locale.ROOT,
          "%-12s %-8s %-3s %1s %-6s %5s %4s %10.1f %10.1f %8s %8s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f"
              + " %7s %5s %8s %8s %8s %8s %8s %11s %11s%n",
          display(r),
          r.get("step"),
          r.get("device"),
          r.get("workers"),
          place(r),
          r.get("batch"),
          r.get("table_runs"),
          num(r, "samples_per_s"),
          num(r, "table_median"),
          fmt(num(r, "vs_baseline"), "%.2fx"),
          fmt(num(r, "vs_torch"), "%.2fx"),
          num(r, "step_ms"),
          num(r, "compute_ms"),
          num(r, "backward_ms"),
          num(r, "exposed_ms"),
          num(r, "communication_ms"),
          num(r, "optimizer_ms"),
          r.get("tensors"),
          fmt(num(r, "buckets"), "%.0f"),
          fmt(num(r, "engine_calls_per_step"), "%.0f"),
          fmt(num(r, "engine_calls_optimizer"), "%.0f"),
          fmt(num(r, "engine_calls_writeback"), "%.0f"),
          fmt(num(r, "engine_calls_gradients"), "%.0f"),
          fmt(num(r, "engine_calls_other"), "%.0f"),
          fmt(num(r, "bytes_to_device_per_step"), "%.0f"),
          fmt(num(r, "bytes_to_host_per_step"), "%.0f"));
    }
    System.out.println(
        "samples/s: all ranks' samples over the slowest rank's time, the fastest of the rounds"
            + " (median: of all rounds); the other columns are that round's; cur/base: current /"
            + " baseline samples/s (--baseline-jar); vs_torch: samples/s / PyTorch eager with"
            + " per-tensor Adam (1 worker); step_ms and the phases (compute = forward + backward"
            + " + gradient copies; backward; exposed = waiting for the ring; comm = all-reduce time,"
            + " hidden or not; optim): ms per step, rank 0. calls, c_*: the ledger's engine calls per"
            + " step (all; optimizer, writeback, gradients, other); B_to_*: bytes per step between"
            + " device and host; '-': no ledger in that build. ts-*: bin/torch-step.py's module"
            + " scripted (python/export_torchscript.py), trained as torchscript:FILE, vs_torch"
            + " against the same module in PyTorch eager.");
    Set<Object> anchored = new HashSet<>();
    for (Map<String, Object> r : rows) {
      if (r.containsKey("torch_error") && anchored.add(r.get("model"))) {
        System.out.println("PyTorch " + r.get("model") + ": failed: " + r.get("torch_error"));
      } else if (r.containsKey("torch_samples_per_s") && anchored.add(r.get("model"))) {
        System.out.printf(
            Locale.ROOT,
            "PyTorch eager %s on %s, batch %s: %.1f samples/s with per-tensor Adam, %.1f with %s"
                + " Adam (torch %s, %s thread(s), BLAS %s)%n",
            r.get("model"),
            r.get("device"),
            r.get("batch"),
            num(r, "torch_samples_per_s"),
            num(r, "torch_multi_samples_per_s"),
            r.get("torch_multi_adam"),
            r.get("torch_version"),
            r.get("torch_threads"),
            r.get("torch_blas"));
      }
    }
  }
}
