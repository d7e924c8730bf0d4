package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.loadAverage;
import static dev.sparktrainer.train.BenchSupport.num;
import static dev.sparktrainer.train.BenchSupport.parseFlatJson;

import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.train.BenchChild;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One configuration of bin/bench-step's plan (model, workers, placement, precision, step variant
 * and the settings every rank gets), and its run: one child JVM per rank ({@code StepBenchmark
 * child ...}, {@link StepBenchmarkChild}), their ring's rendezvous through this process, one row
 * from their {@code RESULT} lines.
 */
record StepConfig(
    String model,
    int workers,
    String placement,
    String step,
    String device,
    int batch,
    int image,
    int steps,
    int warmup,
    int threads,
    boolean overlap,
    String precision,
    String imageTransfer,
    int phaseSteps,
    String profile,
    String modelFile) {
  String name() {
    return StepModels.fileName(model)
        + "-w"
        + workers
        + "-"
        + placement
        + (precision.equals("fp32") ? "" : "-" + precision)
        + "-"
        + step
        + (imageTransfer.equals("uint8") ? "-uint8" : "");
  }

  /**
   * Runs this configuration: one child JVM per rank (their ring's rendezvous through this process,
   * as {@code ProcessRing} does in the tests), each printing {@code RESULT json}; every child is
   * stopped by process id when it is done, fails or times out.
   */
  Map<String, Object> run(
      String baselineJar, List<String> javaOptions, Path logs, Duration timeout) {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("bench", "step");
    row.put("model", model());
    row.put("step", step());
    row.put("device", device());
    row.put("workers", workers());
    row.put("placement", placement());
    row.put("precision", precision());
    row.put("batch", batch());
    if ("resnet50".equals(StepModels.base(model()))) {
      row.put("image", image());
    }
    if (modelFile() != null) {
      row.put("model_file", modelFile());
    }
    row.put("threads_per_worker", threads());
    row.put("overlap", overlap());
    row.put("image_transfer", imageTransfer());
    row.put("steps", steps());
    row.put("warmup", warmup());
    if (baselineJar != null) {
      row.put("baseline_jar", baselineJar);
    }
    row.put("load_avg_before", loadAverage());
    long t0 = System.nanoTime();
    String classPath =
        (baselineJar == null ? "" : baselineJar + ":") + System.getProperty("java.class.path");
    JobSecret secret = JobSecret.generate();
    List<BenchChild> children = new ArrayList<>();
    try {
      for (int r = 0; r < workers(); r++) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(javaOptions);
        cmd.add("-cp");
        cmd.add(classPath);
        cmd.add(StepBenchmark.class.getName());
        cmd.addAll(
            List.of(
                "child",
                "--model",
                model(),
                "--rank",
                Integer.toString(r),
                "--workers",
                Integer.toString(workers()),
                "--placement",
                placement(),
                "--device",
                device(),
                "--batch",
                Integer.toString(batch()),
                "--image",
                Integer.toString(image()),
                "--steps",
                Integer.toString(steps()),
                "--warmup",
                Integer.toString(warmup()),
                "--threads",
                Integer.toString(threads()),
                "--overlap",
                overlap() ? "on" : "off",
                "--precision",
                precision(),
                "--image-transfer",
                imageTransfer(),
                "--phase-steps",
                Integer.toString(phaseSteps())));
        if (modelFile() != null) {
          cmd.addAll(List.of("--model-file", modelFile()));
        }
        if (!profile().isEmpty()) {
          // Every rank runs the profiled steps (their all-reduces need each other); rank 0 alone
          // is traced.
          cmd.addAll(List.of("--profile", profile()));
          if (r == 0) {
            cmd.addAll(List.of("--profile-out", logs.resolve(name() + "-profile.json").toString()));
          }
        }
        children.add(
            BenchChild.start(
                cmd,
                Map.of(StepBenchmarkChild.SECRET_ENV, secret.toHex()),
                logs.resolve(name() + "-rank" + r + ".log")));
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      if (workers() > 1) {
        List<String> peers = new ArrayList<>();
        for (BenchChild ch : children) {
          peers.add(ch.awaitLine(l -> l.startsWith("ADDR "), deadline).substring(5));
        }
        for (BenchChild ch : children) {
          ch.send("PEERS " + String.join(",", peers));
        }
      }
      List<Map<String, Object>> results = new ArrayList<>();
      for (BenchChild ch : children) {
        results.add(
            parseFlatJson(ch.awaitLine(l -> l.startsWith("RESULT "), deadline).substring(7)));
      }
      row.putAll(combine(results));
    } catch (Exception e) {
      row.put("error", String.valueOf(e.getMessage()).replace('\n', ' '));
      System.err.println(name() + " failed: " + e.getMessage());
      for (BenchChild ch : children) {
        System.err.println("  " + ch.log + " ends:\n" + ch.tail(25));
      }
    } finally {
      for (BenchChild ch : children) {
        ch.stop();
      }
    }
    row.put("wall_s", (System.nanoTime() - t0) / 1e9);
    row.put("load_avg_after", loadAverage());
    row.put("omp_wait_policy", String.valueOf(System.getenv("OMP_WAIT_POLICY")));
    row.put("time", Instant.now().toString());
    return row;
  }

  /**
   * One row from the ranks' results: samples/s over all ranks (every rank's samples over the
   * slowest rank's time), everything else from rank 0.
   */
  private Map<String, Object> combine(List<Map<String, Object>> ranks) {
    Map<String, Object> r = new LinkedHashMap<>(ranks.get(0));
    double seconds = 0;
    for (Map<String, Object> x : ranks) {
      seconds = Math.max(seconds, num(x, "seconds"));
    }
    double samples = (double) workers() * batch() * steps();
    r.remove("seconds");
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("samples_per_s", samples / seconds);
    out.put("step_ms", 1e3 * seconds / steps());
    out.putAll(r);
    return out;
  }
}
