package dev.sparktrainer.it.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.cluster.StandaloneCluster;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.train.Digits;
import dev.sparktrainer.train.FaultInjectingCli;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * What the multi-JVM cluster tests share: a Spark standalone cluster from the Maven-assembled
 * {@code SPARK_HOME} ({@code integration-tests/spark-home}), the digits as TFRecord shards, the
 * {@code train} command submitted with the shaded jar, and reading what the processes wrote (driver
 * and executor logs, {@code metrics.json}, the checkpoint directory).
 *
 * <p>Every process is started by {@link StandaloneCluster} and stopped by process id; a test that
 * signals an executor finds it among the live descendants of this cluster's workers ({@link
 * StandaloneCluster#executor(long)}) by the process id the training task logs, never by name.
 */
final class ClusterRuns {
  /**
   * Training command line shared by the runs: small MLP, 4 epochs of 22 steps, checkpoints every
   * 10.
   */
  static final int EPOCHS = 4;

  static final int STEPS_PER_EPOCH =
      22; // 1,437 training digits / (2 workers x batch 32), remainder dropped
  static final int CHECKPOINT_EVERY = 10;

  /** What an uninterrupted run reaches on the held-out digits (about 0.95 here). */
  static final double MIN_ACCURACY = 0.9;

  /**
   * "rank 1: ring listener on 127.0.0.1:40123 (job 1a2b.., stage attempt 0, executor pid 4242)".
   */
  static final Pattern LISTENER =
      Pattern.compile(
          "rank (\\d+): ring listener on ([^ ]+):(\\d+) \\(job ([0-9a-f]+), stage attempt (\\d+), executor pid (\\d+)\\)");

  private static final ObjectMapper JSON = new ObjectMapper();
  private static Path digits;

  private ClusterRuns() {}

  static Path sparkHome() {
    Path home = Path.of(required("sparktrainer.it.sparkHome"));
    assertThat(home.resolve("jars"))
        .as("SPARK_HOME jars (built by integration-tests/spark-home)")
        .isDirectory();
    return home;
  }

  static Path shadedJar() {
    Path jar = Path.of(required("sparktrainer.it.shadedJar"));
    assertThat(jar).as("the shaded trainer jar (mvn -pl spark-trainer package)").isRegularFile();
    return jar;
  }

  private static String required(String property) {
    String v = System.getProperty(property);
    if (v == null || v.isBlank()) {
      throw new IllegalStateException(
          "System property "
              + property
              + " is not set: run through Failsafe"
              + " (mvn -pl integration-tests -am verify -Dit.test=...)");
    }
    return v;
  }

