package dev.sparktrainer.train.job;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.train.config.TrainingConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.resource.ResourceInformation;

/**
 * Checks on the driver that a job can run, each failing with a clear message before any task
 * starts.
 */
public final class Preflight {
  private Preflight() {}

  /**
   * Returns the number of workers to launch: numWorkers, or fewer down to minWorkers when the
   * cluster offers fewer.
   */
  public static int check(
      SparkContext sc, TrainingConfig cfg, String outputDir, long slotWaitMillis) {
    SparkConf conf = sc.getConf();
    if (conf.getBoolean("spark.dynamicAllocation.enabled", false)) {
      throw new IllegalArgumentException(
          "Invalid Spark configuration: spark.dynamicAllocation.enabled=true, but barrier-mode training"
              + " needs a fixed set of executors: set it to false for the training application");
    }
    if (cfg.devices().gpus()) {
      String problem = gpuConfigProblem(conf, sc.master(), sc.isLocal() ? localGpus(sc) : 0);
      if (problem != null) {
        throw new IllegalArgumentException(problem);
      }
      if (sc.isLocal()) {
        // The tasks train in this JVM: doctor's check before PyTorch is first used here.
        ExecutorEngineCheck.require(
            "the local-mode driver", sc.resources().get("gpu").get().addresses());
      }
      if (sc.isLocal() && Engine.getInstance().getGpuCount() == 0) {
        throw new IllegalArgumentException(
            "GPUs were requested but this machine has none visible to PyTorch");
      }
    }
    int slots = waitForSlots(sc, cfg.numWorkers(), slotWaitMillis);
    int workers =
        slots >= cfg.numWorkers() ? cfg.numWorkers() : cfg.elasticPolicy().workersFor(slots);
    if (workers < cfg.elastic().minWorkers() || workers == 0) {
      throw new IllegalArgumentException(
          "Not enough task slots for "
              + cfg.numWorkers()
              + " barrier tasks: the cluster has "
              + slots
              + " (executors x cores / spark.task.cpus"
              + (cfg.devices().gpus() ? ", limited by GPUs" : "")
              + "). Use fewer workers or more executors"
              + (cfg.elastic().minWorkers() < cfg.numWorkers()
                  ? " (--min-workers "
                      + cfg.elastic().minWorkers()
                      + ": no count from "
                      + Math.min(slots, cfg.numWorkers())
                      + " down to it divides the global batch)"
                  : ""));
    }
    if (cfg.model().spec() instanceof TorchScriptSpec ts) {
      // Its inputs and output against the data, that it trains, before any executor loads it.
      ts.check(null, cfg.model().loss() == LossSpec.SOFTMAX_CROSS_ENTROPY ? 0 : 1);
    }
    try (NDManager m = NDManager.newBaseManager()) {
      Block b = cfg.model().spec().build(m);
      if (b.getParameters().isEmpty()) {
        throw new IllegalArgumentException(
            "Invalid model " + cfg.model().spec() + ": it has no parameters to train");
      }
    } catch (RuntimeException e) {
      if (e instanceof IllegalArgumentException
          && e.getMessage() != null
          && e.getMessage().startsWith("Invalid model")) {
        throw e;
      }
      throw new IllegalArgumentException(
          "Invalid model " + cfg.model().spec() + ": it does not build: " + e, e);
    }
    cfg.data().train().preflight(workers);
    if (cfg.data().validation() != null) {
      cfg.data().validation().preflight(workers);
    }
    if (cfg.comm().tls() != null
        && (sc.isLocal() || Files.isRegularFile(Path.of(cfg.comm().tls().keyStore())))) {
      cfg.comm()
          .tls()
          .sslContext(); // local mode: the tasks' files; on a cluster, when the driver has them too
    }
    Configuration hadoop = sc.hadoopConfiguration();
    if (cfg.checkpoints().dir() != null) {
      CheckpointStore.checkWritable("checkpointDir", cfg.checkpoints().dir(), hadoop);
    }
    if (outputDir != null) {
      CheckpointStore.checkWritable("outputDir", outputDir, hadoop);
    }
    return workers;
  }

  /**
   * Whether {@code dir} (a scheme-less one: on the default file system) is on a file system other
   * than {@code file:}.
   */
  static boolean onSharedFileSystem(String dir, Configuration conf) {
    String scheme = new org.apache.hadoop.fs.Path(dir).toUri().getScheme();
    if (scheme == null) {
      scheme = FileSystem.getDefaultUri(conf).getScheme();
    }
    return scheme != null && !scheme.equalsIgnoreCase("file");
  }

