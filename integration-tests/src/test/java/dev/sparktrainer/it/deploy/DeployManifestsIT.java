package dev.sparktrainer.it.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceInformation$;
import org.apache.spark.resource.ResourceRequest;
import org.apache.spark.resource.ResourceRequirement;
import org.apache.spark.resource.ResourceUtils$;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import scala.jdk.javaapi.CollectionConverters;

/**
 * deploy/ checked against the build: the Dockerfiles (base image = the pinned Spark, their inputs
 * in the build output, non-root), the Kubernetes SparkApplication, pod templates and the equivalent
 * spark-submit, the YARN submit script (run with a spark-submit that records its arguments), and
 * the GPU discovery script (its JSON read by Spark's own parser). Every spark.* key must be one
 * Spark knows ({@link SparkKeys}), every trainer option one {@code spark-trainer train --help}
 * lists.
 */
class DeployManifestsIT {
  static final String MAIN_CLASS = "dev.sparktrainer.cli.SparkTrainerCli";
  static Path root;
  static SparkKeys keys;
  static Set<String> trainFlags;
  @TempDir static Path tmp;

  @BeforeAll
  static void load() throws Exception {
    Assumptions.assumeFalse(
        Boolean.getBoolean("sparktrainer.it.deployChecksSkip"),
        "deploy/ targets the pinned Spark 4 line; this is a Spark 3.5 build (-Pspark-3.5)");
    root = Build.root();
    keys = SparkKeys.load();
    trainFlags = Build.cliFlags("train");
  }

  // ---- shared checks (also used by AirflowDagIT) ----

  /** The trainer's command line: {@code train} and only options {@code train --help} lists. */
  static void checkTrainerArgs(List<String> appArgs, String where) {
    assertThat(appArgs)
        .as(where + ": the trainer's command")
        .isNotEmpty()
        .first()
        .isEqualTo("train");
    for (String a : appArgs.subList(1, appArgs.size())) {
      if (a.startsWith("--")) {
        String flag = a.substring(2).split("=", 2)[0];
        assertThat(trainFlags)
            .as(where + ": --" + flag + " must be an option of spark-trainer train")
            .contains(flag);
      }
    }
  }

  static void checkKeys(Map<String, String> conf, String where) {
    List<String> problems = new ArrayList<>();
    conf.keySet()
        .forEach(
            k -> {
              String p = keys.problem(k);
              if (p != null) {
                problems.add(p);
              }
            });
    assertThat(problems).as(where + ": Spark configuration keys").isEmpty();
  }

  /** Spark's own parse of the GPU settings: executor GPUs (with discovery script) and task GPUs. */
  static void checkGpuResources(Map<String, String> conf, String discoveryScript, String where) {
    SparkConf sc = new SparkConf(false);
    conf.forEach(sc::set);
    List<ResourceRequest> executor =
        CollectionConverters.asJava(
            ResourceUtils$.MODULE$.parseAllResourceRequests(sc, "spark.executor"));
    assertThat(executor).as(where + ": executor resources").hasSize(1);
    ResourceRequest gpu = executor.get(0);
    assertThat(gpu.id().resourceName()).isEqualTo("gpu");
    assertThat(gpu.amount()).as(where + ": GPUs per executor").isGreaterThanOrEqualTo(1);
    assertThat(gpu.discoveryScript()).as(where + ": discovery script").isPresent();
    assertThat(gpu.discoveryScript().get()).isEqualTo(discoveryScript);
    List<ResourceRequirement> task =
        CollectionConverters.asJava(
            ResourceUtils$.MODULE$.parseResourceRequirements(sc, "spark.task"));
    assertThat(task).as(where + ": task resources").hasSize(1);
    assertThat(task.get(0).resourceName()).isEqualTo("gpu");
    assertThat(task.get(0).amount()).isGreaterThanOrEqualTo(1);
  }