  /**
   * The JVM flags Spark 4 needs on Java 17 (the parent pom's list, as this JVM got it), no heap
   * size.
   */
  static List<String> sparkJavaOptions() {
    List<String> out = new ArrayList<>();
    for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      if (a.startsWith("--add-opens")
          || a.startsWith("-Djdk.reflect")
          || a.startsWith("-Dio.netty")) {
        out.add(a);
      }
    }
    assertThat(out).as("--add-opens flags of the test JVM (Failsafe argLine)").isNotEmpty();
    return out;
  }

  /**
   * A two-worker cluster (one core each) under {@code work}; {@code extra} adds worker settings.
   */
  static StandaloneCluster startCluster(Path work, Consumer<StandaloneCluster.Builder> extra)
      throws IOException, InterruptedException {
    StandaloneCluster.Builder b =
        StandaloneCluster.builder()
            .setSparkHome(sparkHome())
            .setWorkDir(work)
            .optWorkers(2)
            .optCoresPerWorker(1)
            .optMemoryPerWorker("1500m")
            .optDaemonHeap("256m")
            .optJavaOptions(sparkJavaOptions())
            // PyTorch's OpenMP threads sleep instead of spinning while they wait (a shared 2-core
            // machine)
            .optEnvironment("OMP_WAIT_POLICY", "PASSIVE");
    extra.accept(b);
    return b.build().start();
  }

  // ---------------------------------------------------------------------------------------------
  // data

  /**
   * The bundled digits (1,797 8x8 images) as TFRecord Examples ({@code pixels}: 64 floats in 0..1,
   * {@code label}: int64): {@code train/} 4 shards of 80 %, {@code test/} 1 shard of 20 %, a fixed
   * shuffle. Written once per test JVM.
   */
  static synchronized Path digits(Path root) throws IOException {
    if (digits != null) {
      return digits;
    }
    InMemoryDataset all = Digits.load();
    List<float[]> rows = new ArrayList<>();
    List<Long> labels = new ArrayList<>();
    for (int i = 0; i < all.size(); i++) {
      rows.add(all.features(i));
      labels.add(all.label(i));
    }
    Integer[] order = new Integer[rows.size()];
    Arrays.setAll(order, i -> i);
    Collections.shuffle(Arrays.asList(order), new Random(42));
    int train = rows.size() * 8 / 10;
    Path dir = Files.createDirectories(root.resolve("digits"));
    int shards = 4;
    int per = (train + shards - 1) / shards;
    for (int s = 0; s < shards; s++) {
      write(
          dir.resolve("train").resolve(String.format(Locale.ROOT, "part-%05d.tfrecord", s)),
          rows,
          labels,
          Arrays.asList(order).subList(s * per, Math.min(train, (s + 1) * per)));
    }
    write(
        dir.resolve("test").resolve("part-00000.tfrecord"),
        rows,
        labels,
        Arrays.asList(order).subList(train, rows.size()));
    digits = dir;
    return dir;
  }

  private static void write(Path file, List<float[]> rows, List<Long> labels, List<Integer> which)
      throws IOException {
    Files.createDirectories(file.getParent());
    ExampleEncoder enc = new ExampleEncoder();
    try (OutputStream os = new BufferedOutputStream(Files.newOutputStream(file));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int i : which) {
        enc.reset();
        enc.beginFeature("pixels", FeatureKind.FLOAT);
        enc.addFloats(rows.get(i), 0, 64);
        enc.endFeature();
        enc.beginFeature("label", FeatureKind.INT64);
        enc.addInt64(labels.get(i));
        enc.endFeature();
        w.write(enc.finishExample());
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // submitting

  /** A {@code train} run of the digits: its output and checkpoint directories, its settings. */
  static final class Train {
    final String name;
    final Path output;
    final Path checkpoints;
    final List<String> executorOptions = new ArrayList<>();

    /** {@link FaultInjectingCli}'s leading arguments: the faults this run's driver installs. */
    final List<String> faults = new ArrayList<>();

    final Map<String, String> conf = new LinkedHashMap<>();
    final List<String> extraArgs = new ArrayList<>();
    int workers = 2;

    Train(Path root, String name) {
      this.name = name;
      this.output = root.resolve(name).resolve("out");
      this.checkpoints = root.resolve(name).resolve("ckpt");
    }

    Train executorOption(String option) {
      executorOptions.add(option);
      return this;
    }

    /**
     * Testing fault: {@code rank} waits {@code millis} after the rendezvous, in the first stage
     * attempt, before it joins the ring (submitted through {@link FaultInjectingCli}).
     */
    Train ringConnectDelay(int rank, long millis) {
      faults.addAll(List.of(FaultInjectingCli.RING_CONNECT_DELAY, rank + ":" + millis));
      return this;
    }

    /** As {@link #ringConnectDelay(int, long)}, in jobs of {@code workers} workers only. */
    Train ringConnectDelay(int rank, long millis, int workers) {
      faults.addAll(
          List.of(FaultInjectingCli.RING_CONNECT_DELAY, rank + ":" + millis + ":" + workers));
      return this;
    }

    /**
     * Testing fault: the writer of step {@code step}'s checkpoint waits {@code millis} between
     * writing its temporary file and renaming it (submitted through {@link FaultInjectingCli}).
     */
    Train checkpointRenameDelay(long step, long millis) {
      faults.addAll(List.of(FaultInjectingCli.CHECKPOINT_RENAME_DELAY, step + ":" + millis));
      return this;
    }

    Train conf(String key, String value) {
      conf.put(key, value);
      return this;
    }

    /** {@code --workers} (and {@code spark.cores.max}); default 2. */
    Train workers(int n) {
      workers = n;
      return this;
    }

    Train args(String... args) {
      extraArgs.addAll(List.of(args));
      return this;
    }

    /** The {@code train} arguments (what a user types after the jar). */
    List<String> commandLine(Path data) {
      List<String> a =
          new ArrayList<>(
              List.of(
                  "train",
                  "--data",
                  data.resolve("train").toString(),
                  "--validation-data",
                  data.resolve("test").toString(),
                  "--features",
                  "pixels",
                  "--label",
                  "label",
                  "--num-classes",
                  "10",
                  "--model",
                  "mlp:64",
                  "--workers",
                  Integer.toString(workers),
                  "--epochs",
                  Integer.toString(EPOCHS),
                  "--batch-size",
                  "32",
                  "--learning-rate",
                  "0.01",
                  "--seed",
                  "7",
                  "--output",
                  output.toString(),
                  "--checkpoint-dir",
                  checkpoints.toString(),
                  "--checkpoint-every-steps",
                  Integer.toString(CHECKPOINT_EVERY),
                  "--progress",
                  "log",
                  "--skip-label-check"));
      a.addAll(extraArgs);
      return a;
    }

    /**
     * Submits it as {@code spark-submit --master spark://... --deploy-mode client --class
     * dev.sparktrainer.cli.SparkTrainerCli <shaded jar> train ...} would, under {@code appName}.
     * With faults to inject, the main class is {@link FaultInjectingCli} instead, from a small jar
     * given with {@code --jars} (client mode: loaded with the application jar, by the same loader).
     */
    StandaloneCluster.Application submit(StandaloneCluster cluster, Path data, String appName)
        throws IOException {
      List<String> execOpts = new ArrayList<>(sparkJavaOptions());
      execOpts.add("-Dai.djl.offline=true");
      execOpts.addAll(executorOptions);
      StandaloneCluster.Submission.Builder s =
          StandaloneCluster.submission()
              .optName(appName)
              .setMainClass(
                  faults.isEmpty()
                      ? "dev.sparktrainer.cli.SparkTrainerCli"
                      : FaultInjectingCli.class.getName())
              .setAppJar(shadedJar())
              .conf("spark.executor.extraJavaOptions", String.join(" ", execOpts))
              .conf("spark.executor.memory", "1g")
              .conf("spark.executor.cores", "1")
              .conf("spark.task.cpus", "1")
              .conf("spark.cores.max", Integer.toString(workers))
              .conf("spark.executorEnv.OMP_WAIT_POLICY", "PASSIVE")
              .args(
                  Stream.concat(faults.stream(), commandLine(data).stream())
                      .toArray(String[]::new));
      if (!faults.isEmpty()) {
        s.addJars(List.of(faultInjectionJar(output.getParent().resolve("fault-injection.jar"))));
      }
      conf.forEach(s::conf);
      return cluster.submit(s.build());
    }

    /** A jar of {@link FaultInjectingCli} (a class of this module's test classes). */
    private static Path faultInjectionJar(Path jar) throws IOException {
      String entry = FaultInjectingCli.class.getName().replace('.', '/') + ".class";
      byte[] bytes;
      try (var in = FaultInjectingCli.class.getClassLoader().getResourceAsStream(entry)) {
        if (in == null) {
          throw new IOException("Cannot find " + entry + " on the test class path");
        }
        bytes = in.readAllBytes();
      }
      Files.createDirectories(jar.getParent());
      try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar))) {
        out.putNextEntry(new JarEntry(entry));
        out.write(bytes);
        out.closeEntry();
      }
      return jar;
    }

    StandaloneCluster.Application submit(StandaloneCluster cluster, Path data) throws IOException {
      return submit(cluster, data, name);
    }

    JsonNode metrics() throws IOException {
      return JSON.readTree(output.resolve("metrics.json").toFile());
    }

    double validationAccuracy() throws IOException {
      return metrics().path("final").path("val_accuracy").asDouble(Double.NaN);
    }

    String parameterHash() throws IOException {
      return metrics().path("final").path("parameter_hash").asText();
    }

    /**
     * The resumes metrics.json records: {@code step}, {@code epoch}, {@code stage_attempt}... each.
     */
    List<JsonNode> resumes() throws IOException {
      List<JsonNode> out = new ArrayList<>();
      metrics().path("resumes").forEach(out::add);
      return out;
    }

    /** Steps of the complete checkpoints in the directory. */
    List<Long> checkpointSteps() throws IOException {
      List<Long> out = new ArrayList<>();
      for (Path p : files(checkpoints)) {
        Matcher m = Pattern.compile("ckpt-(\\d+)\\.bin").matcher(p.getFileName().toString());
        if (m.matches()) {
          out.add(Long.parseLong(m.group(1)));
        }
      }
      out.sort(Comparator.naturalOrder());
      return out;
    }

    /** Temporary checkpoint files ({@code _tmp-<step>-<uuid>}) in the directory. */
    List<Path> checkpointTemps() throws IOException {
      return files(checkpoints).stream()
          .filter(p -> p.getFileName().toString().startsWith("_tmp-"))
          .toList();
    }
  }

  /** Waits for a successful exit; fails with the driver's log tail otherwise. */
  static void assertSucceeds(StandaloneCluster.Application app, Duration timeout)
      throws InterruptedException {
    int exit = app.waitFor(timeout);
    assertThat(exit).as("driver exit code; its log ends:\n" + app.logTail(60)).isZero();
  }

  // ---------------------------------------------------------------------------------------------
  // reading what the processes wrote

  static List<Path> files(Path dir) throws IOException {
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(Files::isRegularFile).sorted().toList();
    }
  }

  /** Every executor's stderr under the workers' directories (all applications, all executors). */
  static List<Path> executorLogs(StandaloneCluster cluster, int workers) throws IOException {
    List<Path> out = new ArrayList<>();
    for (int w = 0; w < workers; w++) {
      Path dir = cluster.workerDir(w);
      if (!Files.isDirectory(dir)) {
        continue;
      }
      try (Stream<Path> s = Files.walk(dir)) {
        s.filter(p -> p.getFileName().toString().equals("stderr")).forEach(out::add);
      }
    }
    return out;
  }

  /** The executor logs of one application (by the application id in the workers' directories). */
  static String executorLogText(StandaloneCluster cluster, String appId) throws IOException {
    StringBuilder sb = new StringBuilder();
    for (Path p : executorLogs(cluster, cluster.workerCount())) {
      if (p.toString().contains("/" + appId + "/")) {
        sb.append(read(p));
      }
    }
    return sb.toString();
  }

  static String read(Path p) {
    try {
      return Files.readString(p, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** A rank's ring listener as its task logged it. */
  record RankInfo(
      int rank,
      String host,
      int port,
      String jobId,
      int stageAttempt,
      long pid,
      String appId,
      Path log) {}

  /** The listener lines of the application whose driver is {@code app}, every attempt. */
  static List<RankInfo> ranks(StandaloneCluster cluster, StandaloneCluster.Application app)
      throws IOException {
    String appId = appId(app).orElse(null);
    List<RankInfo> out = new ArrayList<>();
    if (appId == null) {
      return out;
    }
    for (Path p : executorLogs(cluster, cluster.workerCount())) {
      if (!p.toString().contains("/" + appId + "/")) {
        continue;
      }
      Matcher m = LISTENER.matcher(read(p));
      while (m.find()) {
        out.add(
            new RankInfo(
                Integer.parseInt(m.group(1)),
                m.group(2),
                Integer.parseInt(m.group(3)),
                m.group(4),
                Integer.parseInt(m.group(5)),
                Long.parseLong(m.group(6)),
                appId,
                p));
      }
    }
    return out;
  }

  /** Rank {@code rank} of stage attempt {@code attempt}, waiting for its task to log it. */
  static RankInfo awaitRank(
      StandaloneCluster cluster,
      StandaloneCluster.Application app,
      int rank,
      int attempt,
      Duration timeout)
      throws Exception {
    return await(
        "rank " + rank + " of stage attempt " + attempt + " to log its ring listener",
        timeout,
        app,
        () -> {
          try {
            return ranks(cluster, app).stream()
                .filter(r -> r.rank() == rank && r.stageAttempt() == attempt)
                .findFirst();
          } catch (IOException e) {
            return Optional.empty();
          }
        });
  }

  private static final Pattern APP_ID = Pattern.compile("(app-\\d{14}-\\d{4})");

  /** The application id, from the driver's log (Spark logs it when the application registers). */
  static Optional<String> appId(StandaloneCluster.Application app) {
    if (!Files.exists(app.log())) {
      return Optional.empty();
    }
    Matcher m = APP_ID.matcher(read(app.log()));
    return m.find() ? Optional.of(m.group(1)) : Optional.empty();
  }

  /**
   * Polls {@code probe} until it returns a value; fails after {@code timeout}, or at once when the
   * driver exits first (with its log tail).
   */
  static <T> T await(
      String what, Duration timeout, StandaloneCluster.Application app, Supplier<Optional<T>> probe)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      Optional<T> v = probe.get();
      if (v.isPresent()) {
        return v.get();
      }
      if (app != null && !app.isAlive()) {
        // one last look: the condition may have come true just before the exit
        v = probe.get();
        if (v.isPresent()) {
          return v.get();
        }
        throw new AssertionError(
            "The driver exited before " + what + "; its log ends:\n" + app.logTail(60));
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "Timed out after "
                + timeout
                + " waiting for "
                + what
                + (app == null ? "" : "; the driver's log ends:\n" + app.logTail(40)));
      }
      Thread.sleep(50); // files written by other processes: nothing to wait on but polling
    }
  }

  /** Sends {@code signal} (STOP, CONT, KILL) to a process of this cluster, by pid. */
  static void signal(ProcessHandle p, String signal) throws IOException, InterruptedException {
    Process kill =
        new ProcessBuilder("kill", "-" + signal, Long.toString(p.pid()))
            .redirectErrorStream(true)
            .start();
    String out = new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(kill.waitFor()).as("kill -" + signal + " " + p.pid() + ": " + out).isZero();
  }
}
