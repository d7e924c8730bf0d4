package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.appJars;
import static dev.sparktrainer.train.BenchSupport.convertToTFRecords;
import static dev.sparktrainer.train.BenchSupport.deleteRecursively;
import static dev.sparktrainer.train.BenchSupport.idx;
import static dev.sparktrainer.train.BenchSupport.javaOptions;
import static dev.sparktrainer.train.BenchSupport.loadAverage;
import static dev.sparktrainer.train.BenchSupport.options;
import static dev.sparktrainer.train.BenchSupport.parseFlatJson;
import static dev.sparktrainer.train.BenchSupport.required;
import static dev.sparktrainer.train.BenchSupport.toJson;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import dev.sparktrainer.cluster.StandaloneCluster;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.BatchSource;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.job.BarrierTrainingTask;
import dev.sparktrainer.train.metrics.EpochMetrics;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.SparkSession;

/**
 * bin/bench-train: samples/s of a plain single-process DJL training loop (the baseline) vs the
 * Spark trainer with 1 worker and with 2 workers in a Spark standalone cluster of separate executor
 * JVMs, on Fashion-MNIST; the step-time split and the test accuracy after the run. Not a test.
 *
 * <ul>
 *   <li>{@code plain-djl}: DJL's own {@code Trainer} and Adam in this JVM on the IDX data in
 *       memory, all cores (PyTorch intra-op threads = cores).
 *   <li>{@code spark-1}: the trainer on a standalone cluster of one worker offering all cores, one
 *       executor JVM running the one training task ({@code spark.task.cpus} = cores).
 *   <li>{@code spark-2}: two workers of cores/2 each, two executor JVMs, one training task each:
 *       the same total cores.
 *   <li>{@code spark-2-tcp}: spark-2 with the ring on loopback TCP ({@code
 *       optRingTransport(RingTransport.TCP)}) rather than shared memory: what the same-host
 *       transport saves. JSON: {@code "mode":"spark-2", "ring_transport":"tcp"}.
 *   <li>{@code spark-2-mem} (MLP): spark-2 with the data in memory ({@code InMemoryDataset},
 *       batches made on the training thread): no pipeline threads competing with training for the
 *       cores.
 *   <li>{@code spark-2-bf16}: spark-2 with the gradients on the wire as bfloat16 ({@code
 *       optGradientPrecision(BF16)}): half the all-reduce bytes. Its JSON lines say {@code
 *       "mode":"spark-2","gradient_precision":"bf16"}.
 * </ul>
 *
 * <p>Why this file is long: one class is both the launcher and the Spark application it submits
 * ({@code TrainBenchmark driver}): the plain-DJL baseline loop, the PyTorch anchor call, a cluster
 * and submission per Spark mode, the driver that trains and writes {@code result.json}, and the
 * table with its targets. The driver's option names and the row keys shared by {@code plain}, the
 * driver and {@code printTable} stay side by side, so one mode reads from flag to table row. The
 * plain-DJL baseline ({@code plain}) could move out if it grows.
 *
 * <p>The Spark modes read the data as TFRecord shards (converted once from the IDX files with the
 * project's writer) through the input pipeline: {@code setTrainingData(DatasetSpec,
 * PipelineOptions)}. A run's throughput is measured over the epochs after the first (the first pays
 * for JIT and native warm-up) and excludes validation. Each model runs several rounds of all modes
 * in turn; every run is a JSON line, and the table shows each mode's fastest run (on a machine
 * shared with other work, the least disturbed one) next to the median of its rounds.
 *
 * <p>Args: {@code --data DIR --work DIR --out FILE --spark-home DIR --app-classpath CP
 * --test-classes DIR [--epochs N] [--cnn-epochs N] [--rounds N] [--cnn-rounds N] [--batch 64]
 * [--models mlp,cnn] [--modes plain-djl,spark-1,spark-2,spark-2-bf16] [--cores N] [--java-options
 * "..."]}. The submitted driver runs {@code TrainBenchmark driver ...}.
 */
public final class TrainBenchmark {
  /** Per-worker batch (and the plain loop's batch) unless {@code --batch} says otherwise. */
  private static final String BATCH = "64";

  /** Fashion-MNIST's training set: one epoch of every mode. */
  private static final int TRAIN_EXAMPLES = 60_000;

  private static final float LEARNING_RATE = 1e-3f;