  /** The workers must fit in the executors' task slots (barrier mode launches them all at once). */
  static void checkSlots(Map<String, String> conf, List<String> appArgs, String where) {
    int workers = Integer.parseInt(appArg(appArgs, "--workers"));
    int executors = Integer.parseInt(conf.get("spark.executor.instances"));
    int cores = Integer.parseInt(conf.get("spark.executor.cores"));
    int taskCpus = Integer.parseInt(conf.getOrDefault("spark.task.cpus", "1"));
    int perExecutor = cores / taskCpus;
    if (conf.containsKey("spark.task.resource.gpu.amount")) {
      perExecutor =
          Math.min(
              perExecutor,
              (int)
                  (Double.parseDouble(conf.get("spark.executor.resource.gpu.amount"))
                      / Double.parseDouble(conf.get("spark.task.resource.gpu.amount"))));
    }
    assertThat(perExecutor).as(where + ": one training task per executor JVM").isEqualTo(1);
    assertThat(workers)
        .as(where + ": --workers vs. task slots")
        .isLessThanOrEqualTo(executors * perExecutor);
    assertThat(conf).as(where).containsEntry("spark.dynamicAllocation.enabled", "false");
    assertThat(conf.get("spark.executor.extraJavaOptions"))
        .as(where)
        .contains("-Dai.djl.offline=true");
    assertThat(conf.get("spark.driver.extraJavaOptions"))
        .as(where)
        .contains("-Dai.djl.offline=true");
  }

  static String appArg(List<String> appArgs, String flag) {
    int i = appArgs.indexOf(flag);
    assertThat(i).as(flag + " in " + appArgs).isGreaterThanOrEqualTo(0);
    return appArgs.get(i + 1);
  }

