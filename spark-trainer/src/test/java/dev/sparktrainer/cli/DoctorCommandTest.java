package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code spark-trainer doctor}: on this machine's CPU through the command line's entry point, and
 * with deliberately wrong libtorch settings in child JVMs (DJL reads them from the environment, and
 * a JVM loads PyTorch once).
 */
class DoctorCommandTest {
  @TempDir Path tmp;

  @Test
  void passesOnTheCpuAndSaysWhatItFound() {
    int sessions = CliContext.SESSIONS.get();
    CliRunner r = CliRunner.run("doctor");
    assertThat(r.code()).as(r.out() + r.err()).isEqualTo(SparkTrainerCli.EXIT_OK);
    assertThat(r.out())
        .contains("libtorch:          2.7.1+cpu at ")
        .contains("(bundled in the jar)")
        .contains("JNI:")
        .contains("pytorch-jni 2.7.1-0.35.1, built for libtorch 2.7.1")
        .contains("engine:            PyTorch 2.7.1 loaded")
        .contains("GPUs:              none visible to PyTorch")
        .contains("step on cpu():     ok (forward, backward, update: loss ")
        .contains("OK: PyTorch trains on the CPU here");
    // the loss after the update is printed lower than before (the step checks it, too)
    String step = r.out().replaceAll("(?s).*loss ([0-9.]+) -> ([0-9.]+),.*", "$1 $2");
    String[] losses = step.split(" ");
    assertThat(Double.parseDouble(losses[1])).isLessThan(Double.parseDouble(losses[0]));
    assertThat(r.err()).isEmpty();
    assertThat(CliContext.SESSIONS.get()).as("no Spark session").isEqualTo(sessions);
  }

  @Test
  void refusesAClusterMasterAndABadGpuIndex() {
    CliRunner r = CliRunner.run("doctor", "--master", "yarn");
    assertThat(r.code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(r.error()).startsWith("error: doctor checks the machine it runs on, not a cluster");
    r = CliRunner.run("doctor", "--gpu", "x");
    assertThat(r.code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(r.error()).isEqualTo("error: Invalid --gpu 'x': expected a GPU index (0, 1, ...)");
  }

  @Test
  void anEmptyLibraryPathIsNamedNotSilentlyReplacedByTheBundledCpuLibtorch() throws Exception {
    Path empty = Files.createDirectories(tmp.resolve("empty"));
    Child c = doctor(Map.of("PYTORCH_LIBRARY_PATH", empty.toString()));
    assertThat(c.code).as(c.out + c.err).isEqualTo(1);
    assertThat(c.errorLines())
        .containsExactly(
            "error: PYTORCH_LIBRARY_PATH="
                + empty
                + " has no libtorch (no libtorch.so there), so DJL would quietly load the CPU libtorch"
                + " bundled in the jar: point it at the lib directory of a libtorch (/opt/libtorch/lib in"
                + " deploy/docker/Dockerfile.cuda, docs/cluster.md#gpus) or unset it");
    assertThat(c.out).contains("PROBLEM: PYTORCH_LIBRARY_PATH=" + empty + " has no libtorch");
  }

  @Test
  void aVersionThatIsNeitherBundledNorInstalledIsNamedOffline() throws Exception {
    Child c = doctor(Map.of("PYTORCH_VERSION", "2.11.0"));
    assertThat(c.code).as(c.out + c.err).isEqualTo(1);
    assertThat(c.errorLines())
        .containsExactly(
            "error: PYTORCH_VERSION=2.11.0 asks DJL for a libtorch that is neither bundled (the jar has"
                + " 2.7.1) nor in PYTORCH_LIBRARY_PATH, and DJL runs offline (it would download it): set"
                + " PYTORCH_LIBRARY_PATH to that libtorch's lib directory (docs/cluster.md#gpus), or unset"
                + " PYTORCH_VERSION to use the bundled one");
  }

  /**
   * A libtorch 2.11 (a libtorch archive's layout: {@code lib/} and {@code build-version}) with the
   * settings of DJL's released JNI: the JNI it would take is built for 2.7.1. Nothing is loaded
   * (the files are stand-ins): the check compares versions first.
   */
  @Test
  void aJniBuiltForAnotherLibtorchIsNamedBeforeAnythingLoads() throws Exception {
    Path lib = Files.createDirectories(tmp.resolve("libtorch/lib"));
    for (String f : List.of("libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libc10.so")) {
      Files.writeString(lib.resolve(f), "not a library");
    }
    Files.writeString(tmp.resolve("libtorch/build-version"), "2.11.0+cu130\n");
    Child c =
        doctor(
            Map.of(
                "PYTORCH_LIBRARY_PATH",
                lib.toString(),
                "PYTORCH_VERSION",
                "2.7.1",
                "PYTORCH_FLAVOR",
                "cu128",
                "DJL_CACHE_DIR",
                tmp.resolve("cache").toString()));
    assertThat(c.code).as(c.out + c.err).isEqualTo(1);
    assertThat(c.errorLines())
        .containsExactly(
            "error: libtorch 2.11.0+cu130 found ("
                + lib
                + "), the JNI is built for 2.7.1: build the JNI against it (docs/cluster.md#gpus) or"
                + " install libtorch 2.7.1+cu128");
    assertThat(c.out)
        .contains("libtorch:          2.11.0+cu130 at " + lib + " (PYTORCH_LIBRARY_PATH)")
        .contains("DJL loads it as:   PyTorch 2.7.1, flavor cu128")
        .contains(
            "JNI:               jnilib/linux-x86_64/cu128/libdjl_torch.so in the jar (DJL's released"
                + " JNI for cu128, pytorch-jni 2.7.1-0.35.1, built for libtorch 2.7.1)")
        .doesNotContain("engine:");
  }

  record Child(int code, String out, String err) {
    /** stderr without the JVM's and logging's own lines. */
    List<String> errorLines() {
      List<String> out = new ArrayList<>();
      for (String l : err.split("\n")) {
        if (l.startsWith("error:")) {
          out.add(l);
        }
      }
      return out;
    }
  }

  /** Runs {@code doctor} in a child JVM with {@code env} added to this one's environment. */
  private Child doctor(Map<String, String> env) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-Dai.djl.offline=true");
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add(SparkTrainerCli.class.getName());
    cmd.add("doctor");
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().remove("PYTORCH_LIBRARY_PATH");
    pb.environment().remove("PYTORCH_VERSION");
    pb.environment().remove("PYTORCH_FLAVOR");
    pb.environment().putAll(env);
    pb.redirectOutput(tmp.resolve("out.txt").toFile())
        .redirectError(tmp.resolve("err.txt").toFile());
    Process p = pb.start();
    if (!p.waitFor(120, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("doctor did not finish in 120 s");
    }
    return new Child(
        p.exitValue(),
        Files.readString(tmp.resolve("out.txt"), StandardCharsets.UTF_8),
        Files.readString(tmp.resolve("err.txt"), StandardCharsets.UTF_8));
  }
}
