package dev.sparktrainer.it.deploy;

import static dev.sparktrainer.it.deploy.DeployManifestsIT.MAIN_CLASS;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.cli.SparkTrainerCli;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * deploy/airflow's DAG: it compiles with python3; imported against a test shim of the Airflow
 * classes it uses (Airflow itself cannot be installed here), its schedule, retries, checkpoint
 * directory per run, gate and the spark-submit command its SparkSubmitOperator would run are
 * checked against the build; and that exact command — its settings pointed at local directories and
 * a CPU-only executor through the DAG's own SPARK_TRAINER_* variables, the connection's master
 * replaced by local[2] — runs here through Spark's SparkSubmit on the digits: killed after its
 * first checkpoint and run again, as an Airflow retry would, it resumes and finishes; then the
 * DAG's gate reads the metrics.json it wrote.
 */
class AirflowDagIT {
  private static final String DS = "2025-01-02";
  static Path root;
  static Path dag;
  static Path driver;
  @TempDir static Path tmp;

  @BeforeAll
  static void paths() throws Exception {
    Assumptions.assumeFalse(
        Boolean.getBoolean("sparktrainer.it.deployChecksSkip"),
        "deploy/ targets the pinned Spark 4 line; this is a Spark 3.5 build (-Pspark-3.5)");
    DeployManifestsIT.load(); // keys and flags
    root = Build.root();
    dag = root.resolve("deploy/airflow/spark_trainer_dag.py");
    driver = root.resolve("integration-tests/src/test/resources/airflow-shim/dag_driver.py");
  }

  record Py(int code, String out, String err) {}

  /**
   * Runs python3 with the DAG's settings in {@code env} (and none of the caller's SPARK_TRAINER_*).
   */
  static Py python(List<String> args, Map<String, String> env) throws Exception {
    List<String> cmd = new ArrayList<>(List.of("python3", "-B"));
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().keySet().removeIf(k -> k.startsWith("SPARK_TRAINER_"));
    pb.environment().putAll(env);
    Path err = Files.createTempFile(tmp, "python", ".err");
    pb.redirectError(err.toFile());
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("python3 " + args).isTrue();
    return new Py(p.exitValue(), out, Files.readString(err));
  }

  static JsonNode describe(String ds, Map<String, String> env) throws Exception {
    Py r =
        python(
            List.of(driver.toString(), dag.toString(), "describe", "--ds", ds, "--master", "yarn"),
            env);
    assertThat(r.code()).as("dag_driver describe: " + r.err()).isZero();
    JsonNode doc = new ObjectMapper().readTree(r.out());
    assertThat(doc.get("dags")).hasSize(1);
    return doc.get("dags").get(0);
  }

  static JsonNode task(JsonNode dagNode, String id) {
    for (JsonNode t : dagNode.get("tasks")) {
      if (t.get("task_id").asText().equals(id)) {
        return t;
      }
    }
    throw new AssertionError("No task " + id + " in " + dagNode);
  }

  static List<String> strings(JsonNode array) {
    List<String> out = new ArrayList<>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }

  @Test
  void dagCompilesWithPython3() throws Exception {
    Py r =
        python(
            List.of(
                "-c",
                "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')",
                dag.toString()),
            Map.of());
    assertThat(r.code()).as(r.err()).isZero();
  }

