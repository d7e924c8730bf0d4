package dev.sparktrainer.train.step;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The TorchScript files of bin/bench-step's TorchScript rows: a preset ({@code ts-mlp}, {@code
 * ts-cnn}, {@code ts-resnet50}) is bin/torch-step.py's own eager module (its {@code build()}, seed
 * 0) written by python/export_torchscript.py ({@code torch-step.py --export-torchscript FILE}) into
 * the TorchScript folder ({@code mlp.pt}, {@code cnn.pt}, {@code resnet50-SIDE.pt}), reused while
 * it is newer than both scripts; {@code torchscript:FILE} is that file.
 */
final class StepTorchScripts {
  private StepTorchScripts() {}

  /** Model to file, for the TorchScript ones among {@code models}. */
  static Map<String, String> files(
      List<String> models,
      String python,
      Path torchStep,
      Path dir,
      int image,
      Path logs,
      Duration timeout)
      throws IOException, InterruptedException {
    Map<String, String> files = new LinkedHashMap<>();
    for (String model : models) {
      if (!StepModels.torchScript(model)) {
        continue;
      }
      String base = StepModels.base(model);
      if (base == null) {
        Path f = Path.of(model.substring(StepModels.FILE_PREFIX.length())).toAbsolutePath();
        if (!Files.isRegularFile(f)) {
          throw new IllegalArgumentException("Invalid --models " + model + ": no such file");
        }
        files.put(model, f.toString());
        continue;
      }
      Path f = dir.resolve(base + (base.equals("resnet50") ? "-" + image : "") + ".pt");
      Path exporter = torchStep == null ? null : torchStep.toAbsolutePath().getParent();
      exporter = exporter == null ? null : exporter.resolveSibling("python/export_torchscript.py");
      if (!fresh(f, torchStep, exporter)) {
        if (python.isBlank() || torchStep == null) {
          throw new IllegalArgumentException(
              "Invalid --models "
                  + model
                  + ": "
                  + f
                  + " is missing or older than its scripts, and writing it takes a python3 with"
                  + " torch (--python, --torch-script bin/torch-step.py)");
        }
        export(python, torchStep, base, image, f, logs, timeout);
      }
      files.put(model, f.toString());
    }
    return files;
  }

  private static boolean fresh(Path f, Path... sources) throws IOException {
    if (!Files.isRegularFile(f)) {
      return false;
    }
    for (Path s : sources) {
      if (s != null
          && Files.exists(s)
          && Files.getLastModifiedTime(s).compareTo(Files.getLastModifiedTime(f)) > 0) {
        return false;
      }
    }
    return true;
  }

  private static void export(
      String python, Path torchStep, String base, int image, Path f, Path logs, Duration timeout)
      throws IOException, InterruptedException {
    Files.createDirectories(f.getParent());
    Path log = logs.resolve("export-" + f.getFileName() + ".log");
    System.out.println(
        "  writing " + f + " (bin/torch-step.py --export-torchscript; log " + log + ")");
    Process p =
        new ProcessBuilder(
                python,
                torchStep.toString(),
                "--model",
                base,
                "--image",
                Integer.toString(image),
                "--export-torchscript",
                f.toString())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
    try {
      if (!p.waitFor(timeout.toSeconds(), TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException(
            "writing "
                + f
                + " failed; "
                + log
                + " ends: "
                + String.join(" | ", tail(Files.readAllLines(log), 8)));
      }
    } finally {
      p.destroy();
    }
  }

  private static List<String> tail(List<String> lines, int n) {
    return lines.subList(Math.max(0, lines.size() - n), lines.size());
  }
}
