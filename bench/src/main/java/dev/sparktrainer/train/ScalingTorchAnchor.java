package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.loadAverage;
import static dev.sparktrainer.train.BenchSupport.num;
import static dev.sparktrainer.train.BenchSupport.toJson;

import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The PyTorch anchor of bin/bench-scaling: per model and round, torch-1 and torch-ddp-2 runs of
 * bin/torch-train.py ({@link TorchTrain}) inside the benchmark's namespace, on the same link.
 */
final class ScalingTorchAnchor {
  private ScalingTorchAnchor() {}

  /**
   * The PyTorch anchor of one model (bin/torch-train.py: the same examples, batch, steps and epochs
   * in PyTorch eager with Adam): per round, torch-1 (one process, one thread) on the unlimited
   * link, then torch-ddp-2 (DistributedDataParallel over gloo, 2 processes x 1 thread, the same
   * cores as the cluster's 2 executors) per link. Its processes run in this namespace, so their
   * all-reduce crosses the same rate-limited loopback as the ring's. Rows as {@link
   * ScalingReport#finish}'s, with placement "torch"; each is written to {@code json} as it ends.
   */
  static List<Map<String, Object>> run(
      Map<String, String> o,
      ScalingSetup s,
      Path data,
      int epochs,
      List<String> modes,
      List<String> links,
      int rounds,
      String linkCommand,
      PrintStream json)
      throws Exception {
    List<Map<String, Object>> rows = new ArrayList<>();
    if (!modes.contains("torch-1") && !modes.contains("torch-ddp-2")) {
      return rows;
    }
    if (s.model().equals("resnet")) {
      System.err.println(
          "no PyTorch anchor for resnet: the trainer's 36x36 ResNetV1 has no torch twin in"
              + " bin/torch-step.py");
      return rows;
    }
    Path logs = Path.of(o.getOrDefault("work", "target/bench/scaling")).resolve("torch-logs");
    Files.createDirectories(logs);
    for (int round = 1; round <= rounds; round++) {
      List<String[]> plan = new ArrayList<>();
      if (modes.contains("torch-1")) {
        plan.add(new String[] {"torch-1", "0"});
      }
      if (modes.contains("torch-ddp-2")) {
        for (String link : links) {
          plan.add(new String[] {"torch-ddp-2", link});
        }
      }
      for (String[] run : plan) {
        ScalingLink.setLink(linkCommand, run[1]);
        int world = run[0].equals("torch-1") ? 1 : 2;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("model", s.model());
        r.put("params", s.params());
        r.put("mode", run[0]);
        r.put("workers", world);
        r.put("overlap", true);
        r.put("placement", "torch");
        r.put("link_gbps", new BigDecimal(run[1]));
        double before = loadAverage();
        try {
          Map<String, Object> t =
              TorchTrain.run(
                  o.get("python"),
                  o.get("torch-script"),
                  data,
                  s.model(),
                  s.batch(),
                  s.steps(),
                  epochs,
                  1,
                  world,
                  logs,
                  s.model() + "-w" + world + "-round" + round,
                  Duration.ofMinutes(Long.parseLong(o.getOrDefault("app-timeout-min", "60"))));
          r.put("samples_per_s", t.get("samples_per_s"));
          r.put("step_ms", t.get("step_ms"));
          r.put("measured_epochs", t.get("measured_epochs"));
          r.put("torch_version", t.get("torch"));
          r.put("torch_backend", t.get("backend"));
        } catch (Exception e) {
          r.put("error", String.valueOf(e.getMessage()).replace('\n', ' '));
        }
        r.put("batch", s.batch());
        r.put("steps", s.steps());
        r.put("epochs", epochs);
        r.put("round", round);
        r.put("load_avg_before", before);
        r.put("load_avg_after", loadAverage());
        r.put("omp_wait_policy", String.valueOf(System.getenv("OMP_WAIT_POLICY")));
        r.put("time", Instant.now().toString());
        rows.add(r);
      }
      ScalingLink.setLink(linkCommand, "0");
    }
    for (Map<String, Object> r : rows) {
      if (r.get("mode").equals("torch-ddp-2") && !r.containsKey("error")) {
        double base = Double.NaN;
        for (Map<String, Object> b : rows) {
          if (b.get("mode").equals("torch-1")
              && b.get("round").equals(r.get("round"))
              && !b.containsKey("error")) {
            base = num(b, "samples_per_s");
          }
        }
        r.put("scaling_efficiency", num(r, "samples_per_s") / (2 * base));
      }
      json.println(toJson(r));
    }
    return rows;
  }
}