  @Test
  void dagTrainsOnYarnOnAScheduleWithRetriesThatResumeAndAGateOnMetrics() throws Exception {
    JsonNode d = describe(DS, Map.of());
    assertThat(d.get("args").get("schedule").asText()).isEqualTo("@daily");
    assertThat(d.get("args").get("catchup").asBoolean()).isFalse();
    JsonNode train = task(d, "train");
    JsonNode gate = task(d, "gate_on_metrics");
    JsonNode publish = task(d, "publish_model");
    assertThat(train.get("operator").asText()).isEqualTo("SparkSubmitOperator");
    assertThat(gate.get("operator").asText()).isEqualTo("ShortCircuitOperator");
    assertThat(strings(train.get("downstream"))).containsExactly("gate_on_metrics");
    assertThat(strings(gate.get("downstream"))).containsExactly("publish_model");
    assertThat(train.get("kwargs").get("retries").asInt())
        .as("Airflow retries of the training task")
        .isPositive();

    List<String> cmd = strings(train.get("spark_submit"));
    assertThat(cmd.get(0)).isEqualTo("spark-submit");
    SubmitCommand submit = SubmitCommand.parse(cmd.subList(1, cmd.size()));
    assertThat(submit.option("--master")).isEqualTo("yarn");
    assertThat(submit.option("--class")).isEqualTo(MAIN_CLASS).isEqualTo(Build.mainClass());
    assertThat(Path.of(submit.jar()).getFileName()).isEqualTo(Build.shadedJar().getFileName());
    assertThat(submit.conf())
        .containsEntry("spark.submit.deployMode", "cluster")
        .containsKey("spark.yarn.queue")
        // one attempt per Airflow try: the retry is Airflow's, and it resumes from the checkpoint
        .containsEntry("spark.yarn.maxAppAttempts", "1");
    DeployManifestsIT.checkKeys(submit.conf(), "the DAG's spark-submit");
    DeployManifestsIT.checkGpuResources(
        submit.conf(), "./discover-gpus.sh", "the DAG's spark-submit");
    assertThat(Path.of(submit.option("--files")).getFileName().toString())
        .isEqualTo("discover-gpus.sh");
    DeployManifestsIT.checkSlots(submit.conf(), submit.appArgs(), "the DAG's spark-submit");
    DeployManifestsIT.checkTrainerArgs(submit.appArgs(), "the DAG's spark-submit");
    assertThat(submit.appArgs()).contains("--gpus", "--overwrite");

    // Every retry of a run has the same checkpoint directory (so it resumes); each run its own.
    String ckpt = submit.appArg("--checkpoint-dir");
    String output = submit.appArg("--output");
    assertThat(ckpt).startsWith("hdfs://").contains("20250102");
    List<String> again = strings(task(describe(DS, Map.of()), "train").get("spark_submit"));
    assertThat(SubmitCommand.parse(again.subList(1, again.size())).appArg("--checkpoint-dir"))
        .isEqualTo(ckpt);
    List<String> nextDay =
        strings(task(describe("2025-01-03", Map.of()), "train").get("spark_submit"));
    assertThat(SubmitCommand.parse(nextDay.subList(1, nextDay.size())).appArg("--checkpoint-dir"))
        .isNotEqualTo(ckpt);
    // The gate reads the metrics.json of this run's --output.
    assertThat(gate.get("kwargs").get("op_kwargs").get("metrics_path").asText())
        .isEqualTo(output + "/metrics.json");
    assertThat(publish.get("kwargs").get("bash_command").asText()).contains(output + "/model");
  }

  @Test
  void theDagsSparkSubmitCommandTrainsHereResumesAfterAKillAndPassesTheGate() throws Exception {
    // A tiny dataset: the digits as TFRecord shards, made by the command line's convert.
    Path csv = tmp.resolve("digits.csv.gz");
    try (InputStream in = AirflowDagIT.class.getResourceAsStream("/sample-data/digits.csv.gz")) {
      Files.copy(in, csv);
    }
    Path data = tmp.resolve("data");
    ByteArrayOutputStream cliOut = new ByteArrayOutputStream();
    int converted =
        new SparkTrainerCli(
                new PrintStream(cliOut, true, StandardCharsets.UTF_8),
                new PrintStream(cliOut, true, StandardCharsets.UTF_8),
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
                  data.toString()
                });
    assertThat(converted).as(cliOut.toString(StandardCharsets.UTF_8)).isZero();

    Map<String, String> env = new HashMap<>();
    env.put("SPARK_TRAINER_JAR", Build.shadedJar().toString());
    env.put("SPARK_TRAINER_DATA", data.toString());
    env.put("SPARK_TRAINER_BASE_DIR", tmp.resolve("jobs").toString());
    env.put("SPARK_TRAINER_MODELS_DIR", tmp.resolve("models").toString());
    env.put("SPARK_TRAINER_DEPLOY_MODE", "client");
    env.put("SPARK_TRAINER_EXECUTOR_CORES", "1");
    env.put("SPARK_TRAINER_GPUS_PER_EXECUTOR", "0");
    env.put("SPARK_TRAINER_EPOCHS", "6");
    env.put("SPARK_TRAINER_MIN_ACCURACY", "0.9");
    List<String> cmd = strings(task(describe(DS, env), "train").get("spark_submit"));
    List<String> args = new ArrayList<>(cmd.subList(1, cmd.size()));
    int master = args.indexOf("--master");
    assertThat(args.get(master + 1)).isEqualTo("yarn");
    args.set(master + 1, "local[2]"); // the connection's master, here
    SubmitCommand submit = SubmitCommand.parse(args);
    DeployManifestsIT.checkKeys(submit.conf(), "the DAG's local spark-submit");
    assertThat(submit.option("--files")).isNull();
    Path ckpt = Path.of(submit.appArg("--checkpoint-dir"));
    Path output = Path.of(submit.appArg("--output"));

