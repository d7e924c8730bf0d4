package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.appJars;
import static dev.sparktrainer.train.BenchSupport.deleteRecursively;
import static dev.sparktrainer.train.BenchSupport.fmt;
import static dev.sparktrainer.train.BenchSupport.idx;
import static dev.sparktrainer.train.BenchSupport.javaOptions;
import static dev.sparktrainer.train.BenchSupport.list;
import static dev.sparktrainer.train.BenchSupport.loadAverage;
import static dev.sparktrainer.train.BenchSupport.median;
import static dev.sparktrainer.train.BenchSupport.num;
import static dev.sparktrainer.train.BenchSupport.options;
import static dev.sparktrainer.train.BenchSupport.parseFlatJson;
import static dev.sparktrainer.train.BenchSupport.perModel;
import static dev.sparktrainer.train.BenchSupport.positive;
import static dev.sparktrainer.train.BenchSupport.required;
import static dev.sparktrainer.train.BenchSupport.subsetTFRecords;
import static dev.sparktrainer.train.BenchSupport.toJson;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import dev.sparktrainer.cluster.StandaloneCluster;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.step.OptimizerPlacement;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.apache.spark.sql.SparkSession;

/**
 * bin/bench-scaling: data-parallel training where the network is the bottleneck. A Spark standalone
 * cluster of separate JVMs (master, 2 workers of 1 core, their executors, the driver) runs inside a
 * network namespace whose loopback is rate-limited with {@code tc tbf}; every byte between the
 * processes (Spark RPC, the application's jars, the ring all-reduce over TCP) crosses that one
 * link, in both directions. Not a test.
 *
 * <p>Why this file is long: one class is both programs of the benchmark: the outer JVM (link check,
 * data subsets, cluster, one submission per model, PyTorch anchor, table, targets, JSON lines) and
 * the submitted driver ({@code ScalingBenchmark driver}) that trains the plan's runs and writes a
 * result line each. They share the {@code Run} encoding of {@code --plan}, the option names and the
 * row keys ({@code figures} to {@code finish} to {@code printTable}): one file from flag to table
 * row. The link check ({@code linkCheck}, {@code streams}) could move out if it grows.
 *
 * <p>For each model ({@code mlp}, {@code cnn}, {@code resnet}) and optimizer placement ({@code
 * device}, {@code host}): {@code spark-1}, one training task on one 1-core executor, once (no ring
 * traffic: the link does not matter); {@code spark-2}, two 1-core executors, at every link speed
 * ({@code --links}, Gbit/s, 0 = no limit) with overlap off and on. All runs of one model are one
 * Spark application: the executors stay up, and the link rate changes between runs ({@code
 * --link-command GBPS}, which runs {@code tc qdisc replace/del} in the namespace) while the cluster
 * keeps running.
 *
 * <p>Each run trains {@code --epochs} epochs over a subset of Fashion-MNIST (steps x batch x
 * workers examples, as TFRecord shards, so every mode takes {@code --steps} steps per epoch) and is
 * measured over the epochs after the first. ResNet is DJL's {@code ResNetV1} with 50 layers on the
 * images zero-padded to 36x36: for images of height 28 or less DJL builds the 3-stage CIFAR-style
 * net (1.7M parameters at 110 or 164 layers, more only with hundreds of full-resolution layers; no
 * 18-layer variant), for 29..32 a full-resolution stem, and its 18- and 34-layer variants have 0.9M
 * and 1.5M parameters; ResNet-50 has 23.6M.
 *
 * <p>Args: {@code --data DIR --work DIR --out FILE --spark-home DIR --app-classpath CP
 * --test-classes DIR --link-command CMD [--namespace NAME] [--models mlp,cnn,resnet] [--links
 * 1,2.5,0] [--modes spark-1,spark-2] [--placements device,host] [--overlap off,on] [--epochs 2]
 * [--steps N|model=N,...] [--batch N|model=N,...] [--rounds 1] [--bucket-mb MB] [--java-options
 * "..."]}. The submitted driver runs {@code ScalingBenchmark driver ...}.
 */
