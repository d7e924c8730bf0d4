package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.appJars;
import static dev.sparktrainer.train.BenchSupport.deleteRecursively;
import static dev.sparktrainer.train.BenchSupport.javaOptions;
import static dev.sparktrainer.train.BenchSupport.list;
import static dev.sparktrainer.train.BenchSupport.options;
import static dev.sparktrainer.train.BenchSupport.parseFlatJson;
import static dev.sparktrainer.train.BenchSupport.perModel;
import static dev.sparktrainer.train.BenchSupport.positive;
import static dev.sparktrainer.train.BenchSupport.required;
import static dev.sparktrainer.train.BenchSupport.toJson;

import dev.sparktrainer.cluster.StandaloneCluster;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * bin/bench-scaling: data-parallel training where the network is the bottleneck. A Spark standalone
 * cluster of separate JVMs (master, 2 workers of 1 core, their executors, the driver) runs inside a
 * network namespace whose loopback is rate-limited with {@code tc tbf}; every byte between the
 * processes (Spark RPC, the application's jars, the ring all-reduce over TCP) crosses that one
 * link, in both directions. Not a test.
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
 *
 * <p>This class is the benchmark JVM's plan: options, link check, data, cluster, one submission per
 * model. {@link ScalingDriver} is the submitted application, {@link ScalingTorchAnchor} the PyTorch
 * anchor, {@link ScalingReport} the rows, table and targets, {@link ScalingLink} the link's rate
 * and its check, {@link ScalingModels} and {@link ScalingSetup} the models and their data.
 */
public final class ScalingBenchmark {
  private ScalingBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("driver")) {
      ScalingDriver.run(options(Arrays.copyOfRange(args, 1, args.length)));
      return;
    }
    System.exit(run(options(args)));
  }

  private static int run(Map<String, String> o) throws Exception {
    Path data = Path.of(o.getOrDefault("data", "/usr/share/datasets/fashion-mnist"));
    Path work = Path.of(o.getOrDefault("work", "target/bench/scaling")).toAbsolutePath();
    Path out = Path.of(o.getOrDefault("out", "target/bench/scaling.jsonl")).toAbsolutePath();
    String linkCommand = required(o, "link-command");
    List<String> models =
        list(o, "models", "mlp,cnn,resnet", ScalingModels.MODELS::contains, "mlp, cnn or resnet");
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
    Map<String, Integer> batch =
        perModel(o, "batch", ScalingModels.BATCH, ScalingModels.MODELS, false);
    Map<String, Integer> steps =
        perModel(o, "steps", ScalingModels.STEPS, ScalingModels.MODELS, false);
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
    double[] check = ScalingLink.linkCheck(linkCommand);
    System.out.printf(
        Locale.ROOT,
        "Link check at 1 Gbit/s: one TCP stream %.3f Gbit/s; two at once %.3f Gbit/s in"
            + " total.%n",
        check[0],
        check[1]);

    List<ScalingSetup> setups = ScalingSetup.of(data, work, models, batch, steps);
    for (ScalingSetup s : setups) {
      System.out.printf(
          Locale.ROOT,
          "Model %-6s %s: %,d parameters (%.1f MB as FP32); per-worker batch %d, %d steps"
              + " per epoch, %d epochs, measured over epochs 2..%d%n",
          s.model(),
          ScalingModels.describe(s.model()),
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
      for (ScalingSetup setup : setups) {
        List<ScalingDriver.Run> plan = plan(modes, links, placements, overlaps, rounds);
        if (plan.isEmpty()) {
          rows.addAll(
              ScalingTorchAnchor.run(
                  o, setup, data, epochs, modes, links, rounds, linkCommand, json));
          continue;
        }
        // The application starts on an unlimited link (its jars travel to the executors over it).
        ScalingLink.setLink(linkCommand, "0");
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
        for (Map<String, Object> row : ScalingReport.finish(setup, modelRows, epochs, check[0])) {
          json.println(toJson(row));
          if (row.containsKey("error")) {
            failed++;
          }
          rows.add(row);
        }
        rows.addAll(
            ScalingTorchAnchor.run(
                o, setup, data, epochs, modes, links, rounds, linkCommand, json));
      }
    } finally {
      try {
        ScalingLink.setLink(linkCommand, "0");
      } catch (Exception e) {
        System.err.println(
            "Could not remove the link's limit (the script deletes the namespace anyway): " + e);
      }
    }
    ScalingReport.printTable(rows);
    ScalingReport.printTargets(rows);
    System.out.println("JSON lines appended to " + out);
    return failed == 0 ? 0 : 1;
  }

  /**
   * Per round: spark-1 once per placement (on the unlimited link: it sends nothing over the ring),
   * then spark-2 per link speed, placement and overlap — a link's runs together, so the rate
   * changes once per link speed.
   */
  private static List<ScalingDriver.Run> plan(
      List<String> modes,
      List<String> links,
      List<String> placements,
      List<String> overlaps,
      int rounds) {
    List<ScalingDriver.Run> plan = new ArrayList<>();
    for (int round = 1; round <= rounds; round++) {
      if (modes.contains("spark-1")) {
        for (String p : placements) {
          plan.add(new ScalingDriver.Run("spark-1", true, p, "0", round));
        }
      }
      if (modes.contains("spark-2")) {
        for (String link : links) {
          for (String p : placements) {
            for (String ov : overlaps) {
              plan.add(new ScalingDriver.Run("spark-2", ov.equals("on"), p, link, round));
            }
          }
        }
      }
    }
    return plan;
  }

  private static String[] driverArgs(
      Map<String, String> o,
      ScalingSetup s,
      int epochs,
      List<ScalingDriver.Run> plan,
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
                String.join(",", plan.stream().map(ScalingDriver.Run::encode).toList())));
    if (o.containsKey("bucket-mb")) {
      a.add("--bucket-mb");
      a.add(o.get("bucket-mb"));
    }
    return a.toArray(new String[0]);
  }

  private static boolean isRate(String v) {
    try {
      return new BigDecimal(v).signum() >= 0;
    } catch (NumberFormatException e) {
      return false;
    }
  }
}
