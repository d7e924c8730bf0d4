package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.choice;
import static dev.sparktrainer.train.BenchSupport.list;
import static dev.sparktrainer.train.BenchSupport.num;
import static dev.sparktrainer.train.BenchSupport.options;
import static dev.sparktrainer.train.BenchSupport.perModel;
import static dev.sparktrainer.train.BenchSupport.positive;
import static dev.sparktrainer.train.BenchSupport.toJson;

import dev.sparktrainer.model.ResNetSpec;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * bin/bench-step: the training step alone, without Spark, data pipeline or checkpoints — {@link
 * ReplicaSet} + {@link TrainStep} as {@code TrainStepTest} drives them — on random data of the
 * models' shapes (generated once per process, fixed seed, in direct memory as the input pipeline
 * hands batches over). Not a test.
 *
 * <p>Configurations: every model ({@code mlp}: {@code MlpSpec.of(784, 10, 256, 128)}; {@code cnn}:
 * {@code CnnSpec.of(1, 28, 28, 10)}, both as bin/bench-train; {@code resnet50}: {@link ResNetSpec}
 * with 50 layers and 1000 classes) x workers (1, or 2 ranks in two JVMs whose ring runs over
 * loopback TCP) x optimizer placement ({@code device}, {@code host}), Adam at 1e-3. Each
 * configuration runs in child JVMs of its own (one per rank), so that one cannot disturb the next:
 * {@code --warmup} steps, then {@code --steps} timed steps. With {@code --baseline-jar}, every
 * configuration also runs against that build of spark-trainer (the jar first on the child's class
 * path) next to the current one, which of the two goes first alternating with {@code --rounds}.
 *
 * <p>ResNet-50's input: 3x224x224 with {@code --device gpu}; on CPU 3x64x64 and batch 16 by default
 * (about 1.4 s a step with one worker on a 2-core VM; DJL's ResNetV1 takes its ImageNet stem from
 * 33 pixels up), {@code --image} and {@code --batch resnet50=N} change them.
 *
 * <p>Per configuration one JSON line (and a table row): samples/s over all ranks, the step's phase
 * counters per step (rank 0), its tensor and bucket counts, and its ledger ({@code
 * TrainStep.ledger()}, read by reflection: {@code null} for a build that has none). With {@code
 * --python}, the 1-worker rows also get the same model and batch in PyTorch eager
 * (bin/torch-step.py, same thread count).
 *
 * <p>Args: {@code [--models mlp,cnn,resnet50] [--workers 1,2] [--placements device,host]
 * [--precisions fp32,bf16] [--device cpu|gpu] [--steps N|model=N,...] [--warmup N|model=N,...]
 * [--batch N|model=N,...] [--image 64] [--threads N] [--overlap on|off] [--image-transfer
 * float32|uint8] [--rounds 1] [--baseline-jar JAR] [--python PY --torch-script FILE] [--out FILE]
 * [--logs DIR] [--java-options "..."] [--timeout-min 20] [--phase-steps N] [--profile N]}. A child
 * runs {@code StepBenchmark child ...}.
 *
 * <p>{@code --phase-steps N} (default 10 on a GPU, 0 on CPU): N more steps after the timed ones,
 * each phase closed by a device synchronize ({@code phase_upload_ms}, {@code phase_compute_ms},
 * {@code phase_update_ms}; the anchor's {@code torch_phase_*} the same way): where a GPU's time
 * goes, which the host-timed phase counters cannot say. {@code --profile N}: N more steps of rank 0
 * under PyTorch's profiler, its trace in the logs folder ({@code NAME-profile.json}).
 *
 * <p>This class plans the configurations and pairs their rows; {@link StepConfig} runs one in child
 * JVMs ({@link StepBenchmarkChild}, the timed step loop), {@link StepTorchAnchor} the PyTorch
 * anchor, {@link StepReport} prints the table; {@link StepModels} holds the models and their data,
 * {@link StepCompat} the reflection on older builds.
 */
public final class StepBenchmark {
  private static final List<String> MODELS = List.of("mlp", "cnn", "resnet50");

  /** Models run only when named ({@code --models embed,transformer}). */
  private static final List<String> MORE_MODELS = StepModels.SEQUENCE;

  static final float LEARNING_RATE = 1e-3f;
  private static final int CPU_RESNET_SIDE = 64;
  private static final int GPU_RESNET_SIDE = 224;

  /** Defaults per model; ResNet-50's batch on CPU (64 on a GPU). */
  private static final Map<String, Integer> BATCH =
      Map.of("mlp", 64, "cnn", 64, "resnet50", 16, "embed", 32, "transformer", 32);

  // the sequence models' step counts are multiples of their 16 batch lengths
  private static final Map<String, Integer> CPU_STEPS =
      Map.of("mlp", 300, "cnn", 40, "resnet50", 8, "embed", 160, "transformer", 32);
  private static final Map<String, Integer> CPU_WARMUP =
      Map.of("mlp", 50, "cnn", 8, "resnet50", 2, "embed", 16, "transformer", 16);
  private static final Map<String, Integer> GPU_STEPS =
      Map.of("mlp", 500, "cnn", 300, "resnet50", 30, "embed", 320, "transformer", 160);
  private static final Map<String, Integer> GPU_WARMUP =
      Map.of("mlp", 50, "cnn", 30, "resnet50", 5, "embed", 32, "transformer", 16);

  private StepBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("child")) {
      System.exit(StepBenchmarkChild.run(options(Arrays.copyOfRange(args, 1, args.length))));
    }
    try {
      System.exit(run(options(args)));
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
    }
  }

  private static int run(Map<String, String> o) throws Exception {
    String device = choice(o, "device", "cpu", List.of("cpu", "gpu"));
    boolean gpu = device.equals("gpu");
    List<String> models =
        list(
            o,
            "models",
            String.join(",", MODELS),
            m -> MODELS.contains(m) || MORE_MODELS.contains(m) || StepModels.torchScript(m),
            "a comma-separated subset of "
                + String.join(",", MODELS)
                + ","
                + String.join(",", MORE_MODELS)
                + ","
                + String.join(",", StepModels.PRESETS)
                + ", or torchscript:FILE");
    List<String> known = new ArrayList<>(MODELS);
    known.addAll(MORE_MODELS);
    known.addAll(StepModels.PRESETS);
    models.stream().filter(m -> !known.contains(m)).forEach(known::add);
    List<String> workers = subset(o, "workers", "1,2", Set.of("1", "2"));
    List<String> placements = subset(o, "placements", "device,host", Set.of("device", "host"));
    List<String> precisions = subset(o, "precisions", "fp32", Set.of("fp32", "bf16"));
    Map<String, Integer> batch =
        perModel(o, "batch", defaults(gpu ? withResnet(BATCH, 64) : BATCH, known), known, false);
    Map<String, Integer> steps =
        perModel(o, "steps", defaults(gpu ? GPU_STEPS : CPU_STEPS, known), known, false);
    Map<String, Integer> warmup =
        perModel(o, "warmup", defaults(gpu ? GPU_WARMUP : CPU_WARMUP, known), known, true);
    int image =
        positive(o, "image", Integer.toString(gpu ? GPU_RESNET_SIDE : CPU_RESNET_SIDE), false);
    int threads =
        positive(o, "threads", Integer.toString(Runtime.getRuntime().availableProcessors()), false);
    boolean overlap = choice(o, "overlap", "on", List.of("on", "off")).equals("on");
    String imageTransfer = choice(o, "image-transfer", "float32", List.of("float32", "uint8"));
    int rounds = positive(o, "rounds", "1", false);
    // Phase by phase, each closed by a device synchronize: where a GPU's time goes (the timed
    // steps' own phase counters are host times, which a GPU's queued work makes meaningless).
    int phaseSteps = positive(o, "phase-steps", gpu ? "10" : "0", true);
    String profile = o.getOrDefault("profile", "");
    if (!profile.isEmpty() && !profile.matches("[0-9]+")) {
      throw new IllegalArgumentException(
          "Invalid --profile '" + profile + "': expected a step count (PyTorch's profiler trace)");
    }
    Duration timeout = Duration.ofMinutes(positive(o, "timeout-min", "20", false));
    Path out = Path.of(o.getOrDefault("out", "target/bench/step.jsonl")).toAbsolutePath();
    Path logs = Path.of(o.getOrDefault("logs", "target/bench/step")).toAbsolutePath();
    String baselineJar = o.get("baseline-jar");
    if (baselineJar != null && !Files.isRegularFile(Path.of(baselineJar))) {
      throw new IllegalArgumentException(
          "Invalid --baseline-jar '" + baselineJar + "': not a file (a spark-trainer jar)");
    }
    String python = o.getOrDefault("python", "");
    Path torchScript = o.containsKey("torch-script") ? Path.of(o.get("torch-script")) : null;
    Path tsDir =
        Path.of(o.getOrDefault("torchscript-dir", "target/bench/torchscript")).toAbsolutePath();
    List<String> javaOptions = new ArrayList<>();
    for (String s : o.getOrDefault("java-options", "").trim().split("\\s+")) {
      if (!s.isBlank()) {
        javaOptions.add(s);
      }
    }
    if (javaOptions.stream().noneMatch(s -> s.startsWith("-Dai.djl.offline"))) {
      javaOptions.add("-Dai.djl.offline=true");
    }
    if (baselineJar != null && imageTransfer.equals("uint8")) {
      throw new IllegalArgumentException(
          "Invalid --image-transfer uint8 with --baseline-jar: the baseline build has no uint8"
              + " transfer; compare --image-transfer float32 and uint8 in two runs of this build");
    }
    List<String> variants =
        baselineJar == null ? List.of("current") : List.of("baseline", "current");
    System.out.printf(
        Locale.ROOT,
        "Step benchmark on %s: %d thread(s) in all (a 2-worker run gives each rank %d), overlap %s,"
            + " Adam lr %s; child logs in %s%n",
        device,
        threads,
        Math.max(1, threads / 2),
        overlap ? "on" : "off",
        LEARNING_RATE,
        logs);
    if (baselineJar != null) {
      System.out.println("baseline: " + baselineJar + " first on the children's class path");
    }
    Files.createDirectories(logs);
    Map<String, String> files =
        StepTorchScripts.files(models, python, torchScript, tsDir, image, logs, timeout);
    for (String model : models) {
      System.out.printf(
          Locale.ROOT,
          "  %-11s %s, batch %d per worker, %d warm-up + %d timed steps%n",
          model,
          StepModels.describe(model, image, files.get(model)),
          batch.get(model),
          warmup.get(model),
          steps.get(model));
    }
    Files.createDirectories(out.getParent());
    List<Map<String, Object>> rows = new ArrayList<>();
    int failed = 0;
    try (PrintStream json =
        new PrintStream(
            Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND),
            true,
            StandardCharsets.UTF_8)) {
      for (String model : models) {
        String base = StepModels.base(model);
        List<Map<String, Object>> modelRows = new ArrayList<>();
        for (String w : workers) {
          int n = Integer.parseInt(w);
          for (String placement : placements) {
            for (String precision : precisions) {
              for (int round = 1; round <= rounds; round++) {
                // Alternating which variant goes first: whatever the previous child leaves
                // behind (a warmer or a busier machine) falls on both alike.
                List<String> order = new ArrayList<>(variants);
                if (round % 2 == 0) {
                  Collections.reverse(order);
                }
                for (String variant : order) {
                  StepConfig c =
                      new StepConfig(
                          model,
                          n,
                          placement,
                          variant,
                          device,
                          batch.get(model),
                          image,
                          steps.get(model),
                          warmup.get(model),
                          Math.max(1, threads / n),
                          overlap,
                          precision,
                          base == null || base.equals("mlp") || StepModels.sequence(base)
                              ? "float32"
                              : imageTransfer,
                          phaseSteps,
                          profile,
                          files.get(model));
                  Map<String, Object> row =
                      c.run(
                          variant.equals("baseline") ? baselineJar : null,
                          javaOptions,
                          logs,
                          timeout);
                  row.put("round", round);
                  System.err.println(toJson(row));
                  modelRows.add(row);
                }
              }
            }
          }
        }
        if (base == null && !python.isBlank() && workers.contains("1")) {
          System.out.println(
              "  "
                  + model
                  + ": no PyTorch anchor (no preset's eager module known for this file; the"
                  + " presets ts-mlp, ts-cnn, ts-resnet50 have theirs)");
        }
        if (base != null && !python.isBlank() && torchScript != null && workers.contains("1")) {
          for (String precision : precisions) {
            // bf16 rows are compared with PyTorch's autocast bf16 step
            Map<String, Object> anchor =
                StepTorchAnchor.run(
                    python,
                    torchScript,
                    model,
                    base,
                    device,
                    batch.get(model),
                    image,
                    steps.get(model),
                    warmup.get(model),
                    threads,
                    precision,
                    phaseSteps,
                    logs,
                    timeout);
            for (Map<String, Object> r : modelRows) {
              if (Integer.valueOf(1).equals(r.get("workers"))
                  && precision.equals(r.get("precision"))) {
                r.putAll(anchor);
                r.put("vs_torch", num(r, "samples_per_s") / num(anchor, "torch_samples_per_s"));
              }
            }
          }
        }
        for (Map<String, Object> r : modelRows) {
          if ("current".equals(r.get("step"))) {
            Map<String, Object> baseline = find(modelRows, r, "baseline");
            if (baseline != null) {
              r.put("vs_baseline", num(r, "samples_per_s") / num(baseline, "samples_per_s"));
            }
          }
          failed += r.containsKey("error") ? 1 : 0;
          json.println(toJson(r));
          rows.add(r);
        }
      }
    }
    StepReport.printTable(rows);
    System.out.println("JSON lines appended to " + out);
    return failed == 0 ? 0 : 1;
  }

  /**
   * {@code --name}: a comma-separated subset of {@code allowed}; the message names {@code dflt}.
   */
  private static List<String> subset(
      Map<String, String> o, String name, String dflt, Collection<String> allowed) {
    return list(o, name, dflt, allowed::contains, "a comma-separated subset of " + dflt);
  }

  /**
   * The defaults of every model in {@code models}: a preset's those of its built-in model, a {@code
   * torchscript:FILE}'s those of the CNN.
   */
  private static Map<String, Integer> defaults(Map<String, Integer> m, List<String> models) {
    Map<String, Integer> d = new LinkedHashMap<>();
    for (String model : models) {
      String base = StepModels.base(model);
      d.put(model, m.get(base == null ? "cnn" : base));
    }
    return d;
  }

  private static Map<String, Integer> withResnet(Map<String, Integer> m, int resnetBatch) {
    Map<String, Integer> copy = new LinkedHashMap<>(m);
    copy.put("resnet50", resnetBatch);
    return copy;
  }

  /** The row of the same model, workers, placement and round for the other step variant. */
  private static Map<String, Object> find(
      List<Map<String, Object>> rows, Map<String, Object> like, String step) {
    for (Map<String, Object> r : rows) {
      if (step.equals(r.get("step"))
          && like.get("workers").equals(r.get("workers"))
          && like.get("placement").equals(r.get("placement"))
          && java.util.Objects.equals(like.get("precision"), r.get("precision"))
          && like.get("round").equals(r.get("round"))
          && !r.containsKey("error")) {
        return r;
      }
    }
    return null;
  }
}