  private TrainBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("driver")) {
      driver(options(Arrays.copyOfRange(args, 1, args.length)));
      return;
    }
    Map<String, String> o = options(args);
    Path data = Path.of(o.getOrDefault("data", "/usr/share/datasets/fashion-mnist"));
    Path work = Path.of(o.getOrDefault("work", "target/bench/train")).toAbsolutePath();
    Path out = Path.of(o.getOrDefault("out", "target/bench/train.jsonl")).toAbsolutePath();
    int epochs = Integer.parseInt(o.getOrDefault("epochs", "10"));
    int cnnEpochs = Integer.parseInt(o.getOrDefault("cnn-epochs", "2"));
    int rounds = Integer.parseInt(o.getOrDefault("rounds", "3"));
    int cnnRounds = Integer.parseInt(o.getOrDefault("cnn-rounds", "2"));
    int cores =
        Integer.parseInt(
            o.getOrDefault("cores", Integer.toString(Runtime.getRuntime().availableProcessors())));
    List<String> models = List.of(o.getOrDefault("models", "mlp,cnn").split(","));
    String defaultModes = "plain-djl,spark-1,spark-2,spark-2-tcp,spark-2-mem,spark-2-bf16";
    if (!o.getOrDefault("python", "").isBlank()) {
      defaultModes += ",torch-1,torch-ddp-2";
    }
    List<String> modes = List.of(o.getOrDefault("modes", defaultModes).split(","));
    if ((modes.contains("torch-1") || modes.contains("torch-ddp-2"))
        && (o.getOrDefault("python", "").isBlank() || !o.containsKey("torch-script"))) {
      throw new IllegalArgumentException(
          "--modes torch-1/torch-ddp-2 need a python3 with torch (--python, --torch-script;"
              + " bin/bench-train finds one, or set PYTHON)");
    }

    Path tfrecords = convertToTFRecords(data, work.resolve("fashion-mnist-tfrecord"));
    InMemoryDataset train = null;
    InMemoryDataset test = null;
    if (modes.contains("plain-djl")) {
      train =
          idx(
              data.resolve("train-images-idx3-ubyte.gz"),
              data.resolve("train-labels-idx1-ubyte.gz"));
      test =
          idx(data.resolve("t10k-images-idx3-ubyte.gz"), data.resolve("t10k-labels-idx1-ubyte.gz"));
    }
    Files.createDirectories(out.getParent());
    List<Map<String, Object>> rows = new ArrayList<>();
    try (PrintStream json =
        new PrintStream(
            Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND),
            true,
            StandardCharsets.UTF_8)) {
      for (String model : models) {
        int e = model.equals("cnn") ? cnnEpochs : epochs;
        // Rounds of every mode in turn: load from outside (a shared machine) falls on all modes
        // alike.
        for (int round = 1; round <= (model.equals("cnn") ? cnnRounds : rounds); round++) {
          for (String mode : modes) {
            if (mode.equals("spark-2-mem") && !model.equals("mlp")) {
              continue; // the in-memory variant is the MLP's (flat examples)
            }
            Map<String, Object> row = run(o, work, tfrecords, train, test, model, mode, e, cores);
            row.put("round", round);
            json.println(toJson(row));
            System.err.println(toJson(row));
            rows.add(row);
          }
        }
      }
    }
    printTable(rows);
  }

  private static Map<String, Object> run(
      Map<String, String> o,
      Path work,
      Path tfrecords,
      InMemoryDataset train,
      InMemoryDataset test,
      String model,
      String mode,
      int epochs,
      int cores)
      throws Exception {
    double load0 = loadAverage();
    long t0 = System.nanoTime();
    Map<String, Object> r =
        switch (mode) {
          case "plain-djl" -> plain(spec(model), train, test, epochs, cores, batch(o));
          case "spark-1" -> cluster(o, work, tfrecords, model, epochs, 1, cores, "fp32", "auto");
          case "spark-2" -> cluster(o, work, tfrecords, model, epochs, 2, cores, "fp32", "auto");
          case "spark-2-bf16" ->
              cluster(o, work, tfrecords, model, epochs, 2, cores, "bf16", "auto");
          case "spark-2-tcp" -> cluster(o, work, tfrecords, model, epochs, 2, cores, "fp32", "tcp");
          case "spark-2-mem" ->
              cluster(o, work, tfrecords, model, epochs, 2, cores, "fp32", "memory");
          case "torch-1" -> torch(o, work, model, epochs, 1, cores);
          case "torch-ddp-2" -> torch(o, work, model, epochs, 2, cores);
          default ->
              throw new IllegalArgumentException(
                  "Invalid mode '"
                      + mode
                      + "': expected plain-djl, spark-1, spark-2, spark-2-bf16, spark-2-tcp,"
                      + " spark-2-mem, torch-1 or torch-ddp-2");
        };
    Map<String, Object> row = new LinkedHashMap<>();
    // spark-2-bf16 is spark-2 with gradients on the wire as bfloat16 (--gradient-precision bf16).
    row.put("mode", mode.startsWith("spark-2") ? "spark-2" : mode);
    row.put(
        "gradient_precision",
        mode.equals("plain-djl") || mode.startsWith("torch")
            ? "none"
            : mode.endsWith("bf16") ? "bf16" : "fp32");
    // spark-2-tcp is spark-2 with the ring on loopback TCP (--ring-transport tcp) instead of shared
    // memory.
    row.put(
        "ring_transport",
        mode.equals("spark-2-tcp") ? "tcp" : mode.startsWith("spark-2") ? "shm" : "none");
    row.put("model", model);
    row.putAll(r);
    row.put("epochs", epochs);
    row.put("batch", batch(o));
    row.put("cores", cores);
    row.put("wall_s", (System.nanoTime() - t0) / 1e9);
    row.put("load_avg_before", load0);
    row.put("load_avg_after", loadAverage());
    row.put("omp_wait_policy", String.valueOf(System.getenv("OMP_WAIT_POLICY")));
    row.put("time", Instant.now().toString());
    return row;
  }

  public static ModelSpec spec(String model) {
    return switch (model) {
      case "mlp" -> MlpSpec.of(784, 10, 256, 128);
      case "cnn" -> CnnSpec.of(1, 28, 28, 10);
      default ->
          throw new IllegalArgumentException("Invalid model '" + model + "': expected mlp or cnn");
    };
  }

  // ---------------------------------------------------------------------------------------------
  // plain-djl: the baseline

  /** DJL's own Trainer and Adam in one process over the in-memory data, the same batches. */
  private static Map<String, Object> plain(
      ModelSpec spec,
      InMemoryDataset train,
      InMemoryDataset test,
      int epochs,
      int cores,
      int batch) {
    BarrierTrainingTask.setIntraOpThreads(cores);
    try (Model model = Model.newInstance("plain");
        NDManager manager = NDManager.newBaseManager()) {
      model.setBlock(spec.newBlock());
      DefaultTrainingConfig config =
          new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
              .optOptimizer(
                  Optimizer.adam().optLearningRateTracker(Tracker.fixed(LEARNING_RATE)).build());
      try (Trainer trainer = model.newTrainer(config);
          BatchSource src = train.trainBatches(batch, 1, true).create(0, 1, manager)) {
        trainer.initialize(spec.batchInputShapes(1));
        double samples = 0;
        double seconds = 0;
        double bestEpoch = 0;
        long[] nanos = new long[3]; // wait, compute, optimizer, over the measured epochs
        for (int e = 0; e < epochs; e++) {
          boolean measured = e > 0 || epochs == 1;
          long n = 0;
          long[] epochNanos = new long[3];
          long start = System.nanoTime();
          for (Iterator<Batch> it = src.epoch(e, 0); it.hasNext(); ) {
            long t0 = System.nanoTime();
            long t1;
            try (Batch b = it.next()) {
              t1 = System.nanoTime();
              try (GradientCollector gc = trainer.newGradientCollector()) {
                NDList pred = trainer.forward(b.features());
                NDArray l = trainer.getLoss().evaluate(new NDList(b.labels()), pred);
                gc.backward(l);
              }
              n += b.size();
            }
            long t2 = System.nanoTime();
            trainer.step();
            long t3 = System.nanoTime();
            epochNanos[0] += t1 - t0;
            epochNanos[1] += t2 - t1;
            epochNanos[2] += t3 - t2;
          }
          double s = (System.nanoTime() - start) / 1e9;
          System.err.printf(Locale.ROOT, "plain-djl epoch %d: %.0f samples/s%n", e, n / s);
          if (measured) {
            samples += n;
            seconds += s;
            bestEpoch = Math.max(bestEpoch, n / s);
            for (int k = 0; k < 3; k++) {
              nanos[k] += epochNanos[k];
            }
          }
        }
        long correct = 0;
        try (BatchSource ts = test.evalBatches(1000).create(0, 1, manager)) {
          for (Iterator<Batch> it = ts.epoch(0, 0); it.hasNext(); ) {
            try (Batch b = it.next()) {
              NDArray pred = trainer.evaluate(b.features()).head();
              correct += LossSpec.SOFTMAX_CROSS_ENTROPY.correct(b.labels(), pred);
            }
          }
        }
        double step = nanos[0] + nanos[1] + nanos[2];
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("samples_per_s", samples / seconds);
        r.put("samples_per_s_best_epoch", bestEpoch);
        r.put("test_accuracy", correct / (double) test.size());
        r.put("wait_fraction", nanos[0] / step);
        r.put("allreduce_fraction", 0.0);
        r.put("compute_fraction", nanos[1] / step);
        r.put("optimizer_fraction", nanos[2] / step);
        r.put("workers", 1);
        r.put("cluster", "none: one JVM, " + cores + " intra-op threads");
        r.put("data", "IDX in memory");
        return r;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // torch-1 / torch-ddp-2: the PyTorch anchor

  /**
   * The same model, batch and epochs in PyTorch eager with Adam (bin/torch-train.py): in one
   * process with {@code cores} intra-op threads (torch-1), or as DistributedDataParallel over gloo
   * on loopback TCP with {@code cores / 2} threads in each of 2 processes (torch-ddp-2, as spark-2
   * splits the cores). Each epoch is the whole training set split between the ranks (the trainer's
   * steps per epoch); epoch 1 warms up and the rest are measured, as for the trainer. Its processes
   * are stopped by process id.
   */
  private static Map<String, Object> torch(
      Map<String, String> o, Path work, String model, int epochs, int world, int cores)
      throws Exception {
    if (cores % world != 0) {
      throw new IllegalArgumentException(
          "Invalid cores " + cores + ": expected a multiple of " + world);
    }
    if (epochs < 2) {
      throw new IllegalArgumentException(
          "torch modes measure epochs 2..N: expected --epochs/--cnn-epochs >= 2, got " + epochs);
    }
    int batch = batch(o);
    int steps = TRAIN_EXAMPLES / (batch * world);
    Map<String, Object> j =
        TorchTrain.run(
            required(o, "python"),
            required(o, "torch-script"),
            Path.of(o.getOrDefault("data", "/usr/share/datasets/fashion-mnist")),
            model,
            batch,
            steps,
            epochs,
            cores / world,
            world,
            work.resolve("torch-logs"),
            model + "-w" + world,
            Duration.ofMinutes(60));
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("samples_per_s", j.get("samples_per_s"));
    r.put("step_ms", j.get("step_ms"));
    r.put("test_accuracy", Double.NaN);
    r.put("workers", world);
    r.put(
        "cluster",
        world == 1
            ? "PyTorch, 1 process, " + cores + " threads"
            : "PyTorch DDP gloo, " + world + " proc x " + cores / world + " thr");
    r.put("data", "IDX in memory (tensors)");
    r.put("torch_version", j.get("torch"));
    return r;
  }

  // ---------------------------------------------------------------------------------------------
  // spark-1 / spark-2: a standalone cluster of separate JVMs, the driver submitted with SparkSubmit

  private static Map<String, Object> cluster(
      Map<String, String> o,
      Path work,
      Path tfrecords,
      String model,
      int epochs,
      int workers,
      int cores,
      String gradientPrecision,
      String variant)
      throws Exception {
    // variant: "auto" (shared memory, the input pipeline), "tcp" (the ring on TCP) or "memory" (the
    // data in memory, batches made on the training thread: no pipeline threads at all).
    String ringTransport = "tcp".equals(variant) ? "tcp" : "auto";
    if (cores % workers != 0) {
      throw new IllegalArgumentException(
          "Invalid cores " + cores + ": expected a multiple of " + workers);
    }
    int coresPerWorker = cores / workers;
    Path sparkHome = Path.of(required(o, "spark-home"));
    List<Path> jars = appJars(o);
    Path appJar =
        BenchSupport.appJar(required(o, "test-classes"), work.resolve("bench-train-app.jar"));
    List<String> javaOptions = javaOptions(o);
    String name =
        "spark-"
            + workers
            + "-"
            + model
            + ("fp32".equals(gradientPrecision) ? "" : "-" + gradientPrecision)
            + ("auto".equals(variant) ? "" : "-" + variant);
    Path runDir = work.resolve("cluster-" + name);
    deleteRecursively(runDir);
    Path result = runDir.resolve("result.json");
    try (StandaloneCluster cluster =
        StandaloneCluster.builder()
            .setSparkHome(sparkHome)
            .setWorkDir(runDir)
            .optWorkers(workers)
            .optCoresPerWorker(coresPerWorker)
            .optMemoryPerWorker("3g")
            .optJavaOptions(javaOptions)
            .build()
            .start()) {
      StandaloneCluster.Submission.Builder submission =
          StandaloneCluster.submission()
              .optName(name)
              .setMainClass(TrainBenchmark.class.getName())
              .setAppJar(appJar)
              .addJars(jars)
              .optDriverHeap("2g")
              .conf("spark.executor.extraJavaOptions", String.join(" ", javaOptions))
              .conf("spark.executor.memory", "2g")
              .conf("spark.executor.cores", Integer.toString(coresPerWorker))
              .conf("spark.task.cpus", Integer.toString(coresPerWorker))
              .conf("spark.cores.max", Integer.toString(cores))
              .conf("spark.barrier.sync.timeout", "600s")
              .args(
                  "driver",
                  "--train",
                  tfrecords.resolve("train").toString(),
                  "--test",
                  tfrecords.resolve("test").toString(),
                  "--model",
                  model,
                  "--workers",
                  Integer.toString(workers),
                  "--epochs",
                  Integer.toString(epochs),
                  "--batch",
                  Integer.toString(batch(o)),
                  "--result",
                  result.toString(),
                  "--gradient-precision",
                  gradientPrecision,
                  "--ring-transport",
                  ringTransport,
                  "--data-source",
                  "memory".equals(variant) ? "memory" : "tfrecord",
                  "--data",
                  o.getOrDefault("data", "/usr/share/datasets/fashion-mnist"));
      if (System.getenv("OMP_WAIT_POLICY") != null) {
        // What the plain run's JVM has, set the Spark way for the executors.
        submission.conf("spark.executorEnv.OMP_WAIT_POLICY", System.getenv("OMP_WAIT_POLICY"));
      }
      StandaloneCluster.Application app = cluster.submit(submission.build());
      System.err.println(
          name
              + ": "
              + workers
              + " executor JVM(s) x "
              + coresPerWorker
              + " core(s) at "
              + cluster.masterUrl()
              + ", driver pid "
              + app.pid()
              + ", log "
              + app.log());
      int exit = app.waitFor(Duration.ofMinutes(60));
      if (exit != 0 || !Files.exists(result)) {
        throw new IllegalStateException(
            name + ": the driver exited with " + exit + "; its log ends:\n" + app.logTail(40));
      }
    }
    Map<String, Object> r = new LinkedHashMap<>(parseFlatJson(Files.readString(result)));
    r.put(
        "cluster", "standalone: " + workers + " executor JVM(s) x " + coresPerWorker + " core(s)");
    r.put(
        "data",
        "memory".equals(variant)
            ? "IDX in memory, batches on the training thread"
            : "TFRecord shards via the input pipeline");
    return r;
  }

  /** The submitted application: trains through the input pipeline and writes the figures. */
  private static void driver(Map<String, String> o) throws IOException {
    String model = required(o, "model");
    int workers = Integer.parseInt(required(o, "workers"));
    int epochs = Integer.parseInt(required(o, "epochs"));
    ModelSpec spec = spec(model);
    long[] shape = model.equals("cnn") ? new long[] {1, 28, 28} : new long[] {784};
    DatasetSpec train =
        DatasetSpec.builder()
            .addPath(required(o, "train"))
            .optFormat(DatasetSpec.Format.TFRECORD)
            .addFeature("pixels", shape)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    DatasetSpec test = train.toBuilder().setPaths(List.of(required(o, "test"))).build();
    PipelineOptions options = PipelineOptions.builder().optBatchSize(batch(o)).optSeed(7).build();
    PipelineOptions eval = PipelineOptions.builder().optBatchSize(500).build();
    InMemoryDataset[] memory = null;
    if ("memory".equals(o.get("data-source"))) {
      if (!model.equals("mlp")) {
        throw new IllegalArgumentException(
            "--data-source memory is for the MLP (flat 784-value examples)");
      }
      Path idx = Path.of(required(o, "data"));
      memory =
          new InMemoryDataset[] {
            idx(
                idx.resolve("train-images-idx3-ubyte.gz"),
                idx.resolve("train-labels-idx1-ubyte.gz")),
            idx(idx.resolve("t10k-images-idx3-ubyte.gz"), idx.resolve("t10k-labels-idx1-ubyte.gz"))
          };
    }
    SparkSession spark = SparkSession.builder().appName("bench-train").getOrCreate();
    try {
      DistributedTrainerBuilder builder = DistributedTrainer.builder();
      if (memory == null) {
        builder.setTrainingData(train, options).optValidationData(test, eval);
      } else {
        builder
            .setTrainingData(memory[0].trainBatches(batch(o), 7, true))
            .optValidationData(memory[1].evalBatches(500));
      }
      TrainedModel m =
          builder
              .setModel(spec)
              .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
              .setOptimizer(OptimizerSpec.adam().optLearningRate(LEARNING_RATE).build())
              .setNumWorkers(workers)
              .optEpochs(epochs)
              .optSeed(1)
              .optGradientPrecision(
                  WirePrecision.valueOf(
                      o.getOrDefault("gradient-precision", "fp32").toUpperCase(Locale.ROOT)))
              .optRingTransport(
                  TrainerOption.ringTransport(
                      "ring-transport", o.getOrDefault("ring-transport", "auto")))
              .build()
              .fit(spark);
      List<EpochMetrics> all = m.history().epochs();
      List<EpochMetrics> measured = all.size() > 1 ? all.subList(1, all.size()) : all;
      double samples = 0;
      double seconds = 0;
      double bestEpoch = 0;
      double[] split = new double[4];
      for (EpochMetrics e : measured) {
        bestEpoch = Math.max(bestEpoch, e.samplesPerSecond());
        samples += e.samples();
        seconds += e.samples() / e.samplesPerSecond();
        split[0] += e.dataWaitSeconds();
        split[1] += e.computeSeconds();
        split[2] += e.allReduceSeconds();
        split[3] += e.optimizerSeconds();
      }
      double step = split[0] + split[1] + split[2] + split[3];
      Map<String, Object> r = new LinkedHashMap<>();
      r.put("samples_per_s", samples / seconds);
      r.put("samples_per_s_best_epoch", bestEpoch);
      r.put("test_accuracy", all.get(all.size() - 1).validationAccuracy());
      r.put("wait_fraction", split[0] / step);
      r.put("allreduce_fraction", split[2] / step);
      r.put("compute_fraction", split[1] / step);
      r.put("optimizer_fraction", split[3] / step);
      r.put("workers", workers);
      Files.writeString(Path.of(required(o, "result")), toJson(r));
      for (EpochMetrics e : all) {
        System.out.println("epoch " + e.toJson());
      }
    } finally {
      spark.stop();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // data

  // ---------------------------------------------------------------------------------------------
  // output

  /**
   * One line per model and mode: the run with the highest samples/s of its rounds (the least
   * disturbed by other load on the machine; every run is in the JSON lines), with the median of the
   * rounds next to it; then the targets, checked on those runs.
   */
  private static void printTable(List<Map<String, Object>> rows) {
    Map<String, List<Map<String, Object>>> byKey = new LinkedHashMap<>();
    for (Map<String, Object> r : rows) {
      byKey.computeIfAbsent(r.get("model") + " " + label(r), k -> new ArrayList<>()).add(r);
    }
    Map<String, Map<String, Object>> best = new LinkedHashMap<>();
    Map<String, Double> median = new LinkedHashMap<>();
    byKey.forEach(
        (k, runs) -> {
          double[] v = runs.stream().mapToDouble(TrainBenchmark::rate).sorted().toArray();
          median.put(
              k, v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2);
          best.put(
              k, runs.stream().max(Comparator.comparingDouble(TrainBenchmark::rate)).orElseThrow());
        });
    System.out.printf(
        Locale.ROOT,
        "%-5s %-14s %-38s %4s %10s %10s %9s %8s %6s %9s %8s %9s%n",
        "model",
        "mode",
        "cluster",
        "runs",
        "samples/s",
        "median",
        "vs plain",
        "test_acc",
        "wait",
        "allreduce",
        "compute",
        "optimizer");
    best.forEach(
        (k, r) -> {
          Map<String, Object> base = best.get(r.get("model") + " plain-djl");
          double ratio = base == null ? Double.NaN : rate(r) / rate(base);
          System.out.printf(
              Locale.ROOT,
              "%-5s %-14s %-38s %4d %10.0f %10.0f %8.2fx %8.4f %6.3f %9.3f %8.3f %9.3f%n",
              r.get("model"),
              label(r),
              r.get("cluster"),
              byKey.get(k).size(),
              rate(r),
              median.get(k),
              ratio,
              num(r, "test_accuracy"),
              num(r, "wait_fraction"),
              num(r, "allreduce_fraction"),
              num(r, "compute_fraction"),
              num(r, "optimizer_fraction"));
        });
    Map<String, Object> torch1 = best.get("mlp torch-1");
    Map<String, Object> ddp = best.get("mlp torch-ddp-2");
    Map<String, Object> spark1 = best.get("mlp spark-1");
    Map<String, Object> spark2 = best.get("mlp spark-2");
    if (torch1 != null && spark1 != null) {
      double ratio = rate(spark1) / rate(torch1);
      System.out.printf(
          Locale.ROOT,
          "Against PyTorch (MLP, fastest runs): spark-1 %.2fx PyTorch in one process (target >= 0.82x,"
              + " goal 1.0x): %s%n",
          ratio,
          ratio >= 0.82 ? "met" : "MISSED");
    }
    if (ddp != null && spark2 != null) {
      double ratio = rate(spark2) / rate(ddp);
      System.out.printf(
          Locale.ROOT,
          "Against PyTorch (MLP, fastest runs): spark-2 %.2fx PyTorch DDP over gloo (target >="
              + " 1.38x): %s%n",
          ratio,
          ratio >= 1.38 ? "met" : "MISSED");
    }
    System.out.println(
        "Targets (MLP): spark-1 >= 0.90x plain-djl; spark-2 wait + allreduce <= 0.10 of step time;"
            + " test accuracy >= 0.88.");
    Map<String, Object> base = best.get("mlp plain-djl");
    best.forEach(
        (k, r) -> {
          if (!r.get("model").equals("mlp")) {
            return;
          }
          double acc = num(r, "test_accuracy");
          if (Double.isNaN(acc)) {
            return; // the PyTorch anchor is not evaluated
          }
          StringBuilder sb =
              new StringBuilder(
                  String.format(
                      Locale.ROOT,
                      "  mlp %-14s test accuracy %.4f: %s",
                      label(r),
                      acc,
                      acc >= 0.88 ? "met" : "MISSED"));
          if (r.get("mode").equals("spark-1") && base != null) {
            double ratio = rate(r) / rate(base);
            sb.append(
                String.format(
                    Locale.ROOT, "; %.2fx plain-djl: %s", ratio, ratio >= 0.9 ? "met" : "MISSED"));
          }
          if (r.get("mode").equals("spark-2")) {
            double f = num(r, "wait_fraction") + num(r, "allreduce_fraction");
            sb.append(
                String.format(
                    Locale.ROOT, "; wait + allreduce %.3f: %s", f, f <= 0.10 ? "met" : "MISSED"));
          }
          System.out.println(sb);
        });
  }

  /** The mode, with the gradient precision when it is not FP32 (spark-2/bf16). */
  private static String label(Map<String, Object> r) {
    Object p = r.get("gradient_precision");
    return r.get("mode")
        + ("bf16".equals(p) || "fp16".equals(p) ? "/" + p : "")
        + ("tcp".equals(r.get("ring_transport")) ? "/tcp" : "")
        + (String.valueOf(r.get("data")).startsWith("IDX in memory,") ? "/mem" : "");
  }

  private static double rate(Map<String, Object> r) {
    return num(r, "samples_per_s");
  }

  private static double num(Map<String, Object> r, String key) {
    Object v = r.get(key);
    return v instanceof Number n ? n.doubleValue() : Double.NaN;
  }

  private static int batch(Map<String, String> o) {
    return Integer.parseInt(o.getOrDefault("batch", BATCH));
  }
}