  /** Runs {@code script} with a spark-submit that records its arguments; returns them. */
  static List<String> recordSubmit(Path script, Map<String, String> env) throws Exception {
    Path home = Files.createTempDirectory(tmp, "spark-home");
    Path bin = Files.createDirectories(home.resolve("bin"));
    Path record = home.resolve("argv");
    Path fake = bin.resolve("spark-submit");
    Files.writeString(fake, "#!/usr/bin/env bash\nprintf '%s\\0' \"$@\" > \"$RECORD_ARGS\"\n");
    Files.setPosixFilePermissions(fake, PosixFilePermissions.fromString("rwxr-xr-x"));
    ProcessBuilder pb = new ProcessBuilder("bash", script.toString()).redirectErrorStream(true);
    pb.environment().put("SPARK_HOME", home.toString());
    pb.environment().put("RECORD_ARGS", record.toString());
    pb.environment().putAll(env);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(script + " output: " + out).isZero();
    String raw = Files.readString(record, StandardCharsets.UTF_8);
    List<String> argv = new ArrayList<>(List.of(raw.split("\0", -1)));
    argv.remove(argv.size() - 1); // after the last NUL
    return argv;
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> yaml(Path p) throws IOException {
    return (Map<String, Object>)
        new Yaml(new SafeConstructor(new LoaderOptions())).load(Files.readString(p));
  }

  @SuppressWarnings("unchecked")
  static <T> T at(Map<String, Object> m, String path) {
    Object cur = m;
    for (String k : path.split("\\.")) {
      assertThat(cur).as(path).isInstanceOf(Map.class);
      cur = ((Map<String, Object>) cur).get(k);
    }
    return (T) cur;
  }

  // ---- the images ----

  record Image(String jarDestination, String discoveryScriptDestination) {}

  /** Checks a Dockerfile's final stage; returns where it puts the jar and the discovery script. */
  static Image checkDockerfile(Path file) throws IOException {
    List<Dockerfiles.Stage> stages = Dockerfiles.parse(file);
    String pinned = Build.pom("spark.version");
    assertThat(pinned)
        .isEqualTo(org.apache.spark.package$.MODULE$.SPARK_VERSION()); // the build's Spark
    String sparkImage =
        "apache/spark:"
            + pinned
            + "-scala"
            + Build.pom("scala.binary.version")
            + "-java"
            + Build.pom("maven.compiler.release")
            + "-ubuntu";
    assertThat(stages).as(file + ": stages").isNotEmpty();
    assertThat(stages.stream().map(Dockerfiles.Stage::image))
        .as(file + ": the official Spark image of the pinned version")
        .contains(sparkImage);
    Dockerfiles.Stage last = stages.get(stages.size() - 1);
    Map<String, String> destinations = new HashMap<>();
    for (Dockerfiles.Stage s : stages) {
      for (Dockerfiles.Copy c : s.copies()) {
        if (c.from() == null) {
          for (String src : c.sources()) {
            assertThat(root.resolve(src))
                .as(file + ": COPY input " + src + " (in the build output / repository)")
                .isRegularFile();
            destinations.put(root.resolve(src).normalize().toString(), c.destination());
          }
        } else {
          assertThat(stages.stream().map(Dockerfiles.Stage::alias))
              .as(file + ": COPY --from=" + c.from())
              .contains(c.from());
        }
      }
    }
    String jarDest = destinations.get(Build.shadedJar().normalize().toString());
    assertThat(jarDest).as(file + ": copies the shaded jar").isNotNull();
    assertThat(jarDest).endsWith("/" + Build.shadedJar().getFileName());
    String scriptDest =
        destinations.get(root.resolve("deploy/gpu/discover-gpus.sh").normalize().toString());
    assertThat(scriptDest).as(file + ": copies the GPU discovery script").isNotNull();
    assertThat(last.users())
        .as(file + ": runs as Spark's non-root user 185")
        .isNotEmpty()
        .last()
        .isEqualTo("185");
    return new Image(jarDest, scriptDest);
  }

  @Test
  void imagesBuildOnThePinnedSparkImageWithInputsFromTheBuild() throws IOException {
    Image cpu = checkDockerfile(root.resolve("deploy/docker/Dockerfile"));
    Image cuda = checkDockerfile(root.resolve("deploy/docker/Dockerfile.cuda"));
    assertThat(cuda).isEqualTo(cpu);
    List<Dockerfiles.Stage> stages =
        Dockerfiles.parse(root.resolve("deploy/docker/Dockerfile.cuda"));
    // CUDA as the cuda profile's PyTorch natives (pytorch.flavor cu128 -> CUDA 12.8).
    String flavor =
        Files.readString(root.resolve("spark-trainer/pom.xml"))
            .replaceAll("(?s).*<id>cuda</id>.*?<pytorch.flavor>(cu\\d+)</pytorch.flavor>.*", "$1");
    assertThat(flavor).matches("cu\\d+");
    String cudaVersion =
        flavor.substring(2, flavor.length() - 1) + "." + flavor.substring(flavor.length() - 1);
    Dockerfiles.Stage last = stages.get(stages.size() - 1);
    assertThat(last.image())
        .startsWith("nvidia/cuda:" + cudaVersion + ".")
        .endsWith("-ubuntu22.04");
    assertThat(last.entrypoint()).containsExactly("[ \"/opt/entrypoint.sh\" ]");
    assertThat(
            last.copies().stream().filter(c -> c.from() != null).flatMap(c -> c.sources().stream()))
        .contains("/opt/spark", "/opt/java/openjdk", "/opt/entrypoint.sh");
  }

  /**
   * Every download in an image build is checked against a SHA-256 that the build requires: the
   * build fails before downloading when the checksum is not given (or not 64 hex digits), and
   * {@code sha256sum -c} runs unconditionally after the download. An optional checksum (checked
   * only when set, as the CUDA image's libtorch and DJL sources once were) fails here.
   */
  @Test
  void everyDownloadInAnImageIsVerifiedAgainstARequiredChecksum() throws IOException {
    Pattern download = Pattern.compile("curl [^;|&]*?-o (\\S+) [^;|&]*?\"\\$\\{([A-Z_]+)}\"");
    int downloads = 0;
    for (String name : List.of("Dockerfile", "Dockerfile.cuda")) {
      Path file = root.resolve("deploy/docker/" + name);
      for (Dockerfiles.Stage stage : Dockerfiles.parse(file)) {
        for (String run : stage.runs()) {
          assertThat(run)
              .as(name + ": a download's checksum is never optional")
              .doesNotContainPattern("if \\[ -n \"\\$\\{[A-Z_]*SHA256}\" ]");
          assertThat(run).as(name + ": downloads with curl only").doesNotContain("wget ");
          Matcher m = download.matcher(run);
          while (m.find()) {
            downloads++;
            String out = m.group(1);
            String url = m.group(2);
            assertThat(url).as(name + ": a download's URL is a build argument").endsWith("_URL");
            String sha = url.substring(0, url.length() - "_URL".length()) + "_SHA256";
            String where = name + ": the download of ${" + url + "} to " + out;
            String required = "echo \"${" + sha + "}\" | grep -Eq '^[0-9a-f]{64}$' || {";
            assertThat(run).as(where + " requires " + sha).contains(required);
            assertThat(run.indexOf(required))
                .as(where + ": " + sha + " is required before the download starts")
                .isLessThan(m.start());
            String verify = "echo \"${" + sha + "}  " + out + "\" | sha256sum -c -";
            assertThat(run).as(where + " is verified").contains(verify);
            assertThat(run.indexOf(verify, m.end()))
                .as(where + " is verified after the download")
                .isGreaterThan(m.end());
          }
        }
      }
    }
    assertThat(downloads).as("the CUDA image downloads libtorch and DJL's sources").isEqualTo(2);
  }

  // ---- Kubernetes ----

  @Test
  void sparkApplicationPodTemplatesAndSubmitScriptDescribeTheSameJob() throws Exception {
    Image image = checkDockerfile(root.resolve("deploy/docker/Dockerfile.cuda"));
    Path dir = root.resolve("deploy/kubernetes");
    Map<String, Object> app = yaml(dir.resolve("spark-application.yaml"));
    assertThat(app)
        .containsEntry("apiVersion", "sparkoperator.k8s.io/v1beta2")
        .containsEntry("kind", "SparkApplication");
    Map<String, Object> spec = at(app, "spec");
    assertThat(spec)
        .containsEntry("type", "Scala")
        .containsEntry("mode", "cluster")
        .containsEntry("sparkVersion", Build.pom("spark.version"))
        .containsEntry("mainClass", MAIN_CLASS);
    assertThat(Build.mainClass()).isEqualTo(MAIN_CLASS);
    assertThat(Build.shadedJarHas(MAIN_CLASS)).isTrue();
    assertThat(spec).containsEntry("mainApplicationFile", "local://" + image.jarDestination());
    List<String> arguments =
        ((List<?>) spec.get("arguments")).stream().map(String::valueOf).toList();
    checkTrainerArgs(arguments, "SparkApplication");
    assertThat(arguments).contains("--gpus");
    assertThat(appArg(arguments, "--checkpoint-dir")).matches("(hdfs|s3a)://.+");
    Map<String, String> sparkConf = new LinkedHashMap<>();
    ((Map<?, ?>) spec.get("sparkConf"))
        .forEach(
            (k, v) -> {
              assertThat(v).as("sparkConf " + k + " must be a string").isInstanceOf(String.class);
              sparkConf.put((String) k, (String) v);
            });
    checkKeys(sparkConf, "SparkApplication sparkConf");
    checkGpuResources(sparkConf, image.discoveryScriptDestination(), "SparkApplication");
    assertThat(sparkConf).containsEntry("spark.executor.resource.gpu.vendor", "nvidia.com");
    Map<String, Object> gpu = at(app, "spec.executor.gpu");
    assertThat(gpu)
        .containsEntry("name", "nvidia.com/gpu")
        .containsEntry(
            "quantity", Integer.parseInt(sparkConf.get("spark.executor.resource.gpu.amount")));
    Map<String, Object> restart = at(app, "spec.restartPolicy");
    assertThat(restart).containsEntry("type", "OnFailure");
    assertThat((Integer) restart.get("onFailureRetries")).isPositive();

    // The pod templates: the files, inlined as the operator's driver/executor templates.
    for (String role : List.of("driver", "executor")) {
      Map<String, Object> file = yaml(dir.resolve(role + "-pod-template.yaml"));
      assertThat(file).containsEntry("apiVersion", "v1").containsEntry("kind", "Pod");
      Map<String, Object> inline = at(app, "spec." + role + ".template");
      assertThat(inline)
          .as(role + " template inlined in the SparkApplication")
          .isEqualTo(Map.of("metadata", file.get("metadata"), "spec", file.get("spec")));
      Map<String, Object> security = at(file, "spec.securityContext");
      assertThat(security).containsEntry("runAsNonRoot", true).containsEntry("runAsUser", 185);
      List<Map<String, Object>> containers = at(file, "spec.containers");
      assertThat(containers.get(0)).containsEntry("name", "spark-kubernetes-" + role);
    }
    List<Map<String, Object>> tolerations =
        at(yaml(dir.resolve("executor-pod-template.yaml")), "spec.tolerations");
    assertThat(tolerations).anySatisfy(t -> assertThat(t).containsEntry("key", "nvidia.com/gpu"));

    // The plain spark-submit: the same job.
    List<String> argv = recordSubmit(dir.resolve("submit-k8s.sh"), Map.of());
    SubmitCommand submit = SubmitCommand.parse(argv);
    assertThat(submit.option("--master")).startsWith("k8s://");
    assertThat(submit.option("--deploy-mode")).isEqualTo("cluster");
    assertThat(submit.option("--class")).isEqualTo(MAIN_CLASS);
    assertThat(submit.jar()).isEqualTo(String.valueOf(spec.get("mainApplicationFile")));
    assertThat(submit.appArgs()).isEqualTo(arguments);
    checkKeys(submit.conf(), "submit-k8s.sh");
    assertThat(submit.conf()).containsAllEntriesOf(sparkConf);
    Map<String, Object> driver = at(app, "spec.driver");
    Map<String, Object> executor = at(app, "spec.executor");
    assertThat(submit.conf())
        .containsEntry(
            "spark.kubernetes.namespace", String.valueOf((Object) at(app, "metadata.namespace")))
        .containsEntry("spark.kubernetes.container.image", String.valueOf(spec.get("image")))
        .containsEntry(
            "spark.kubernetes.container.image.pullPolicy",
            String.valueOf(spec.get("imagePullPolicy")))
        .containsEntry(
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            String.valueOf(driver.get("serviceAccount")))
        .containsEntry("spark.driver.cores", String.valueOf(driver.get("cores")))
        .containsEntry("spark.driver.memory", String.valueOf(driver.get("memory")))
        .containsEntry("spark.executor.instances", String.valueOf(executor.get("instances")))
        .containsEntry("spark.executor.cores", String.valueOf(executor.get("cores")))
        .containsEntry("spark.executor.memory", String.valueOf(executor.get("memory")))
        .containsEntry(
            "spark.kubernetes.driver.podTemplateFile",
            dir.resolve("driver-pod-template.yaml").toString())
        .containsEntry(
            "spark.kubernetes.executor.podTemplateFile",
            dir.resolve("executor-pod-template.yaml").toString());
    checkSlots(submit.conf(), submit.appArgs(), "submit-k8s.sh");
  }

  // ---- YARN ----

  @Test
  void yarnScriptSubmitsTheShadedJarWithGpuSchedulingQueueAndHdfsCheckpoints() throws Exception {
    Path script = root.resolve("deploy/yarn/submit-yarn.sh");
    SubmitCommand submit = SubmitCommand.parse(recordSubmit(script, Map.of("QUEUE", "research")));
    assertThat(submit.option("--master")).isEqualTo("yarn");
    assertThat(submit.option("--deploy-mode")).isEqualTo("cluster");
    assertThat(submit.option("--queue")).isEqualTo("research");
    assertThat(submit.option("--class")).isEqualTo(MAIN_CLASS).isEqualTo(Build.mainClass());
    assertThat(Path.of(submit.jar())).isEqualTo(Build.shadedJar());
    Path files = Path.of(submit.option("--files"));
    assertThat(files).isRegularFile().isEqualTo(root.resolve("deploy/gpu/discover-gpus.sh"));
    assertThat(Files.isExecutable(files)).isTrue();
    // Shipped with --files into the container's working directory, where the executor runs it.
    checkGpuResources(submit.conf(), "./" + files.getFileName(), "submit-yarn.sh");
    assertThat(submit.conf()).containsEntry("spark.yarn.resourceGpuDeviceName", "yarn.io/gpu");
    assertThat(keys.yarnKeys())
        .contains("spark.yarn.resourceGpuDeviceName", "spark.yarn.maxAppAttempts");
    checkKeys(submit.conf(), "submit-yarn.sh");
    checkSlots(submit.conf(), submit.appArgs(), "submit-yarn.sh");
    checkTrainerArgs(submit.appArgs(), "submit-yarn.sh");
    assertThat(submit.appArgs()).contains("--gpus");
    assertThat(submit.appArg("--checkpoint-dir")).startsWith("hdfs://");

    // Without the jar: a clear message before anything is submitted.
    ProcessBuilder pb = new ProcessBuilder("bash", script.toString()).redirectErrorStream(true);
    pb.environment().put("SPARK_TRAINER_JAR", tmp.resolve("missing.jar").toString());
    pb.environment().put("SPARK_HOME", tmp.resolve("no-spark").toString());
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).isEqualTo(2);
    assertThat(out).contains("no shaded jar at " + tmp.resolve("missing.jar"));
  }