  /**
   * Why DataFrames cannot be staged in {@code stagingDir} under {@code master}, or null: on a
   * cluster a {@code file:} directory is each executor's own disk, so the Parquet shards written
   * there are not where the training tasks (or the driver's planner) look for them.
   *
   * @param explicit whether the caller chose the directory (else it is the default)
   */
  public static String stagingProblem(
      String master, String stagingDir, boolean explicit, Configuration conf) {
    if (master.startsWith("local") || onSharedFileSystem(stagingDir, conf)) {
      return null;
    }
    return (explicit
            ? "Invalid staging directory '" + stagingDir + "'"
            : "No shared staging directory (the default, '" + stagingDir + "', is local)")
        + ": a DataFrame that is not a plain file scan is staged as Parquet before training, and on a cluster"
        + " (master "
        + master
        + ") a file: directory is each executor's own disk, which the other executors"
        + " cannot read. Set optStagingDir (the Estimator's stagingDir param) to a directory on a shared file"
        + " system (hdfs:, s3a:, ...), or give a checkpoint directory on one (the DataFrame is then staged under it)";
  }

  /** Throws {@link #stagingProblem}'s message, if any, before anything is staged. */
  static void checkStaging(String master, String stagingDir, boolean explicit, Configuration conf) {
    String problem = stagingProblem(master, stagingDir, explicit, conf);
    if (problem != null) {
      throw new IllegalArgumentException(problem);
    }
  }

  /**
   * What is missing for GPU training under {@code conf}, or null. Every task needs {@code
   * spark.task.resource.gpu.amount}. In local mode the tasks use the driver's GPUs, which Spark
   * must have discovered ({@code localGpus}: addresses in {@code sc.resources()}). On a cluster
   * each executor needs {@code spark.executor.resource.gpu.amount} and a way to find its GPUs: a
   * discovery script or resources file — except on a standalone master, whose workers discover GPUs
   * themselves ({@code spark.worker.resource.gpu.*}). Without these, executors fail at start-up or
   * tasks get no GPU, and the job would end in a slot time-out instead of this message.
   */
  static String gpuConfigProblem(SparkConf conf, String master, int localGpus) {
    String prefix = "Invalid Spark configuration for GPU training (optGpus, --gpus): ";
    if (!(conf.getDouble("spark.task.resource.gpu.amount", 0) > 0)) {
      return prefix
          + "spark.task.resource.gpu.amount is not set: set it (e.g. 1) with"
          + " spark.executor.resource.gpu.amount and spark.executor.resource.gpu.discoveryScript";
    }
    if (master.startsWith("local")) {
      if (localGpus <= 0) {
        return prefix
            + "Spark discovered no GPU for this local-mode driver (local tasks use the driver's"
            + " resources): set spark.driver.resource.gpu.amount and spark.driver.resource.gpu.discoveryScript";
      }
      return null;
    }
    if (!(conf.getDouble("spark.executor.resource.gpu.amount", 0) > 0)) {
      return prefix
          + "spark.executor.resource.gpu.amount is not set: set it to the GPUs of one executor";
    }
    boolean discovery =
        conf.contains("spark.executor.resource.gpu.discoveryScript")
            || conf.contains("spark.executor.resourcesFile");
    if (!discovery && !master.startsWith("spark://")) {
      return prefix
          + "executors cannot find their GPUs: set spark.executor.resource.gpu.discoveryScript"
          + " (e.g. Spark's examples/src/main/scripts/getGpusResources.sh) or spark.executor.resourcesFile";
    }
    return null;
  }

  /** GPU addresses Spark discovered for the driver (what local-mode tasks are given). */
  private static int localGpus(SparkContext sc) {
    scala.Option<ResourceInformation> gpu = sc.resources().get("gpu");
    return gpu.isDefined() ? gpu.get().addresses().length : 0;
  }

  /** Concurrent task slots, waiting up to {@code waitMillis} for executors to register. */
  private static int waitForSlots(SparkContext sc, int needed, long waitMillis) {
    long deadline = System.nanoTime() + waitMillis * 1_000_000L;
    int slots;
    while (true) {
      slots = slots(sc);
      if (slots >= needed || System.nanoTime() >= deadline) {
        return slots;
      }
      try {
        Thread.sleep(200); // executors register asynchronously; nothing to wait on but the count
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return slots;
      }
    }
  }

  /** What Spark's own barrier check uses: concurrent tasks for the default resource profile. */
  public static int slots(SparkContext sc) {
    return sc.maxNumConcurrentTasks(sc.resourceProfileManager().defaultResourceProfile());
  }
}
