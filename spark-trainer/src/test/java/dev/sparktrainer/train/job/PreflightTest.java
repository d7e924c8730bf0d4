package dev.sparktrainer.train.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.Digits;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Pre-flight checks that depend on the session's configuration: each check gets its own local
 * session (stopped afterwards) and must fail on the driver, naming the setting, before any task.
 */
class PreflightTest {
  private static final InMemoryDataset DIGITS = Digits.load().slice(0, 256);

  private SparkSession spark;
  private final AtomicInteger tasksStarted = new AtomicInteger();

  @AfterEach
  void stop() {
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  private void start(Map<String, String> conf) {
    SparkSession.Builder b =
        SparkSession.builder()
            .master("local[2]")
            .appName("preflight-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1");
    conf.forEach(b::config);
    spark = b.getOrCreate();
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

  private static DistributedTrainerBuilder job() {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 16))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().build())
        .setTrainingData(DIGITS.trainBatches(32, 1, true))
        .setNumWorkers(2)
        .optRingHost("127.0.0.1");
  }

  private void assertNoTaskRan() throws Exception {
    spark.sparkContext().listenerBus().waitUntilEmpty();
    assertThat(tasksStarted.get()).as("tasks started").isZero();
  }

  @Test
  void dynamicAllocationIsRefused() throws Exception {
    start(Map.of("spark.dynamicAllocation.enabled", "true"));
    assertThatThrownBy(() -> job().build().fit(spark))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("spark.dynamicAllocation.enabled=true")
        .hasMessageContaining("set it to false");
    assertNoTaskRan();
  }

  @Test
  void gpusWithoutTaskResourceAreRefused() throws Exception {
    start(Map.of());
    assertThatThrownBy(() -> job().optUseGpus(true).build().fit(spark))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("spark.task.resource.gpu.amount is not set")
        .hasMessageContaining("spark.executor.resource.gpu.discoveryScript");
    assertNoTaskRan();
  }

  @Test
  void gpusThatSparkDidNotDiscoverAreRefused() throws Exception {
    // Task and executor amounts set, but nothing tells Spark where the GPUs are: it starts, and
    // would give the tasks no GPU.
    start(Map.of("spark.task.resource.gpu.amount", "1", "spark.executor.resource.gpu.amount", "1"));
    assertThatThrownBy(() -> job().optUseGpus(true).build().fit(spark))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Spark discovered no GPU")
        .hasMessageContaining("spark.driver.resource.gpu.discoveryScript");
    assertNoTaskRan();
  }

  @Test
  void clusterGpuRules() {
    SparkConf none = new SparkConf(false);
    SparkConf taskOnly = new SparkConf(false).set("spark.task.resource.gpu.amount", "1");
    SparkConf noDiscovery = taskOnly.clone().set("spark.executor.resource.gpu.amount", "1");
    SparkConf complete =
        noDiscovery.clone().set("spark.executor.resource.gpu.discoveryScript", "/opt/gpus.sh");
    assertThat(Preflight.gpuConfigProblem(none, "yarn", 0))
        .contains("spark.task.resource.gpu.amount is not set");
    assertThat(Preflight.gpuConfigProblem(taskOnly, "k8s://https://api:6443", 0))
        .contains("spark.executor.resource.gpu.amount is not set");
    assertThat(Preflight.gpuConfigProblem(noDiscovery, "yarn", 0))
        .contains("spark.executor.resource.gpu.discoveryScript");
    assertThat(Preflight.gpuConfigProblem(complete, "yarn", 0)).isNull();
    // A standalone worker discovers its GPUs itself and hands them to its executors.
    assertThat(Preflight.gpuConfigProblem(noDiscovery, "spark://10.0.0.1:7077", 0)).isNull();
    assertThat(Preflight.gpuConfigProblem(noDiscovery, "local[2]", 2)).isNull();
  }
}
