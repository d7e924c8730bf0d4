package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.parseFlatJson;

import dev.sparktrainer.train.BenchChild;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The PyTorch anchor of bin/bench-step: the same model and batch in PyTorch eager
 * (bin/torch-step.py), one process started and stopped by process id. A TorchScript preset's anchor
 * is the eager module its file was scripted from ({@code ts-cnn}: {@code --model cnn}).
 */
final class StepTorchAnchor {
  private StepTorchAnchor() {}

  /**
   * The same model and batch in PyTorch eager (bin/torch-step.py) with per-tensor and multi-tensor
   * Adam: {@code torch_*} fields, or {@code torch_error}.
   */
  static Map<String, Object> run(
      String python,
      Path script,
      String model,
      String eager,
      String device,
      int batch,
      int image,
      int steps,
      int warmup,
      int threads,
      String precision,
      int phaseSteps,
      Path logs,
      Duration timeout) {
    Map<String, Object> a = new LinkedHashMap<>();
    List<String> cmd =
        List.of(
            python,
            script.toString(),
            "--model",
            eager,
            "--device",
            device,
            "--batch",
            Integer.toString(batch),
            "--image",
            Integer.toString(image),
            "--steps",
            Integer.toString(steps),
            "--warmup",
            Integer.toString(warmup),
            "--threads",
            Integer.toString(threads),
            "--adam",
            "per-tensor,multi",
            "--watch-stdin",
            "--precision",
            precision,
            "--phase-steps",
            Integer.toString(phaseSteps));
    BenchChild ch = null;
    try {
      ch =
          BenchChild.start(
              cmd,
              Map.of(),
              logs.resolve(StepModels.fileName(model) + "-" + precision + "-torch.log"));
      long deadline = System.nanoTime() + timeout.toNanos();
      for (int i = 0; i < 2; i++) {
        Map<String, Object> j =
            parseFlatJson(ch.awaitLine(l -> l.startsWith("{\"anchor\""), deadline));
        if ("per-tensor".equals(j.get("variant"))) {
          a.put("torch_samples_per_s", j.get("samples_per_s"));
          a.put("torch_version", j.get("torch"));
          a.put("torch_threads", j.get("threads"));
          a.put("torch_params", j.get("params"));
          a.put("torch_tensors", j.get("tensors"));
          a.put("torch_blas", j.get("blas"));
          for (String k : List.of("phase_upload_ms", "phase_fwdbwd_ms", "phase_optim_ms")) {
            if (j.containsKey(k)) {
              a.put("torch_" + k, j.get(k));
            }
          }
        } else {
          a.put("torch_multi_samples_per_s", j.get("samples_per_s"));
          a.put("torch_multi_adam", j.get("adam"));
        }
      }
    } catch (Exception e) {
      a.put("torch_error", String.valueOf(e.getMessage()).replace('\n', ' '));
      System.err.println("PyTorch anchor for " + model + " failed: " + e.getMessage());
      if (ch != null) {
        System.err.println("  " + ch.log + " ends:\n" + ch.tail(25));
      }
    } finally {
      if (ch != null) {
        ch.stop();
      }
    }
    return a;
  }
}
