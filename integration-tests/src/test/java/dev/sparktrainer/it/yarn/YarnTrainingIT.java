package dev.sparktrainer.it.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.cli.SparkTrainerCli;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * {@code spark-submit --master yarn} of the command line's {@code train} on a real YARN cluster: a
 * MiniYARNCluster (one ResourceManager, one NodeManager whose containers are separate JVMs) with a
 * MiniDFSCluster as its default file system, both in this JVM on loopback (see {@link MiniHadoop}).
 * The submit is Spark's own {@code SparkSubmit} in a child JVM, run from the SPARK_HOME Maven
 * assembles ({@code integration-tests/spark-home/target/spark-home}, with spark-yarn under {@code
 * -Pspark-3.5,yarn-it}) with {@code HADOOP_CONF_DIR} pointing at the mini clusters' configuration,
 * exactly as a user runs it against a real cluster. Nothing is downloaded: {@code
 * spark.yarn.jars=local:SPARK_HOME/jars/*} (the containers read Spark's jars from this machine),
 * DJL runs offline from the PyTorch natives inside the shaded jar, which is uploaded to the HDFS
 * staging directory like any application jar.
 *
 * <p>The digits sample is converted to TFRecord shards on HDFS, then trained with 2 barrier tasks
 * in 2 executor containers of 1 core each (dynamic allocation off), checkpoints and the model on
 * HDFS: once in client mode (the driver is the submitting JVM) and once in cluster mode (the driver
 * runs in the ApplicationMaster's container). Each run must end with YARN's final status SUCCEEDED,
 * a held-out accuracy of at least 0.9, the model, metrics.json (master yarn, 2 workers) and
 * checkpoints on HDFS, and exactly two executor containers, each having run tasks and started DJL's
 * PyTorch engine.
 *
 * <p>Needs spark-yarn, which Maven Central has for the Spark 3.5 line only (3.5.6), hence its own
 * profile, not part of the default {@code mvn verify}:
 *
 * <pre>
 * mvn -B -ntp -Pspark-3.5,yarn-it -pl integration-tests -am verify -Dtest=NONE -Dsurefire.failIfNoSpecifiedTests=false
 * </pre>
 *
 * About 2.7 minutes on 2 cores shared with other builds (clusters and conversion ~40 s, client-mode
 * run ~57 s, cluster-mode run ~65 s); the whole command, compiling the modules from clean, ~3.8
 * minutes.
 *
 * <p>Logs: {@code integration-tests/target/yarn-it/} (the submits) and {@code
 * integration-tests/target/test/data/YarnTrainingIT/yarn-*&#47;YarnTrainingIT-logDir-nm-0_0/} (the
 * containers, by application and container id).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class YarnTrainingIT {
  private static final Duration SUBMIT_TIMEOUT = Duration.ofMinutes(10);
  private static final double MIN_ACCURACY = 0.9;
  private static final Pattern HELD_OUT = Pattern.compile("Held-out accuracy: (\\d+\\.\\d+)");
  private static final Pattern FINAL_VAL_ACCURACY =
      Pattern.compile("\"final\": \\{[^}]*\"val_accuracy\": ([0-9.]+)");

  private static Path sparkHome;
  private static Path shadedJar;
  private static List<String> javaOpens;
  private static Path work;
  private static MiniHadoop hadoop;
  private static String data;

  @BeforeAll
  static void startClusters() throws Exception {
    sparkHome = Path.of(required("sparktrainer.it.sparkHome")).toAbsolutePath();
    shadedJar = Path.of(required("sparktrainer.it.shadedJar")).toAbsolutePath();
    try (Stream<Path> jars = Files.list(sparkHome.resolve("jars"))) {
      List<String> yarnJars =
          jars.map(p -> p.getFileName().toString())
              .filter(n -> n.startsWith("spark-yarn_"))
              .collect(Collectors.toList());
      assertThat(yarnJars)
          .as(
              "spark-yarn in %s/jars: this test needs a YARN-capable SPARK_HOME, built with"
                  + " mvn -Pspark-3.5,yarn-it -pl integration-tests -am verify",
              sparkHome)
          .hasSize(1);
    }
    assertThat(shadedJar).as("the shaded jar (mvn -pl spark-trainer -am package)").isRegularFile();
    javaOpens = List.of(required("sparktrainer.it.javaOpens").trim().split("\\s+"));
    work = Files.createDirectories(Path.of("target", "yarn-it").toAbsolutePath());

    hadoop = MiniHadoop.start(YarnTrainingIT.class.getSimpleName(), work.resolve("hadoop-conf"));
    data = hadoop.hdfsRoot() + "/data/digits";
    convertDigitsToHdfs();
  }

  @AfterAll
  static void stopClusters() {
    if (hadoop != null) {
      hadoop.close();
    }
  }

  /**
   * The bundled digits CSV to TFRecord shards on HDFS, as bin/quickstart does (embedded local
   * Spark).
   */
  private static void convertDigitsToHdfs() throws IOException {
    Path csv = work.resolve("digits.csv.gz");
    try (InputStream in =
        SparkTrainerCli.class.getClassLoader().getResourceAsStream("sample-data/digits.csv.gz")) {
      assertThat(in).as("sample-data/digits.csv.gz on the class path (spark-trainer)").isNotNull();
      Files.copy(in, csv, StandardCopyOption.REPLACE_EXISTING);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int exit =
        new SparkTrainerCli(
                new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8),
                Map.of())
            .run(
                new String[] {
                  "convert",
                  "--input",
                  csv.toString(),
                  "--label",
                  "_c64",
                  "--feature-column",
                  "pixels",
                  "--feature-scale",
                  "0.0625",
                  "--test-fraction",
                  "0.2",
                  "--shards",
                  "4",
                  "--output",
                  data,
                  "--master",
                  "local[2]",
                  "--conf",
                  "spark.ui.enabled=false"
                });
    assertThat(exit).as("convert to %s: %s%s", data, out, err).isZero();
  }

  @Test
  @Order(1)
  void trainsInClientMode() throws Exception {
    checkTraining("client");
  }

  @Test
  @Order(2)
  void trainsInClusterMode() throws Exception {
    checkTraining("cluster");
  }

  private void checkTraining(String deployMode) throws Exception {
    String job = hadoop.hdfsRoot() + "/jobs/digits-" + deployMode;
    String name = "YarnTrainingIT " + deployMode;
    long started = System.nanoTime();
    Submit submit =
        submit(
            name,
            deployMode,
            List.of(
                "train",
                "--data",
                data + "/train",
                "--validation-data",
                data + "/test",
                "--features",
                "pixels",
                "--label",
                "label",
                "--num-classes",
                "10",
                "--model",
                "mlp:128,64",
                "--workers",
                "2",
                "--epochs",
                "10",
                "--batch-size",
                "32",
                "--learning-rate",
                "0.003",
                "--output",
                job + "/run",
                "--checkpoint-dir",
                job + "/ckpt",
                "--progress",
                "log"));
    System.err.printf(
        Locale.ROOT,
        "YarnTrainingIT: %s mode: spark-submit exited %d after %.1f s%n",
        deployMode,
        submit.exit,
        (System.nanoTime() - started) / 1e9);

    ApplicationReport app;
    try {
      app = hadoop.finishedApplication(name, Duration.ofMinutes(1));
    } catch (AssertionError e) {
      throw new AssertionError(
          e.getMessage()
              + "; spark-submit exited "
              + submit.exit
              + ", its log ("
              + submit.log
              + ") ends:\n"
              + tail(submit.log, 60),
          e);
    }
    String diagnostics =
        "\n--- spark-submit ("
            + submit.log
            + ") ---\n"
            + tail(submit.log, 60)
            + "\n--- containers of "
            + app.getApplicationId()
            + " ---\n"
            + hadoop.containerLogTails(app, 40);
    assertThat(submit.exit).as("spark-submit exit code%s", diagnostics).isZero();
    assertThat(app.getYarnApplicationState())
        .as("YARN state of %s%s", app.getApplicationId(), diagnostics)
        .isEqualTo(YarnApplicationState.FINISHED);
    assertThat(app.getFinalApplicationStatus())
        .as(
            "YARN final status of %s (%s)%s",
            app.getApplicationId(), app.getDiagnostics(), diagnostics)
        .isEqualTo(FinalApplicationStatus.SUCCEEDED);

    // The driver's report: on this JVM's child in client mode, in the AM container in cluster mode.
    String driverOut =
        deployMode.equals("client")
            ? Files.readString(submit.log, StandardCharsets.UTF_8)
            : hadoop.containerLog(app, 1, "stdout");
    Matcher heldOut = HELD_OUT.matcher(driverOut);
    assertThat(heldOut.find())
        .as("'Held-out accuracy' in the driver's output%s", diagnostics)
        .isTrue();
    assertThat(Double.parseDouble(heldOut.group(1)))
        .as("held-out accuracy%s", diagnostics)
        .isGreaterThanOrEqualTo(MIN_ACCURACY);

    String metrics = hadoop.readString(job + "/run/metrics.json");
    assertThat(metrics).contains("\"master\": \"yarn\"").contains("\"workers\": 2");
    Matcher finalAccuracy = FINAL_VAL_ACCURACY.matcher(metrics);
    assertThat(finalAccuracy.find()).as("final val_accuracy in metrics.json: %s", metrics).isTrue();
    assertThat(Double.parseDouble(finalAccuracy.group(1))).isGreaterThanOrEqualTo(MIN_ACCURACY);
    assertThat(hadoop.list(job + "/run/model")).as("the model on HDFS").isNotEmpty();

    List<String> checkpoints =
        hadoop.list(job + "/ckpt").stream()
            .map(s -> s.getPath().getName())
            .filter(n -> n.matches("ckpt-\\d{19}\\.bin"))
            .collect(Collectors.toList());
    assertThat(checkpoints).as("checkpoints in %s/ckpt", job).isNotEmpty();

    // Two executor containers (1 core each), each holding a model replica: DJL's PyTorch engine
    // started
    // there, from the natives in the shaded jar, extracted to DJL_CACHE_DIR.
    Map<String, String> executorLogs = hadoop.executorLogs(app);
    assertThat(executorLogs)
        .as("executor containers of %s%s", app.getApplicationId(), diagnostics)
        .hasSize(2);
    executorLogs.forEach(
        (container, log) ->
            assertThat(log)
                .as(
                    "container %s ran tasks and started DJL's PyTorch engine%s",
                    container, diagnostics)
                .containsPattern("Running task \\d+\\.\\d+ in stage \\d+\\.\\d+")
                .contains("PtEngine"));
    try (Stream<Path> natives = Files.list(work.resolve("djl-cache").resolve("pytorch"))) {
      assertThat(natives.count())
          .as("PyTorch natives extracted to %s/djl-cache/pytorch", work)
          .isPositive();
    }
  }

  /**
   * Runs {@code SparkSubmit --master yarn} in a child JVM and waits for it; stops it if it
   * overruns.
   */
  private Submit submit(String name, String deployMode, List<String> appArgs)
      throws IOException, InterruptedException {
    Path djlCache = Files.createDirectories(work.resolve("djl-cache"));
    String executorOptions = String.join(" ", javaOpens) + " -Dai.djl.offline=true";
    Map<String, String> conf = new LinkedHashMap<>();
    conf.put("spark.yarn.jars", "local:" + sparkHome.resolve("jars") + "/*");
    conf.put("spark.executor.instances", "2");
    conf.put("spark.executor.cores", "1");
    conf.put("spark.executor.memory", "1g");
    conf.put("spark.dynamicAllocation.enabled", "false");
    conf.put("spark.yarn.am.memory", "512m");
    conf.put("spark.driver.memory", "1g");
    conf.put("spark.executor.extraJavaOptions", executorOptions);
    conf.put("spark.driver.extraJavaOptions", executorOptions);
    conf.put("spark.yarn.am.extraJavaOptions", String.join(" ", javaOpens));
    // The containers' Java: this JVM's (a cluster whose default Java is older sets these the same
    // way).
    conf.put("spark.executorEnv.JAVA_HOME", System.getProperty("java.home"));
    conf.put("spark.yarn.appMasterEnv.JAVA_HOME", System.getProperty("java.home"));
    // DJL extracts the PyTorch natives from the shaded jar into DJL_CACHE_DIR (default ~/.djl.ai).
    conf.put("spark.executorEnv.DJL_CACHE_DIR", djlCache.toString());
    conf.put("spark.yarn.appMasterEnv.DJL_CACHE_DIR", djlCache.toString());
    conf.put("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1");
    conf.put("spark.yarn.appMasterEnv.SPARK_LOCAL_IP", "127.0.0.1");
    conf.put("spark.yarn.maxAppAttempts", "1");
    conf.put("spark.ui.enabled", "false");
    conf.put("spark.barrier.sync.timeout", "300s");
    // Spark waits for every requested executor before the first job (default: 80 % for 30 s).
    conf.put("spark.scheduler.minRegisteredResourcesRatio", "1.0");
    conf.put("spark.scheduler.maxRegisteredResourcesWaitingTime", "120s");
    if (deployMode.equals("client")) {
      conf.put("spark.driver.host", "127.0.0.1");
      conf.put("spark.driver.bindAddress", "127.0.0.1");
    }

    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(javaOpens);
    cmd.addAll(
        List.of(
            "-Xmx1g",
            "-Dai.djl.offline=true",
            "-cp",
            hadoop.confDir() + ":" + sparkHome.resolve("jars") + "/*",
            "org.apache.spark.deploy.SparkSubmit",
            "--master",
            "yarn",
            "--deploy-mode",
            deployMode,
            "--name",
            name,
            "--class",
            SparkTrainerCli.class.getName()));
    conf.forEach((k, v) -> cmd.addAll(List.of("--conf", k + "=" + v)));
    cmd.add(shadedJar.toString());
    cmd.addAll(appArgs);

    Path log = work.resolve("submit-" + deployMode + ".log");
    Files.writeString(log, String.join(" ", cmd) + "\n\n", StandardCharsets.UTF_8);
    ProcessBuilder pb =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    Map<String, String> env = pb.environment();
    env.put("SPARK_HOME", sparkHome.toString());
    env.put("SPARK_SCALA_VERSION", "2.13");
    env.put("HADOOP_CONF_DIR", hadoop.confDir().toString());
    env.put("SPARK_LOCAL_IP", "127.0.0.1");
    env.put("DJL_CACHE_DIR", djlCache.toString());
    Process p = pb.start();
    try {
      if (!p.waitFor(SUBMIT_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
        throw new AssertionError(
            "spark-submit ("
                + deployMode
                + " mode, pid "
                + p.pid()
                + ") did not finish in "
                + SUBMIT_TIMEOUT
                + "; its log ends:\n"
                + tail(log, 60));
      }
      return new Submit(p.exitValue(), log);
    } finally {
      MiniHadoop.stopTree(p.toHandle());
    }
  }

  private static String required(String property) {
    String v = System.getProperty(property);
    if (v == null || v.isBlank()) {
      throw new IllegalStateException(
          "System property "
              + property
              + " is not set: run this test through"
              + " Maven (mvn -Pspark-3.5,yarn-it -pl integration-tests -am verify), which sets it");
    }
    return v;
  }

  static String tail(Path file, int lines) {
    try {
      List<String> all = Files.readAllLines(file, StandardCharsets.UTF_8);
      return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
    } catch (IOException e) {
      return "(cannot read " + file + ": " + e + ")";
    }
  }

  private record Submit(int exit, Path log) {}
}