  // ---- the GPU discovery script ----

  private static String[] discover(Map<String, String> env) throws Exception {
    // [0] stdout, [1] stderr
    ProcessBuilder pb = new ProcessBuilder(root.resolve("deploy/gpu/discover-gpus.sh").toString());
    pb.environment().putAll(env);
    Path err = Files.createTempFile(tmp, "discover", ".err");
    pb.redirectError(err.toFile());
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).isZero();
    return new String[] {out, Files.readString(err)};
  }

  private static Path fakeNvidiaSmi(String body) throws IOException {
    Path f = Files.createTempFile(tmp, "nvidia-smi", "");
    Files.writeString(f, "#!/usr/bin/env bash\n" + body + "\n");
    Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rwxr-xr-x"));
    return f;
  }

  @Test
  void discoveryScriptPrintsWhatSparkParses() throws Exception {
    // Two GPUs, as `nvidia-smi --query-gpu=index --format=csv,noheader` prints them (the fake
    // refuses other arguments).
    Path two =
        fakeNvidiaSmi(
            "[ \"$*\" = \"--query-gpu=index --format=csv,noheader\" ] || { echo \"bad args: $*\" >&2; exit 3; }\n"
                + "printf '0\\n1\\n'");
    String[] r = discover(Map.of("NVIDIA_SMI", two.toString()));
    ResourceInformation info = ResourceInformation$.MODULE$.parseJson(r[0]);
    assertThat(info.name()).isEqualTo("gpu");
    assertThat(info.addresses()).containsExactly("0", "1");
    assertThat(r[1]).isEmpty();

    // No nvidia-smi: an empty list (Spark then refuses the executor) and the reason on stderr.
    r = discover(Map.of("NVIDIA_SMI", tmp.resolve("no-such-nvidia-smi").toString()));
    info = ResourceInformation$.MODULE$.parseJson(r[0]);
    assertThat(info.name()).isEqualTo("gpu");
    assertThat(info.addresses()).isEmpty();
    assertThat(r[1]).contains("no GPU found").contains("is not on the PATH");

    // nvidia-smi without a driver.
    Path broken =
        fakeNvidiaSmi(
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9");
    r = discover(Map.of("NVIDIA_SMI", broken.toString()));
    assertThat(ResourceInformation$.MODULE$.parseJson(r[0]).addresses()).isEmpty();
    assertThat(r[1])
        .contains(
            "failed: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver");
  }
}
