package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.choice;
import static dev.sparktrainer.train.BenchSupport.fmt;
import static dev.sparktrainer.train.BenchSupport.list;
import static dev.sparktrainer.train.BenchSupport.loadAverage;
import static dev.sparktrainer.train.BenchSupport.num;
import static dev.sparktrainer.train.BenchSupport.options;
import static dev.sparktrainer.train.BenchSupport.orderedMap;
import static dev.sparktrainer.train.BenchSupport.parseFlatJson;
import static dev.sparktrainer.train.BenchSupport.perModel;
import static dev.sparktrainer.train.BenchSupport.positive;
import static dev.sparktrainer.train.BenchSupport.required;
import static dev.sparktrainer.train.BenchSupport.toJson;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.collective.RingListener;
import dev.sparktrainer.data.Batch;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.BenchChild;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.TrainBenchmark;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * bin/bench-step: the training step alone, without Spark, data pipeline or checkpoints — {@link
 * ReplicaSet} + {@link TrainStep} as {@code TrainStepTest} drives them — on random data of the
 * models' shapes (generated once per process, fixed seed, in direct memory as the input pipeline
 * hands batches over). Not a test.
 *
 * <p>Why this file is long: parent and child in one class. The parent plans the configurations,
 * starts a child JVM per rank ({@code StepBenchmark child}, rendezvous over ADDR/PEERS lines), runs
 * the PyTorch anchor, pairs current and {@code --baseline-jar} rows and prints the table and JSON
 * lines; the child is the timed step loop and needs this package ({@link TrainStep}'s
 * package-private constructors, {@link ReplicaSet}'s fields). Both share the option names and the
 * RESULT keys. Its reflection shims for older builds could move out if they grow.
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
 */
public final class StepBenchmark {
  private static final List<String> MODELS = List.of("mlp", "cnn", "resnet50");
  private static final float LEARNING_RATE = 1e-3f;
  private static final int INIT_SEED = 7;
  private static final int CPU_RESNET_SIDE = 64;
  private static final int GPU_RESNET_SIDE = 224;

  /** Defaults per model; ResNet-50's batch on CPU (64 on a GPU). */
  private static final Map<String, Integer> BATCH = Map.of("mlp", 64, "cnn", 64, "resnet50", 16);

  private static final Map<String, Integer> CPU_STEPS =
      Map.of("mlp", 300, "cnn", 40, "resnet50", 8);
  private static final Map<String, Integer> CPU_WARMUP = Map.of("mlp", 50, "cnn", 8, "resnet50", 2);
  private static final Map<String, Integer> GPU_STEPS =
      Map.of("mlp", 500, "cnn", 300, "resnet50", 30);
  private static final Map<String, Integer> GPU_WARMUP =
      Map.of("mlp", 50, "cnn", 30, "resnet50", 5);

  /** The ledger's totals, their JSON names (per step). */
  private static final Map<String, String> LEDGER =
      orderedMap(
          "optimizerCalls", "engine_calls_optimizer",
          "writebackCalls", "engine_calls_writeback",
          "gradientCalls", "engine_calls_gradients",
          "otherCalls", "engine_calls_other",
          "bytesToDevice", "bytes_to_device_per_step",
          "bytesToHost", "bytes_to_host_per_step",
          "heapUploads", "heap_uploads_per_step",
          "deviceAllocations", "device_allocations_per_step");

  private static final String SECRET_ENV = "SPARK_TRAINER_RING_SECRET";

  private StepBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("child")) {
      System.exit(child(options(Arrays.copyOfRange(args, 1, args.length))));
    }
    try {
      System.exit(run(options(args)));
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // the parent: the plan, the children, the anchor, the table

  /** One configuration's settings. */
  private record Config(
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
      String profile) {
    String name() {
      return model
          + "-w"
          + workers
          + "-"
          + placement
          + (precision.equals("fp32") ? "" : "-" + precision)
          + "-"
          + step
          + (imageTransfer.equals("uint8") ? "-uint8" : "");
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
            MODELS::contains,
            "a comma-separated subset of " + String.join(",", MODELS));
    List<String> workers =
        list(o, "workers", "1,2", Set.of("1", "2")::contains, "a comma-separated subset of 1,2");
    List<String> placements =
        list(
            o,
            "placements",
            "device,host",
            Set.of("device", "host")::contains,
            "a comma-separated subset of device,host");
    List<String> precisions =
        list(
            o,
            "precisions",
            "fp32",
            Set.of("fp32", "bf16")::contains,
            "a comma-separated subset of fp32");
    Map<String, Integer> batch =
        perModel(o, "batch", gpu ? withResnet(BATCH, 64) : BATCH, MODELS, false);
    Map<String, Integer> steps = perModel(o, "steps", gpu ? GPU_STEPS : CPU_STEPS, MODELS, false);
    Map<String, Integer> warmup =
        perModel(o, "warmup", gpu ? GPU_WARMUP : CPU_WARMUP, MODELS, true);
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
    for (String model : models) {
      System.out.printf(
          Locale.ROOT,
          "  %-8s %s, batch %d per worker, %d warm-up + %d timed steps%n",
          model,
          describe(model, image),
          batch.get(model),
          warmup.get(model),
          steps.get(model));
    }
    Files.createDirectories(out.getParent());
    Files.createDirectories(logs);
    List<Map<String, Object>> rows = new ArrayList<>();
    int failed = 0;
    try (PrintStream json =
        new PrintStream(
            Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND),
            true,
            StandardCharsets.UTF_8)) {
      for (String model : models) {
        List<Map<String, Object>> modelRows = new ArrayList<>();
        for (String w : workers) {
          int n = Integer.parseInt(w);
          for (String placement : placements) {
            for (String precision : precisions) {
              for (int round = 1; round <= rounds; round++) {
                // Alternating which variant goes first: whatever the previous child leaves behind
                // (a
                // warmer or a busier machine) falls on both alike.
                List<String> order = new ArrayList<>(variants);
                if (round % 2 == 0) {
                  Collections.reverse(order);
                }
                for (String variant : order) {
                  Config c =
                      new Config(
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
                          model.equals("mlp") ? "float32" : imageTransfer,
                          phaseSteps,
                          profile);
                  Map<String, Object> row =
                      runConfig(
                          c,
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
        if (!python.isBlank() && torchScript != null && workers.contains("1")) {
          for (String precision : precisions) {
            // bf16 rows are compared with PyTorch's autocast bf16 step
            Map<String, Object> anchor =
                torchAnchor(
                    python,
                    torchScript,
                    model,
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
            Map<String, Object> base = find(modelRows, r, "baseline");
            if (base != null) {
              r.put("vs_baseline", num(r, "samples_per_s") / num(base, "samples_per_s"));
            }
          }
          failed += r.containsKey("error") ? 1 : 0;
          json.println(toJson(r));
          rows.add(r);
        }
      }
    }
    printTable(rows);
    System.out.println("JSON lines appended to " + out);
    return failed == 0 ? 0 : 1;
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

  /**
   * Runs one configuration: one child JVM per rank (their ring's rendezvous through this process,
   * as {@code ProcessRing} does in the tests), each printing {@code RESULT json}; every child is
   * stopped by process id when it is done, fails or times out.
   */
  private static Map<String, Object> runConfig(
      Config c, String baselineJar, List<String> javaOptions, Path logs, Duration timeout) {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("bench", "step");
    row.put("model", c.model());
    row.put("step", c.step());
    row.put("device", c.device());
    row.put("workers", c.workers());
    row.put("placement", c.placement());
    row.put("precision", c.precision());
    row.put("batch", c.batch());
    if (c.model().equals("resnet50")) {
      row.put("image", c.image());
    }
    row.put("threads_per_worker", c.threads());
    row.put("overlap", c.overlap());
    row.put("image_transfer", c.imageTransfer());
    row.put("steps", c.steps());
    row.put("warmup", c.warmup());
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
      for (int r = 0; r < c.workers(); r++) {
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
                c.model(),
                "--rank",
                Integer.toString(r),
                "--workers",
                Integer.toString(c.workers()),
                "--placement",
                c.placement(),
                "--device",
                c.device(),
                "--batch",
                Integer.toString(c.batch()),
                "--image",
                Integer.toString(c.image()),
                "--steps",
                Integer.toString(c.steps()),
                "--warmup",
                Integer.toString(c.warmup()),
                "--threads",
                Integer.toString(c.threads()),
                "--overlap",
                c.overlap() ? "on" : "off",
                "--precision",
                c.precision(),
                "--image-transfer",
                c.imageTransfer(),
                "--phase-steps",
                Integer.toString(c.phaseSteps())));
        if (!c.profile().isEmpty() && r == 0) {
          cmd.addAll(
              List.of(
                  "--profile",
                  c.profile(),
                  "--profile-out",
                  logs.resolve(c.name() + "-profile.json").toString()));
        }
        children.add(
            BenchChild.start(
                cmd,
                Map.of(SECRET_ENV, secret.toHex()),
                logs.resolve(c.name() + "-rank" + r + ".log")));
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      if (c.workers() > 1) {
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
      row.putAll(combine(results, c));
    } catch (Exception e) {
      row.put("error", String.valueOf(e.getMessage()).replace('\n', ' '));
      System.err.println(c.name() + " failed: " + e.getMessage());
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
  private static Map<String, Object> combine(List<Map<String, Object>> ranks, Config c) {
    Map<String, Object> r = new LinkedHashMap<>(ranks.get(0));
    double seconds = 0;
    for (Map<String, Object> x : ranks) {
      seconds = Math.max(seconds, num(x, "seconds"));
    }
    double samples = (double) c.workers() * c.batch() * c.steps();
    r.remove("seconds");
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("samples_per_s", samples / seconds);
    out.put("step_ms", 1e3 * seconds / c.steps());
    out.putAll(r);
    return out;
  }

  /**
   * The same model and batch in PyTorch eager (bin/torch-step.py) with per-tensor and multi-tensor
   * Adam: {@code torch_*} fields, or {@code torch_error}.
   */
  private static Map<String, Object> torchAnchor(
      String python,
      Path script,
      String model,
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
            model,
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
      ch = BenchChild.start(cmd, Map.of(), logs.resolve(model + "-" + precision + "-torch.log"));
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

  // ---------------------------------------------------------------------------------------------
  // the child: one rank of one configuration

  private static int child(Map<String, String> o) throws Exception {
    String model = required(o, "model");
    int rank = Integer.parseInt(required(o, "rank"));
    int workers = Integer.parseInt(required(o, "workers"));
    OptimizerPlacement placement = OptimizerPlacement.parse("placement", required(o, "placement"));
    boolean gpu = "gpu".equals(required(o, "device"));
    int batch = Integer.parseInt(required(o, "batch"));
    int image = Integer.parseInt(required(o, "image"));
    int steps = Integer.parseInt(required(o, "steps"));
    int warmup = Integer.parseInt(required(o, "warmup"));
    int threads = Integer.parseInt(required(o, "threads"));
    boolean overlap = "on".equals(required(o, "overlap"));
    boolean uint8 = "uint8".equals(o.getOrDefault("image-transfer", "float32"));
    Precision precision = Precision.parse("precision", o.getOrDefault("precision", "fp32"));
    int phaseSteps = Integer.parseInt(o.getOrDefault("phase-steps", "0"));
    int profileSteps = Integer.parseInt(o.getOrDefault("profile", "0"));
    BufferedReader stdin =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    if ("PyTorch".equals(Engine.getInstance().getEngineName())) {
      JniUtils.setNumThreads(threads); // as BarrierTrainingTask does with the task's CPUs
    }
    Device device = gpu ? Device.gpu() : Device.cpu();
    ModelSpec spec = spec(model, image);
    Communicator comm = null;
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(device), INIT_SEED)) {
      if (workers > 1) {
        RingListener listener = RingListener.bind("127.0.0.1");
        System.out.println("ADDR " + listener.address());
        System.out.flush();
        String line = stdin.readLine();
        if (line == null || !line.startsWith("PEERS ")) {
          throw new IllegalStateException("rank " + rank + ": expected PEERS, got " + line);
        }
        comm =
            Communicator.builder()
                .setRank(rank)
                .setPeers(Arrays.asList(line.substring(6).split(",")))
                .setSecret(JobSecret.fromHex(System.getenv(SECRET_ENV)))
                .setListener(listener)
                .optConnectTimeout(Duration.ofSeconds(60))
                .optOperationTimeout(Duration.ofMinutes(5))
                .optSharedMemory(false)
                .build();
      }
      watchParent(stdin);
      int[] sizes = new int[replicas.trainable.length];
      long params = 0;
      for (int j = 0; j < sizes.length; j++) {
        sizes[j] = replicas.sizes[replicas.trainable[j]];
        params += sizes[j];
      }
      Optimizer adam =
          OptimizerSpec.adam().optLearningRate(LEARNING_RATE).build().newOptimizer(sizes);
      // fp32 through the constructor every build has (a --baseline-jar without a precision)
      try (TrainStep step =
          precision == Precision.FP32
              ? new TrainStep(
                  replicas,
                  LossSpec.SOFTMAX_CROSS_ENTROPY,
                  comm,
                  adam,
                  placement,
                  threads,
                  DistributedTrainer.DEFAULT_BUCKET_BYTES,
                  overlap,
                  overlap && workers > 1,
                  Duration.ofMinutes(5))
              : new TrainStep(
                  replicas,
                  LossSpec.SOFTMAX_CROSS_ENTROPY,
                  comm,
                  adam,
                  placement,
                  threads,
                  DistributedTrainer.DEFAULT_BUCKET_BYTES,
                  overlap,
                  overlap && workers > 1,
                  Duration.ofMinutes(5),
                  precision)) {
        long[] shape = featureShape(model, image, batch);
        ByteBuffer features = uint8 ? pixels(shape, 11L + rank) : features(shape, 11L + rank);
        ByteBuffer labels = labels(batch, classes(model), 13L + rank);
        double[] acc = new double[7];
        for (int s = 0; s < warmup; s++) {
          step(replicas, step, features, labels, shape, s, acc, uint8);
        }
        if (comm != null) {
          comm.barrier(); // both ranks start the timed steps together
        }
        long[] before = counters(step);
        Object ledgerBefore = ledgerSnapshot(step);
        long t0 = System.nanoTime();
        for (int s = warmup; s < warmup + steps; s++) {
          step(replicas, step, features, labels, shape, s, acc, uint8);
        }
        if (gpu) {
          sync(replicas);
        }
        long t1 = System.nanoTime();
        long[] after = counters(step);
        Object ledgerAfter = ledgerSnapshot(step);

        Map<String, Object> r = new LinkedHashMap<>();
        r.put("seconds", (t1 - t0) / 1e9);
        String[] phases = {
          "compute_ms", "backward_ms", "exposed_ms", "communication_ms", "optimizer_ms"
        };
        for (int k = 0; k < phases.length; k++) {
          r.put(phases[k], (after[k] - before[k]) / 1e6 / steps);
        }
        r.put("tensors", replicas.trainable.length);
        r.put("params", params);
        Integer buckets = gradientBuckets(step);
        r.put("buckets", buckets == null ? (Object) Double.NaN : buckets);
        r.putAll(ledgerFigures(ledgerBefore, ledgerAfter, steps));
        r.put("loss", acc[2] > 0 ? acc[0] / acc[2] : Double.NaN);
        if (phaseSteps > 0) {
          r.putAll(
              phases(replicas, step, features, labels, shape, warmup + steps, phaseSteps, uint8));
        }
        if (profileSteps > 0) {
          profile(
              replicas,
              step,
              features,
              labels,
              shape,
              warmup + steps + phaseSteps,
              profileSteps,
              uint8,
              gpu,
              required(o, "profile-out"));
        }
        r.put("step_classes", codeSource(TrainStep.class));
        r.put("pid", ProcessHandle.current().pid());
        System.out.println("RESULT " + toJson(r));
        System.out.flush();
      }
    } finally {
      if (comm != null) {
        comm.close();
      }
    }
    return 0;
  }

  /**
   * {@code n} more steps, each phase closed by a device synchronize: the batch's upload, {@link
   * TrainStep#accumulate} (forward, loss, backward, the gradients' gathering) and {@link
   * TrainStep#update} (the optimizer), in ms per step. Where the time goes, not the speed: the
   * synchronizes take away the overlap of the host's launches with the device's work. With a ring
   * the ranks run the same phases in step (update waits for the all-reduce).
   */
  private static Map<String, Object> phases(
      ReplicaSet replicas,
      TrainStep step,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      int first,
      int n,
      boolean uint8) {
    long upload = 0;
    long compute = 0;
    long update = 0;
    double[] acc = new double[7];
    sync(replicas);
    for (int s = first; s < first + n; s++) {
      long a = System.nanoTime();
      Batch batch = uploadBatch(replicas, features, labels, shape, uint8);
      sync(replicas);
      long b = System.nanoTime();
      try (batch) {
        step.accumulate(batch, 1000 + s, acc, 0, 1);
      }
      sync(replicas);
      long c = System.nanoTime();
      step.update(LEARNING_RATE);
      sync(replicas);
      long d = System.nanoTime();
      upload += b - a;
      compute += c - b;
      update += d - c;
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("phase_steps", n);
    r.put("phase_upload_ms", upload / 1e6 / n);
    r.put("phase_compute_ms", compute / 1e6 / n);
    r.put("phase_update_ms", update / 1e6 / n);
    return r;
  }

  /**
   * {@code n} more steps under PyTorch's profiler (DJL's {@code JniUtils.startProfile}, with CUDA
   * events on a GPU), its trace written to {@code file}: every operator's host and device time.
   */
  private static void profile(
      ReplicaSet replicas,
      TrainStep step,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      int first,
      int n,
      boolean uint8,
      boolean gpu,
      String file) {
    double[] acc = new double[7];
    sync(replicas);
    JniUtils.startProfile(gpu, false, false);
    try {
      for (int s = first; s < first + n; s++) {
        step(replicas, step, features, labels, shape, s, acc, uint8);
      }
      sync(replicas);
    } finally {
      JniUtils.stopProfile(file);
    }
  }

  /**
   * The batch made from the direct buffers on the replicas' device (on CPU the tensors wrap them,
   * on a GPU they are uploaded) in a sub-manager of its own, marked as direct with its upload's
   * bytes.
   */
  private static Batch uploadBatch(
      ReplicaSet replicas, ByteBuffer features, ByteBuffer labels, long[] shape, boolean uint8) {
    NDManager m = replicas.manager().newSubManager();
    NDArray x =
        uint8
            ? dev.sparktrainer.data.DeviceImages.toFloat(m, features, new Shape(shape))
            : m.create(
                features.duplicate().order(ByteOrder.nativeOrder()),
                new Shape(shape),
                DataType.FLOAT32);
    NDArray y =
        m.create(
            labels.duplicate().order(ByteOrder.nativeOrder()), new Shape(shape[0]), DataType.INT64);
    long upload = features.remaining() + labels.remaining();
    return directBatch(m, new NDList(x), y, (int) shape[0], upload);
  }

  /**
   * One step over a batch made from the direct buffers (on CPU the tensors wrap them, on a GPU they
   * are uploaded), as the input pipeline hands batches over; with {@code uint8} the features are
   * one byte per pixel, made float32 on the device as the pipeline's image transfer uint8 does.
   */
  private static void step(
      ReplicaSet replicas,
      TrainStep step,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      int s,
      double[] acc,
      boolean uint8) {
    try (Batch b = uploadBatch(replicas, features, labels, shape, uint8)) {
      step.run(b, 1000 + s, LEARNING_RATE, acc);
    }
  }

  /**
   * A batch marked as made from direct memory where the build knows that mark (Batch.direct(), for
   * the ledger's heap-upload count); an older build (--baseline-jar) gets the plain batch.
   */
  private static Batch directBatch(NDManager m, NDList x, NDArray y, int size, long upload) {
    if (UPLOAD_BATCH != null) { // a build whose ledger counts the batch's upload
      try {
        return (Batch) UPLOAD_BATCH.newInstance(m, x, y, size, null, true, upload);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException(e);
      }
    }
    if (DIRECT_BATCH != null) {
      try {
        return (Batch) DIRECT_BATCH.newInstance(m, x, y, size, null, true);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException(e);
      }
    }
    return new Batch(m, x, y, size);
  }

  private static final java.lang.reflect.Constructor<?> DIRECT_BATCH = directBatchConstructor();

  private static final java.lang.reflect.Constructor<?> UPLOAD_BATCH = uploadBatchConstructor();

  private static java.lang.reflect.Constructor<?> uploadBatchConstructor() {
    try {
      return Batch.class.getConstructor(
          NDManager.class,
          NDList.class,
          NDArray.class,
          int.class,
          Runnable.class,
          boolean.class,
          long.class);
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  private static java.lang.reflect.Constructor<?> directBatchConstructor() {
    try {
      return Batch.class.getConstructor(
          NDManager.class, NDList.class, NDArray.class, int.class, Runnable.class, boolean.class);
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  /** Waits for the device's queued work: one small value read back. */
  private static void sync(ReplicaSet replicas) {
    NDArray a = replicas.params[0][replicas.trainable[0]].getArray();
    try (NDArray flat = a.flatten();
        NDArray one = flat.get(0)) {
      one.getFloat();
    }
  }

  /**
   * When the parent closes this process's stdin (or dies), halt: no orphaned rank keeps running.
   */
  private static void watchParent(BufferedReader stdin) {
    Thread t =
        new Thread(
            () -> {
              try {
                while (stdin.readLine() != null) {
                  // nothing else comes after PEERS
                }
              } catch (IOException e) {
                // the same: the parent is gone
              }
              Runtime.getRuntime().halt(3);
            },
            "bench-step-parent-watch");
    t.setDaemon(true);
    t.start();
  }

  /** The step's timings: compute, backward, exposed, communication, optimizer (ns). */
  private static long[] counters(TrainStep s) {
    StepTimings t = s.timings();
    return new long[] {
      t.computeNanos(),
      t.backwardNanos(),
      t.exposedNanos(),
      t.communicationNanos(),
      t.optimizerNanos()
    };
  }

  /** {@code step.buckets.gradientBuckets()} by reflection: null where a build has no such field. */
  private static Integer gradientBuckets(TrainStep step) {
    try {
      Field f = TrainStep.class.getDeclaredField("buckets");
      Object b = f.get(step);
      return (Integer) b.getClass().getDeclaredMethod("gradientBuckets").invoke(b);
    } catch (ReflectiveOperationException | ClassCastException e) {
      System.err.println("buckets: not available in this build (" + e + ")");
      return null;
    }
  }

  /**
   * {@code step.ledger().snapshot()} by reflection, so that this class also runs against a build of
   * spark-trainer without a ledger: null there.
   */
  private static Object ledgerSnapshot(TrainStep step) {
    Method ledger;
    try {
      ledger = TrainStep.class.getDeclaredMethod("ledger");
    } catch (NoSuchMethodException e) {
      return null;
    }
    try {
      Object l = ledger.invoke(step);
      return l.getClass().getDeclaredMethod("snapshot").invoke(l);
    } catch (ReflectiveOperationException e) {
      System.err.println("ledger: TrainStep.ledger().snapshot() failed: " + e);
      return null;
    }
  }

  /**
   * The ledger's totals between two snapshots ({@code Totals.minus}), per optimizer step ({@code
   * perStep}; divided by the timed steps where the ledger counted none): every field NaN (null in
   * JSON) without a ledger.
   */
  private static Map<String, Object> ledgerFigures(Object before, Object after, int steps) {
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("ledger", before == null || after == null ? "absent" : "present");
    r.put("engine_calls_per_step", Double.NaN);
    for (String name : LEDGER.values()) {
      r.put(name, Double.NaN);
    }
    r.put("ledger_steps_per_step", Double.NaN);
    if (before == null || after == null) {
      return r;
    }
    try {
      Class<?> totals = after.getClass();
      Object d = totals.getDeclaredMethod("minus", totals).invoke(after, before);
      long ledgerSteps = (long) totals.getDeclaredMethod("steps").invoke(d);
      Method perStep = totals.getDeclaredMethod("perStep", long.class);
      for (Map.Entry<String, String> e : LEDGER.entrySet()) {
        long v = (long) totals.getDeclaredMethod(e.getKey()).invoke(d);
        r.put(e.getValue(), perStep(perStep, d, v, ledgerSteps, steps));
      }
      long calls = (long) totals.getDeclaredMethod("engineCalls").invoke(d);
      r.put("engine_calls_per_step", perStep(perStep, d, calls, ledgerSteps, steps));
      r.put("ledger_steps_per_step", (double) ledgerSteps / steps);
    } catch (ReflectiveOperationException | ClassCastException e) {
      r.put("ledger", "unreadable: " + e);
    }
    return r;
  }

  private static double perStep(Method perStep, Object d, long v, long ledgerSteps, int steps)
      throws ReflectiveOperationException {
    return ledgerSteps > 0 ? (double) perStep.invoke(d, v) : (double) v / steps;
  }

  private static String codeSource(Class<?> c) {
    var src = c.getProtectionDomain().getCodeSource();
    return src == null ? "unknown" : src.getLocation().getPath();
  }

  // ---------------------------------------------------------------------------------------------
  // models and data

  static ModelSpec spec(String model, int image) {
    return switch (model) {
      case "mlp", "cnn" -> TrainBenchmark.spec(model);
      case "resnet50" -> new ResNetSpec(new long[] {3, image, image}, 50, 1000);
      default ->
          throw new IllegalArgumentException(
              "Invalid model '" + model + "': expected mlp, cnn or resnet50");
    };
  }

  private static String describe(String model, int image) {
    return switch (model) {
      case "mlp" -> "MLP 784-256-128-10 (MlpSpec.of(784, 10, 256, 128))";
      case "cnn" -> "CNN CnnSpec.of(1, 28, 28, 10)";
      default -> "ResNet-50 (DJL ResNetV1, 1000 classes) on 3x" + image + "x" + image;
    };
  }

  private static long[] featureShape(String model, int image, int batch) {
    return switch (model) {
      case "mlp" -> new long[] {batch, 784};
      case "cnn" -> new long[] {batch, 1, 28, 28};
      default -> new long[] {batch, 3, image, image};
    };
  }

  private static int classes(String model) {
    return model.equals("resnet50") ? 1000 : 10;
  }

  /** Gaussian features, generated once, in direct memory. */
  private static ByteBuffer features(long[] shape, long seed) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    ByteBuffer b = ByteBuffer.allocateDirect(Math.toIntExact(4 * n)).order(ByteOrder.nativeOrder());
    Random r = new Random(seed);
    for (long i = 0; i < n; i++) {
      b.putFloat((float) r.nextGaussian());
    }
    return b.flip();
  }

  /** Uniform pixels 0..255, one byte each (image transfer uint8), generated once. */
  private static ByteBuffer pixels(long[] shape, long seed) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    ByteBuffer b = ByteBuffer.allocateDirect(Math.toIntExact(n)).order(ByteOrder.nativeOrder());
    Random r = new Random(seed);
    for (long i = 0; i < n; i++) {
      b.put((byte) r.nextInt(256));
    }
    return b.flip();
  }

  /** Class labels as int64, as the pipeline makes them. */
  private static ByteBuffer labels(int batch, int classes, long seed) {
    ByteBuffer b = ByteBuffer.allocateDirect(8 * batch).order(ByteOrder.nativeOrder());
    Random r = new Random(seed);
    for (int i = 0; i < batch; i++) {
      b.putLong(r.nextInt(classes));
    }
    return b.flip();
  }

  // ---------------------------------------------------------------------------------------------
  // output

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

  private static void printTable(List<Map<String, Object>> all) {
    List<Map<String, Object>> rows = best(all);
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "%-8s %-8s %-3s %1s %-6s %5s %4s %10s %10s %8s %8s %8s %8s %8s %8s %8s %8s %7s %5s %8s"
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
            "%-8s %-8s %-3s %1s %-6s %5s FAILED: %s%n",
            r.get("model"),
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
          "%-8s %-8s %-3s %1s %-6s %5s %4s %10.1f %10.1f %8s %8s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f"
              + " %7s %5s %8s %8s %8s %8s %8s %11s %11s%n",
          r.get("model"),
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
            + " device and host; '-': no ledger in that build.");
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