    List<String> options = new ArrayList<>(Build.jvmOptions());
    options.addAll(
        List.of(
            "-Djava.io.tmpdir=" + Files.createDirectories(tmp.resolve("spark-tmp")),
            "-Dspark.ui.enabled=false"));
    List<String> java =
        ChildJvm.java(options, Build.sparkClassPath(), "org.apache.spark.deploy.SparkSubmit", args);
    Map<String, String> jvmEnv = Map.of("SPARK_LOCAL_IP", "127.0.0.1");

    // First try: killed (SIGKILL, as a lost Airflow worker or container) once a checkpoint is on
    // disk.
    try (ChildJvm first = ChildJvm.start(java, jvmEnv, tmp, tmp.resolve("try1.log"))) {
      boolean checkpointed = first.waitUntil(() -> checkpoints(ckpt) > 0, Duration.ofMinutes(3));
      assertThat(checkpointed).as("a checkpoint in " + ckpt + "\n" + first.describe()).isTrue();
      assertThat(first.isAlive())
          .as("the first try was still training when it was killed\n" + first.describe())
          .isTrue();
      first.kill();
    }
    assertThat(output.resolve("metrics.json")).doesNotExist();

    // The retry: the same command.
    try (ChildJvm retry = ChildJvm.start(java, jvmEnv, tmp, tmp.resolve("try2.log"))) {
      assertThat(retry.waitFor(Duration.ofMinutes(4)))
          .as("retry still running\n" + retry.describe())
          .isTrue();
      assertThat(retry.exitValue()).as(retry.describe()).isZero();
      String out = retry.output();
      assertThat(out)
          .as(retry.describe())
          .contains("Held-out accuracy: ")
          .contains("epoch 6 done in");
      // It resumed: epoch 1 came from the checkpoint, not from training again.
      assertThat(Pattern.compile("(?m)^epoch 1 done in").matcher(out).find())
          .as(retry.describe())
          .isFalse();
    }
    JsonNode metrics = new ObjectMapper().readTree(output.resolve("metrics.json").toFile());
    assertThat(metrics.get("epochs")).hasSize(6);
    double accuracy = metrics.get("final").get("val_accuracy").asDouble();
    assertThat(output.resolve("model/model.params")).isRegularFile();

    // The DAG's gate on that metrics.json: passes at 0.9, stops the run above the accuracy reached.
    Py gate =
        python(
            List.of(driver.toString(), dag.toString(), "gate", "gate_on_metrics", "--ds", DS), env);
    assertThat(gate.code()).as(gate.err()).isZero();
    assertThat(gate.out())
        .as("the gate logs what it decided on")
        .contains(
            String.format(
                Locale.ROOT, "Held-out accuracy %.4f after 6 epochs (target 0.9)", accuracy));
    assertThat(lastLine(gate.out()))
        .as("accuracy " + accuracy + ": " + gate.out())
        .isEqualTo("{\"result\": true}");
    Map<String, String> strict = new HashMap<>(env);
    strict.put("SPARK_TRAINER_MIN_ACCURACY", String.valueOf(accuracy + 1e-4));
    gate =
        python(
            List.of(driver.toString(), dag.toString(), "gate", "gate_on_metrics", "--ds", DS),
            strict);
    assertThat(lastLine(gate.out())).as(gate.out()).isEqualTo("{\"result\": false}");
    // No metrics.json for another day's run: the gate fails instead of letting the run through.
    gate =
        python(
            List.of(
                driver.toString(), dag.toString(), "gate", "gate_on_metrics", "--ds", "2025-01-05"),
            env);
    assertThat(gate.code()).isNotZero();
    assertThat(gate.err()).contains("FileNotFoundError").contains("20250105");
  }

  static String lastLine(String s) {
    String[] lines = s.strip().split("\n");
    return lines[lines.length - 1].strip();
  }

  static long checkpoints(Path dir) {
    if (!Files.isDirectory(dir)) {
      return 0;
    }
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(p -> p.getFileName().toString().matches("ckpt-\\d{19}\\.bin")).count();
    } catch (IOException e) {
      return 0; // listed while being written: look again
    }
  }
}
