package dev.sparktrainer.train;

import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import dev.sparktrainer.train.elastic.ElasticSupervisor;
import dev.sparktrainer.train.input.DataInput;
import dev.sparktrainer.train.job.BarrierJob;
import dev.sparktrainer.train.job.InProcessRunner;
import dev.sparktrainer.train.job.InputStaging;
import dev.sparktrainer.train.job.Preflight;
import dev.sparktrainer.train.loop.FaultInjection;
import dev.sparktrainer.train.loop.ReplicaMismatchException;
import dev.sparktrainer.train.loop.TrainingRuntime;
import dev.sparktrainer.train.loop.WorkerResult;
import dev.sparktrainer.train.metrics.History;
import dev.sparktrainer.train.metrics.TrainingCallback;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Comparator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * Synchronous data-parallel training on Spark with MultiWorkerMirroredStrategy semantics: N barrier
 * tasks, one model replica each, rank 0's initial parameters broadcast, gradients averaged by a
 * ring all-reduce over the executors' sockets, the same optimizer step on every replica, global
 * metrics, and BackupAndRestore checkpoints.
 *
 * <pre>{@code
 * TrainedModel model = DistributedTrainer.builder()
 *     .setModel(MlpSpec.of(784, 10, 256, 128))
 *     .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
 *     .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-3f).build())
 *     .setTrainingData(trainFactory)          // a BatchSourceFactory: per-worker batches
 *     .optValidationData(testFactory)
 *     .setNumWorkers(2)
 *     .optEpochs(10)
 *     .optCheckpointDir("hdfs:///jobs/mnist/ckpt")
 *     .optOutputDir("hdfs:///jobs/mnist/model")
 *     .build()
 *     .fit(spark);
 * System.out.println(model.history().last());
 * }</pre>
 *
 * <p><b>One training task per executor JVM.</b> DJL's gradient collector and PyTorch's random
 * generator and thread pool are per process. On a cluster, size executors so each runs one training
 * task (e.g. {@code spark.task.cpus = spark.executor.cores}, or one GPU per task); the task then
 * uses all its CPUs as PyTorch intra-op threads. Several training tasks in one JVM (local mode) are
 * still correct: their forward/backward passes take turns behind a JVM-wide lock.
 *
 * <p><b>Failures.</b> The barrier stage ends in a shuffle, so it is a shuffle-map stage that Spark
 * retries as a whole (up to {@code spark.stage.maxConsecutiveAttempts}) when a task fails; with a
 * checkpoint directory, the retry — or the same job submitted again — resumes from the latest
 * complete checkpoint. A failure that a retry would only repeat — replicas whose parameters differ,
 * a checkpoint that does not match the model, workers with different steps per epoch — cancels the
 * job at once, and {@link #fit} throws that error (an {@link IllegalStateException}) instead of
 * Spark's stage-failure exception.
 *
 * <p>The options are set on its {@link DistributedTrainerBuilder} (one documented method per option
 * of the option table, {@link TrainerOption}); the facade itself is short — the Spark plumbing is
 * {@code train.job.BarrierJob}, the input staging {@code train.job.InputStaging}, the relaunch loop
 * {@code train.elastic.ElasticSupervisor}.
 */
public final class DistributedTrainer {
  private static final System.Logger LOG = System.getLogger(DistributedTrainer.class.getName());

  /** Default gradient bucket size, 25 MiB as PyTorch DDP's (the first bucket is 1 MiB). */
  public static final int DEFAULT_BUCKET_BYTES = TrainerOption.DEFAULT_BUCKET_BYTES;

  /**
   * A bucket size given in MiB as bytes, rounded to a multiple of 8.
   *
   * @deprecated the conversion lives in the option table: {@link TrainerOption#bucketBytes}, or
   *     give MiB to {@link DistributedTrainerBuilder#optBucketMb}
   */
  @Deprecated
  public static int bucketBytes(double mib) {
    return TrainerOption.bucketBytes("bucket size", mib);
  }

  private final TrainingConfig cfg;
  private final TrainingCallback callback;
  private final FaultInjection faults;
  private final String outputDir;
  private final String ringHost;
  private final long slotWaitMillis;
  private final DataInput train;
  private final DataInput validation;
  private final String stagingDir;
  private final Normalization.Mode normalize;

  DistributedTrainer(DistributedTrainerBuilder b, TrainingConfig cfg) {
    this.cfg = cfg;
    this.callback = b.callback;
    this.faults = b.faults;
    this.normalize = b.normalize;
    this.train = b.transform == null ? b.train : b.train.withTransform(b.transform);
    this.validation = b.validation;
    this.stagingDir = b.stagingDir;
    this.outputDir = b.outputDir;
    this.ringHost = b.ringHost;
    this.slotWaitMillis = b.slotWait.toMillis();
  }

  /**
   * The configuration the training tasks run with: every setting of the builder, validated and
   * converted to its units (the builder's defaults where nothing was set), for logging a run's
   * settings, or checking what an API mapped them to.
   */
  public TrainingConfig config() {
    return cfg;
  }

  /** A builder: {@code setX} for required values, {@code optX} for optional ones. */
  public static DistributedTrainerBuilder builder() {
    return new DistributedTrainerBuilder();
  }

  /**
   * Checks the job on the driver, runs the N barrier tasks and returns the trained model (saved to
   * the output directory if one was given).
   *
   * @throws IllegalArgumentException from the pre-flight checks, before any task starts
   * @throws IllegalStateException at once, without stage retries, when a task fails in a way a
   *     retry would repeat (e.g. "Replica parameters differ", a checkpoint of another model)
   * @throws TrainingFailedException (a SparkException) if training fails after Spark's retries: its
   *     message leads with the last training task's error
   */
  public TrainedModel fit(SparkSession spark) {
    try (InputStaging staging = new InputStaging()) {
      return fit(spark, staging.resolve(spark, cfg, train, validation, stagingDir, outputDir));
    }
  }

  /** A fresh ring secret for every run. */
  private TrainingRuntime runtime() {
    return new TrainingRuntime(JobSecret.generate(), callback, faults);
  }

  /**
   * Runs the barrier job on as many workers as the cluster offers, from {@code numWorkers} down to
   * {@code minWorkers}, relaunching it as the cluster loses or regains slots ({@link
   * ElasticSupervisor}).
   */
  private TrainedModel fit(SparkSession spark, TrainingConfig resolved) {
    SparkContext sc = spark.sparkContext();
    int workers = Preflight.check(sc, resolved, outputDir, slotWaitMillis);
    // After the checks: fitting the normalization is a full pass over the data.
    InputStaging.Normalized normalized = InputStaging.normalize(spark, resolved, normalize);
    TrainingConfig job = normalized.config();
    ElasticPolicy policy = job.elasticPolicy();
    BarrierJob barrier = new BarrierJob(sc, ringHost, slotWaitMillis);
    ElasticSupervisor.Outcome<List<WorkerResult>> outcome =
        new ElasticSupervisor(policy, job.numWorkers(), slotWaitMillis)
            .run(
                workers,
                new ElasticSupervisor.Cluster<>() {
                  @Override
                  public ElasticSupervisor.Attempt<List<WorkerResult>> run(int n) {
                    List<WorkerResult> results;
                    try {
                      results = barrier.run(job.withWorkers(n), runtime(), policy);
                    } catch (BarrierJob.SlotsLost e) {
                      return ElasticSupervisor.Attempt.slotsLost(e.offered());
                    }
                    return results.stream().anyMatch(WorkerResult::stoppedToGrow)
                        ? ElasticSupervisor.Attempt.grow()
                        : ElasticSupervisor.Attempt.finished(results);
                  }

                  @Override
                  public int slots() {
                    return Preflight.slots(sc);
                  }

                  @Override
                  public void preflight(int n) {
                    job.data().train().preflight(n);
                  }

                  @Override
                  public void workersChanged(int from, int to, String reason) {
                    if (callback != null) {
                      try {
                        callback.onWorkersChanged(from, to, reason);
                      } catch (RuntimeException e) {
                        LOG.log(
                            System.Logger.Level.WARNING,
                            "The training callback failed on a change of workers: " + e);
                      }
                    }
                  }
                });
    return finish(job, outcome.results(), sc.hadoopConfiguration(), normalized.normalization());
  }

  /** Runs the workers as threads of this JVM, without Spark (tests, and the same code path). */
  TrainedModel fitInProcess(int attempt, Configuration conf) throws Exception {
    return finish(cfg, InProcessRunner.run(cfg, runtime(), attempt, conf), conf, null);
  }

  private TrainedModel finish(
      TrainingConfig job,
      List<WorkerResult> results,
      Configuration hadoopConf,
      Normalization normalization) {
    results.sort(Comparator.comparingInt(WorkerResult::rank));
    WorkerResult chief = results.get(0);
    if (chief.rank() != 0 || chief.parameters() == null) {
      throw new IllegalStateException("Training returned no result from rank 0: " + results);
    }
    for (WorkerResult r : results) {
      if (!r.parameterHash().equals(chief.parameterHash())) {
        throw new ReplicaMismatchException(
            "Final parameters differ: rank 0 "
                + chief.parameterHash()
                + ", rank "
                + r.rank()
                + " "
                + r.parameterHash());
      }
    }
    TrainedModel model =
        new TrainedModel(
            job.model().spec(),
            job.model().loss(),
            chief.parameters(),
            new History(chief.history(), chief.resumes(), chief.stragglers()),
            normalization);
    if (outputDir != null) {
      try {
        model.save(outputDir, hadoopConf);
      } catch (IOException e) {
        throw new UncheckedIOException(
            "Cannot save the trained model to " + outputDir + ": " + e.getMessage(), e);
      }
    }
    return model;
  }
}
