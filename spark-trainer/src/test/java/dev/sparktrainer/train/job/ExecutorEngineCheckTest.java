package dev.sparktrainer.train.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.engine.EngineCheck;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.Digits;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A GPU job runs {@code spark-trainer doctor}'s check where it trains, before PyTorch is used
 * there: here the local-mode driver, given one GPU by a stand-in discovery script. DJL reads its
 * settings from the environment or, failing that, system properties: the test sets the property.
 */
class ExecutorEngineCheckTest {
  private static final InMemoryDataset DIGITS = Digits.load().slice(0, 128);

  @TempDir Path tmp;
  private SparkSession spark;
  private final AtomicInteger tasksStarted = new AtomicInteger();

  @AfterEach
  void stop() {
    System.clearProperty("PYTORCH_LIBRARY_PATH");
    ExecutorEngineCheck.reset();
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  private void startWithOneFakeGpu() throws Exception {
    Path script = tmp.resolve("gpus.sh");
    Files.writeString(script, "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [\"0\"]}'\n");
    Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("executor-engine-check")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.resource.gpu.amount", "1")
            .config("spark.driver.resource.gpu.discoveryScript", script.toString())
            .config("spark.executor.resource.gpu.amount", "1")
            .config("spark.task.resource.gpu.amount", "0.5")
            .getOrCreate();
    spark
        .sparkContext()
        .addSparkListener(
            new SparkListener() {
              @Override
              public void onTaskStart(SparkListenerTaskStart e) {
                tasksStarted.incrementAndGet();
              }
            });
  }

  private static DistributedTrainer gpuJob() {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 16))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().build())
        .setTrainingData(DIGITS.trainBatches(32, 1, true))
        .setNumWorkers(2)
        .optRingHost("127.0.0.1")
        .optUseGpus(true)
        .build();
  }

  @Test
  void aLibraryPathWithoutLibtorchFailsTheJobWithTheCheckLine() throws Exception {
    Path empty = Files.createDirectories(tmp.resolve("no-libtorch"));
    System.setProperty("PYTORCH_LIBRARY_PATH", empty.toString());
    ExecutorEngineCheck.reset();
    startWithOneFakeGpu();
    assertThatThrownBy(() -> gpuJob().fit(spark))
        .isInstanceOf(NonRetryableTrainingException.class)
        .hasMessage(
            "the local-mode driver: PyTorch cannot train on this executor: PYTORCH_LIBRARY_PATH="
                + empty
                + " has no libtorch (no libtorch.so there), so DJL would quietly load the CPU libtorch"
                + " bundled in the jar: point it at the lib directory of a libtorch (/opt/libtorch/lib in"
                + " deploy/docker/Dockerfile.cuda, docs/cluster.md#gpus) or unset it");
    spark.sparkContext().listenerBus().waitUntilEmpty();
    assertThat(tasksStarted.get()).as("tasks started").isZero();
  }

  @Test
  void aWorkingCpuEnginePassesTheCheckAndTheNextCheckSpeaks() throws Exception {
    ExecutorEngineCheck.reset();
    startWithOneFakeGpu();
    // The check passes on this CPU (it would fall back); local mode then refuses a GPU job
    // whose PyTorch sees no GPU, as before.
    assertThatThrownBy(() -> gpuJob().fit(spark))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("GPUs were requested but this machine has none visible to PyTorch");
  }

  /**
   * A failed check is not kept for the JVM's life: the next job (here the next call, after the
   * setting was fixed) checks again and passes.
   */
  @Test
  void aFailedCheckIsMadeAgainByTheNextJob() throws Exception {
    Path empty = Files.createDirectories(tmp.resolve("no-libtorch-yet"));
    System.setProperty("PYTORCH_LIBRARY_PATH", empty.toString());
    ExecutorEngineCheck.reset();
    assertThatThrownBy(() -> ExecutorEngineCheck.require("rank 0 (executor 1)", new String[] {"0"}))
        .isInstanceOf(NonRetryableTrainingException.class)
        .hasMessageContaining("rank 0 (executor 1): PyTorch cannot train on this executor")
        .hasMessageContaining(empty.toString());
    System.clearProperty("PYTORCH_LIBRARY_PATH");
    ExecutorEngineCheck.require("rank 0 (executor 1)", new String[] {"0"});
  }

  /**
   * Each GPU address a task is given is checked, once: a second task of the JVM given another GPU
   * has that one checked; one given a GPU checked already is not checked again. The real check runs
   * (on this CPU machine it steps on the CPU); the test records what it was asked.
   */
  @Test
  void eachAssignedGpuIsCheckedOnce() {
    ExecutorEngineCheck.reset();
    List<List<Integer>> asked = new ArrayList<>();
    Function<List<Integer>, EngineCheck.Report> check =
        ids -> {
          asked.add(ids);
          return EngineCheck.run(ids);
        };
    ExecutorEngineCheck.require("rank 0", new String[] {"0"}, check);
    ExecutorEngineCheck.require("rank 1", new String[] {"1", "0"}, check);
    ExecutorEngineCheck.require("rank 2", new String[] {"1"}, check);
    ExecutorEngineCheck.require("rank 3", new String[] {"0"}, check);
    assertThat(asked).containsExactly(List.of(0), List.of(1));
  }
}