public final class ScalingBenchmark {
  private static final List<String> MODELS = List.of("mlp", "cnn", "resnet");

  /**
   * Per-worker batch per model. ResNet: 32, the smallest batch whose backward (about 0.55 s on one
   * core here) is as long as its gradient exchange at 2.5 Gbit/s (each of the 2 ranks sends its 94
   * MB over the one shared link: 0.6 s), so that overlap can reach the efficiency target at all; at
   * 16 the exchange alone is longer than the whole 1-worker step and the efficiency stays below
   * about 0.55 however well it is hidden.
   */
  private static final Map<String, Integer> BATCH = Map.of("mlp", 64, "cnn", 64, "resnet", 32);

  /**
   * Steps per epoch per model: a run of 2 epochs takes seconds (MLP) to tens of seconds (ResNet).
   */
  private static final Map<String, Integer> STEPS = Map.of("mlp", 300, "cnn", 40, "resnet", 6);

  private static final int RESNET_LAYERS = 50;
  private static final int RESNET_SIDE = 36;
  private static final float LEARNING_RATE = 1e-3f;

  /**
   * Shards of each data subset: one file per worker with 2 workers (FILE sharding), both with 1.
   */
  private static final int SHARDS = 2;

  private ScalingBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("driver")) {
      driver(options(Arrays.copyOfRange(args, 1, args.length)));
      return;
    }
    System.exit(run(options(args)));
  }

  static ModelSpec spec(String model) {
    return switch (model) {
      case "mlp", "cnn" -> TrainBenchmark.spec(model);
      case "resnet" -> new ResNetSpec(new long[] {1, RESNET_SIDE, RESNET_SIDE}, RESNET_LAYERS, 10);
      default ->
          throw new IllegalArgumentException(
              "Invalid model '" + model + "': expected mlp, cnn or resnet");
    };
  }

  private static String describe(String model) {
    return switch (model) {
      case "mlp" -> "MLP 784-256-128-10";
      case "cnn" -> "CNN CnnSpec.of(1, 28, 28, 10)";
      default ->
          "ResNet-"
              + RESNET_LAYERS
              + " (DJL ResNetV1) on "
              + RESNET_SIDE
              + "x"
              + RESNET_SIDE
              + " (28x28 zero-padded)";
    };
  }

  /** Image side of the model's examples (28, or the padded side for ResNet). */
  private static int side(String model) {
    return model.equals("resnet") ? RESNET_SIDE : 28;
  }

  private static long[] featureShape(String model) {
    return switch (model) {
      case "mlp" -> new long[] {784};
      case "cnn" -> new long[] {1, 28, 28};
      default -> new long[] {1, RESNET_SIDE, RESNET_SIDE};
    };
  }

  /** All parameters of the model, those without gradients (batch-norm statistics) included. */
  static long parameterCount(ModelSpec spec) {
    try (NDManager manager = NDManager.newBaseManager()) {
      Block block = spec.newBlock();
      block.initialize(manager, DataType.FLOAT32, spec.batchInputShapes(1));
      long n = 0;
      for (Parameter p : block.getParameters().values()) {
        n += p.getArray().size();
      }
      return n;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // the benchmark JVM (inside the namespace): the link check, the data, the cluster, the table

  /** One model's settings. */
  private record Setup(String model, long params, int batch, int steps, Path data1, Path data2) {}

  /** One training run of the plan. */
  private record Run(String mode, boolean overlap, String placement, String link, int round) {
    String encode() {
      return mode + "/" + (overlap ? "on" : "off") + "/" + placement + "/" + link + "/" + round;
    }

    static Run decode(String s) {
      String[] f = s.split("/");
      return new Run(f[0], f[1].equals("on"), f[2], f[3], Integer.parseInt(f[4]));
    }
  }

  private static int run(Map<String, String> o) throws Exception {
    Path data = Path.of(o.getOrDefault("data", "/usr/share/datasets/fashion-mnist"));
    Path work = Path.of(o.getOrDefault("work", "target/bench/scaling")).toAbsolutePath();
    Path out = Path.of(o.getOrDefault("out", "target/bench/scaling.jsonl")).toAbsolutePath();
    String linkCommand = required(o, "link-command");
    List<String> models =
        list(o, "models", "mlp,cnn,resnet", MODELS::contains, "mlp, cnn or resnet");
    List<String> links =
        list(
            o, "links", "1,2.5,0", ScalingBenchmark::isRate, "rates in Gbit/s >= 0 (0 = no limit)");
    List<String> modes =
        list(
            o,
            "modes",
            "spark-1,spark-2",
            Set.of("spark-1", "spark-2", "torch-1", "torch-ddp-2")::contains,
            "spark-1, spark-2, torch-1 or torch-ddp-2");
    String python = o.getOrDefault("python", "");
    boolean torch = modes.contains("torch-1") || modes.contains("torch-ddp-2");
    if (torch && (python.isBlank() || !o.containsKey("torch-script"))) {
      throw new IllegalArgumentException(
          "--modes torch-1/torch-ddp-2 need a python3 with torch (--python, --torch-script;"
              + " bin/bench-scaling finds one, or set PYTHON)");
    }
    List<String> placements =
        list(o, "placements", "device,host", Set.of("device", "host")::contains, "device or host");
    List<String> overlaps =
        list(o, "overlap", "off,on", Set.of("off", "on")::contains, "off or on");
    int epochs = positive(o, "epochs", "2");
    int rounds = positive(o, "rounds", "1");
    Map<String, Integer> batch = perModel(o, "batch", BATCH, MODELS, false);
    Map<String, Integer> steps = perModel(o, "steps", STEPS, MODELS, false);
    if (o.containsKey("bucket-mb")) {
      positive(o, "bucket-mb", null);
    }
    if (epochs < 2) {
      System.out.println(
          "note: --epochs 1 measures the first epoch, JIT and native warm-up included");
    }
    String namespace = o.getOrDefault("namespace", "(this one)");

    System.out.println(
        "The link: the loopback of network namespace "
            + namespace
            + ", rate-limited with tc tbf;"
            + " all traffic between the cluster's processes (Spark RPC, jars, the ring all-reduce over TCP) shares it,"
            + " both directions together.");
    double[] check = linkCheck(linkCommand);
    System.out.printf(
        Locale.ROOT,
        "Link check at 1 Gbit/s: one TCP stream %.3f Gbit/s; two at once %.3f Gbit/s in"
            + " total.%n",
        check[0],
        check[1]);

    List<Setup> setups = setups(data, work, models, batch, steps);
    for (Setup s : setups) {
      System.out.printf(
          Locale.ROOT,
          "Model %-6s %s: %,d parameters (%.1f MB as FP32); per-worker batch %d, %d steps"
              + " per epoch, %d epochs, measured over epochs 2..%d%n",
          s.model(),
          describe(s.model()),
          s.params(),
          s.params() * 4 / 1e6,
          s.batch(),
          s.steps(),
          epochs,
          epochs);
    }
    int workers = modes.contains("spark-2") ? 2 : 1;
    Files.createDirectories(out.getParent());
    List<Map<String, Object>> rows = new ArrayList<>();
    int failed = 0;
    Path runDir = work.resolve("cluster-scaling");
    deleteRecursively(runDir);
    List<String> javaOptions = javaOptions(o);
    try (StandaloneCluster cluster =
            StandaloneCluster.builder()
                .setSparkHome(Path.of(required(o, "spark-home")))
                .setWorkDir(runDir)
                .optWorkers(workers)
                .optCoresPerWorker(1)
                .optMemoryPerWorker("3g")
                .optJavaOptions(javaOptions)
                .build()
                .start();
        PrintStream json =
            new PrintStream(
                Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND),
                true,
                StandardCharsets.UTF_8)) {
      Path appJar =
          BenchSupport.appJar(required(o, "test-classes"), work.resolve("bench-scaling-app.jar"));
      System.out.println(
          "Cluster: "
              + workers
              + " worker(s) x 1 core at "
              + cluster.masterUrl()
              + ", ring all-reduce over TCP (optRingTransport(TCP))");
      for (Setup setup : setups) {
        List<Run> plan = plan(modes, links, placements, overlaps, rounds);
        if (plan.isEmpty()) {
          rows.addAll(torchRuns(o, setup, data, epochs, modes, links, rounds, linkCommand, json));
          continue;
        }
        // The application starts on an unlimited link (its jars travel to the executors over it).
        setLink(linkCommand, "0");
        Path results = runDir.resolve("results-" + setup.model() + ".jsonl");
        Files.deleteIfExists(results);
        StandaloneCluster.Submission.Builder submission =
            StandaloneCluster.submission()
                .optName("scaling-" + setup.model())
                .setMainClass(ScalingBenchmark.class.getName())
                .setAppJar(appJar)
                .addJars(appJars(o))
                .optDriverHeap("2g")
                .conf("spark.executor.extraJavaOptions", String.join(" ", javaOptions))
                .conf("spark.executor.memory", "2g")
                .conf("spark.executor.cores", "1")
                .conf("spark.task.cpus", "1")
                .conf("spark.cores.max", Integer.toString(workers))
                .conf("spark.barrier.sync.timeout", "600s")
                .args(driverArgs(o, setup, epochs, plan, results, linkCommand));
        if (System.getenv("OMP_WAIT_POLICY") != null) {
          submission.conf("spark.executorEnv.OMP_WAIT_POLICY", System.getenv("OMP_WAIT_POLICY"));
        }
        long t0 = System.nanoTime();
        StandaloneCluster.Application app = cluster.submit(submission.build());
        System.err.println(
            "scaling-"
                + setup.model()
                + ": "
                + plan.size()
                + " runs, driver pid "
                + app.pid()
                + ", log "
                + app.log());
        int exit =
            app.waitFor(
                Duration.ofMinutes(Long.parseLong(o.getOrDefault("app-timeout-min", "60"))));
        List<Map<String, Object>> modelRows = new ArrayList<>();
        if (Files.exists(results)) {
          for (String line : Files.readAllLines(results, StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
              modelRows.add(parseFlatJson(line));
            }
          }
        }
        System.err.printf(
            Locale.ROOT,
            "scaling-%s: %d of %d runs in %.0f s%n",
            setup.model(),
            modelRows.size(),
            plan.size(),
            (System.nanoTime() - t0) / 1e9);
        if (exit != 0 || modelRows.size() < plan.size()) {
          failed++;
          System.err.println(
              "scaling-"
                  + setup.model()
                  + ": the driver exited with "
                  + exit
                  + " after "
                  + modelRows.size()
                  + " of "
                  + plan.size()
                  + " runs; its log ends:\n"
                  + app.logTail(40));
        }
        for (Map<String, Object> row : finish(setup, modelRows, epochs, check[0])) {
          json.println(toJson(row));
          if (row.containsKey("error")) {
            failed++;
          }
          rows.add(row);
        }
        rows.addAll(torchRuns(o, setup, data, epochs, modes, links, rounds, linkCommand, json));
      }
    } finally {
      try {
        setLink(linkCommand, "0");
      } catch (Exception e) {
        System.err.println(
            "Could not remove the link's limit (the script deletes the namespace anyway): " + e);
      }
    }
    printTable(rows);
    printTargets(rows);
    System.out.println("JSON lines appended to " + out);
    return failed == 0 ? 0 : 1;
  }

  /**
   * Each model's parameter count and its data: the first steps x batch x workers training examples
   * as {@value #SHARDS} TFRecord shards, for 1 and for 2 workers, so that both take {@code steps}
   * steps per epoch.
   */
  private static List<Setup> setups(
      Path data,
      Path work,
      List<String> models,
      Map<String, Integer> batch,
      Map<String, Integer> steps)
      throws IOException {
    InMemoryDataset train =
        idx(data.resolve("train-images-idx3-ubyte.gz"), data.resolve("train-labels-idx1-ubyte.gz"));
    List<Setup> setups = new ArrayList<>();
    for (String m : models) {
      int b = batch.get(m);
      int s = steps.get(m);
      Path[] dirs = new Path[2];
      for (int w = 1; w <= 2; w++) {
        int examples = b * s * w;
        dirs[w - 1] =
            subsetTFRecords(
                train,
                examples,
                side(m),
                SHARDS,
                work.resolve("data/fashion-mnist-" + side(m) + "px-first-" + examples));
      }
      setups.add(new Setup(m, parameterCount(spec(m)), b, s, dirs[0], dirs[1]));
    }
    return setups;
  }

  /**
   * Per round: spark-1 once per placement (on the unlimited link: it sends nothing over the ring),
   * then spark-2 per link speed, placement and overlap — a link's runs together, so the rate
   * changes once per link speed.
   */
  private static List<Run> plan(
      List<String> modes,
      List<String> links,
      List<String> placements,
      List<String> overlaps,
      int rounds) {
    List<Run> plan = new ArrayList<>();
    for (int round = 1; round <= rounds; round++) {
      if (modes.contains("spark-1")) {
        for (String p : placements) {
          plan.add(new Run("spark-1", true, p, "0", round));
        }
      }
      if (modes.contains("spark-2")) {
        for (String link : links) {
          for (String p : placements) {
            for (String ov : overlaps) {
              plan.add(new Run("spark-2", ov.equals("on"), p, link, round));
            }
          }
        }
      }
    }
    return plan;
  }

  private static String[] driverArgs(
      Map<String, String> o,
      Setup s,
      int epochs,
      List<Run> plan,
      Path results,
      String linkCommand) {
    List<String> a =
        new ArrayList<>(
            List.of(
                "driver",
                "--model",
                s.model(),
                "--batch",
                Integer.toString(s.batch()),
                "--epochs",
                Integer.toString(epochs),
                "--train-1",
                s.data1().toString(),
                "--train-2",
                s.data2().toString(),
                "--results",
                results.toString(),
                "--link-command",
                linkCommand,
                "--plan",
                String.join(",", plan.stream().map(Run::encode).toList())));
    if (o.containsKey("bucket-mb")) {
      a.add("--bucket-mb");
      a.add(o.get("bucket-mb"));
    }
    return a.toArray(new String[0]);
  }

  /**
   * The JSON lines of one model: the driver's figures with the model's settings, and each spark-2
   * run's scaling efficiency against spark-1 of the same placement and round (the median of
   * spark-1's rounds when that round has none).
   */
  private static List<Map<String, Object>> finish(
      Setup s, List<Map<String, Object>> driverRows, int epochs, double linkCheck) {
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

  /**
   * The PyTorch anchor of one model (bin/torch-train.py: the same examples, batch, steps and epochs
   * in PyTorch eager with Adam): per round, torch-1 (one process, one thread) on the unlimited
   * link, then torch-ddp-2 (DistributedDataParallel over gloo, 2 processes x 1 thread, the same
   * cores as the cluster's 2 executors) per link. Its processes run in this namespace, so their
   * all-reduce crosses the same rate-limited loopback as the ring's. Rows as {@link #finish}'s,
   * with placement "torch"; each is written to {@code json} as it ends.
   */
  private static List<Map<String, Object>> torchRuns(
      Map<String, String> o,
      Setup s,
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
        setLink(linkCommand, run[1]);
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
      setLink(linkCommand, "0");
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

  // ---------------------------------------------------------------------------------------------
  // the link

  /**
   * Runs {@code linkCommand GBPS} (in this namespace: sets or removes the loopback's tbf qdisc).
   */
  static void setLink(String linkCommand, String gbps) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(linkCommand.trim().split("\\s+")));
    cmd.add(gbps);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    byte[] output;
    try (InputStream in = p.getInputStream()) {
      output = in.readAllBytes();
    }
    if (!p.waitFor(30, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new IllegalStateException(
          "Setting the link to " + gbps + " Gbit/s did not finish in 30 s: " + cmd);
    }
    if (p.exitValue() != 0) {
      throw new IllegalStateException(
          "Setting the link to "
              + gbps
              + " Gbit/s failed (exit "
              + p.exitValue()
              + "): "
              + cmd
              + ": "
              + new String(output, StandardCharsets.UTF_8).trim());
    }
  }

  /**
   * Sets the link to 1 Gbit/s and measures TCP over 127.0.0.1 for 1.5 s with one stream, then with
   * two at once (they share the queue); removes the limit again. Gbit/s of payload: {one, two in
   * total}.
   */
  static double[] linkCheck(String linkCommand) throws Exception {
    setLink(linkCommand, "1");
    try {
      return new double[] {streams(1, 1500), streams(2, 1500)};
    } finally {
      setLink(linkCommand, "0");
    }
  }

  private static double streams(int n, long millis) throws Exception {
    AtomicLong received = new AtomicLong();
    List<Thread> threads = new ArrayList<>();
    List<Socket> sockets = new ArrayList<>();
    try (ServerSocket server = new ServerSocket(0, n, InetAddress.getByName("127.0.0.1"))) {
      server.setSoTimeout(10_000);
      for (int i = 0; i < n; i++) {
        Socket client = new Socket(InetAddress.getByName("127.0.0.1"), server.getLocalPort());
        Socket peer = server.accept();
        sockets.add(client);
        sockets.add(peer);
        peer.setSoTimeout(10_000);
        threads.add(
            new Thread(
                () -> {
                  byte[] buf = new byte[1 << 16];
                  try (InputStream in = peer.getInputStream()) {
                    for (int r; (r = in.read(buf)) > 0; ) {
                      received.addAndGet(r);
                    }
                  } catch (IOException e) {
                    // the reader ends when the writer closes (or the socket times out)
                  }
                },
                "link-check-reader-" + i));
      }
      long t0 = System.nanoTime();
      long end = t0 + TimeUnit.MILLISECONDS.toNanos(millis);
      for (int i = 0; i < n; i++) {
        Socket client = sockets.get(2 * i);
        threads.add(
            new Thread(
                () -> {
                  byte[] buf = new byte[1 << 16];
                  try (OutputStream os = client.getOutputStream()) {
                    while (System.nanoTime() < end) {
                      os.write(buf);
                    }
                  } catch (IOException e) {
                    throw new UncheckedIOException(e);
                  }
                },
                "link-check-writer-" + i));
      }
      threads.forEach(Thread::start);
      for (Thread t : threads) {
        t.join(30_000);
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      return received.get() * 8 / seconds / 1e9;
    } finally {
      for (Socket s : sockets) {
        s.close();
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // the submitted application: one model's runs, in the order of the plan

  private static void driver(Map<String, String> o) throws Exception {
    String model = required(o, "model");
    ModelSpec spec = spec(model);
    int batch = Integer.parseInt(required(o, "batch"));
    int epochs = Integer.parseInt(required(o, "epochs"));
    Path results = Path.of(required(o, "results"));
    String linkCommand = required(o, "link-command");
    String link = null;
    SparkSession spark = SparkSession.builder().appName("bench-scaling-" + model).getOrCreate();
    try {
      for (String encoded : required(o, "plan").split(",")) {
        Run run = Run.decode(encoded);
        if (!run.link().equals(link)) {
          setLink(linkCommand, run.link());
          link = run.link();
        }
        int workers = run.mode().equals("spark-2") ? 2 : 1;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("mode", run.mode());
        r.put("overlap", run.overlap());
        r.put("placement", run.placement());
        r.put("link", run.link());
        r.put("round", run.round());
        r.put("load_avg_before", loadAverage());
        long t0 = System.nanoTime();
        try {
          DatasetSpec train =
              DatasetSpec.builder()
                  .addPath(required(o, "train-" + workers))
                  .optFormat(DatasetSpec.Format.TFRECORD)
                  .addFeature("pixels", featureShape(model))
                  .setLabel("label", DatasetSpec.LabelType.INT)
                  .build();
          DistributedTrainer.Builder builder =
              DistributedTrainer.builder()
                  .setTrainingData(
                      train, PipelineOptions.builder().optBatchSize(batch).optSeed(7).build())
                  .setModel(spec)
                  .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
                  .setOptimizer(OptimizerSpec.adam().optLearningRate(LEARNING_RATE).build())
                  .setNumWorkers(workers)
                  .optEpochs(epochs)
                  .optSeed(1)
                  .optRingTransport(RingTransport.TCP)
                  .optOverlap(run.overlap())
                  .optOptimizerPlacement(OptimizerPlacement.parse("placement", run.placement()));
          if (o.containsKey("bucket-mb")) {
            builder.optBucketMb(Integer.parseInt(o.get("bucket-mb")));
          }
          TrainedModel m = builder.build().fit(spark);
          r.putAll(figures(m.history().epochs()));
          for (EpochMetrics e : m.history().epochs()) {
            System.out.println(run.encode() + " epoch " + e.toJson());
          }
        } catch (Exception e) {
          // Recorded and reported; the next run still gets its chance.
          System.err.println(run.encode() + " failed:");
          e.printStackTrace();
          r.put("error", String.valueOf(e).replace('\n', ' '));
        }
        r.put("wall_s", (System.nanoTime() - t0) / 1e9);
        r.put("load_avg_after", loadAverage());
        r.put("time", Instant.now().toString());
        Files.writeString(
            results,
            toJson(r) + "\n",
            StandardCharsets.UTF_8,
            StandardOpenOption.CREATE,
            StandardOpenOption.APPEND);
      }
    } finally {
      spark.stop();
    }
  }

  /**
   * A run's figures over the epochs after the first (all of them when there is one): samples/s, the
   * step-time fractions, and the overlap figures from the summed seconds.
   */
  static Map<String, Object> figures(List<EpochMetrics> all) {
    List<EpochMetrics> measured = all.size() > 1 ? all.subList(1, all.size()) : all;
    double samples = 0;
    double seconds = 0;
    double wait = 0;
    double compute = 0;
    double exposed = 0;
    double optimizer = 0;
    double backward = 0;
    double communication = 0;
    long steps = 0;
    for (EpochMetrics e : measured) {
      samples += e.samples();
      seconds += e.samplesPerSecond() > 0 ? e.samples() / e.samplesPerSecond() : Double.NaN;
      wait += e.dataWaitSeconds();
      compute += e.computeSeconds();
      exposed += e.allReduceSeconds();
      optimizer += e.optimizerSeconds();
      backward += e.backwardSeconds();
      communication += e.communicationSeconds();
      steps += e.steps();
    }
    double step = wait + compute + exposed + optimizer;
    double hidden = Math.max(0, communication - exposed);
    double limit = Math.min(communication, backward);
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("samples_per_s", samples / seconds);
    r.put("data_wait_fraction", wait / step);
    r.put("compute_fraction", compute / step);
    r.put("exposed_comm_fraction", exposed / step);
    r.put("optimizer_fraction", optimizer / step);
    // As EpochMetrics.overlapRatio, over the measured epochs' sums.
    r.put("overlap_ratio", limit > 0 ? Math.min(1, hidden / limit) : Double.NaN);
    r.put("comm_to_backward", backward > 0 ? communication / backward : Double.NaN);
    r.put("step_ms", 1e3 * step / steps);
    r.put("backward_ms", 1e3 * backward / steps);
    r.put("communication_ms", 1e3 * communication / steps);
    r.put("exposed_comm_ms", 1e3 * exposed / steps);
    r.put("optimizer_ms", 1e3 * optimizer / steps);
    r.put("steps", steps / measured.size());
    r.put("measured_epochs", measured.size());
    return r;
  }

  // ---------------------------------------------------------------------------------------------
  // output

  private static void printTable(List<Map<String, Object>> rows) {
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
  private static void printTargets(List<Map<String, Object>> rows) {
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

  private static boolean isRate(String v) {
    try {
      return new BigDecimal(v).signum() >= 0;
    } catch (NumberFormatException e) {
      return false;
    }
  }
}
