package dev.sparktrainer.train;

import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.collective.RingTls;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.DataFrameInput;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.FeatureStatistics;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import dev.sparktrainer.train.elastic.ElasticSupervisor;
import dev.sparktrainer.train.elastic.GrowRequest;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.stream.IntStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.SerializableConfiguration;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

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
 */
public final class DistributedTrainer {
  /** Default gradient bucket size, 25 MiB as PyTorch DDP's (the first bucket is 1 MiB). */
  public static final int DEFAULT_BUCKET_BYTES = TrainerOption.DEFAULT_BUCKET_BYTES;

  /**
   * A bucket size given in MiB as bytes, rounded to a multiple of 8.
   *
   * @deprecated the conversion lives in the option table: {@link TrainerOption#bucketBytes}, or
   *     give MiB to {@link Builder#optBucketMb}
   */
  @Deprecated
  public static int bucketBytes(double mib) {
    return TrainerOption.bucketBytes("bucket size", mib);
  }

  private final TrainingConfig cfg;
  private final String outputDir;
  private final String ringHost;
  private final long slotWaitMillis;
  private final DataInput train;
  private final DataInput validation;
  private final String stagingDir;
  private final Normalization.Mode normalize;

  private DistributedTrainer(Builder b, TrainingConfig cfg) {
    this.normalize = b.normalize;
    this.cfg = cfg;
    this.train = b.transform == null ? b.train : b.train.withTransform(b.transform);
    this.validation = b.validation;
    this.stagingDir = b.stagingDir;
    this.outputDir = b.outputDir;
    this.ringHost = b.ringHost;
    this.slotWaitMillis = b.slotWait.toMillis();
  }

  /** A builder: {@code setX} for required values, {@code optX} for optional ones. */
  public static Builder builder() {
    return new Builder();
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
    List<DataFrameInput> staged = new ArrayList<>();
    try {
      Configuration hadoopConf = spark.sparkContext().hadoopConfiguration();
      String stagingDir =
          this.stagingDir != null
              ? this.stagingDir
              : defaultStagingDir(cfg.checkpointDir, outputDir, hadoopConf);
      if ((train != null && train.needsStaging())
          || (validation != null && validation.needsStaging())) {
        Preflight.checkStaging(
            spark.sparkContext().master(), stagingDir, this.stagingDir != null, hadoopConf);
      }
      TrainingConfig resolved = copyWithSecret(cfg);
      if (train != null) {
        resolved.trainData = train.resolve(spark, stagingDir, staged, true);
      }
      if (validation != null) {
        resolved.validationData = validation.resolve(spark, stagingDir, staged, false);
      }
      return fit(spark, resolved);
    } finally {
      for (DataFrameInput in : staged) {
        try {
          in.close();
        } catch (IOException e) {
          // Keep the training result (or its failure); a leftover staging directory is only logged.
          System.getLogger(DistributedTrainer.class.getName())
              .log(
                  System.Logger.Level.WARNING,
                  "Could not delete the staging directory: " + e.getMessage());
        }
      }
    }
  }

  /**
   * Where DataFrames are staged when {@link Builder#optStagingDir} was not given: under the
   * checkpoint directory, or next to the output directory (the model replaces that directory as a
   * whole), when it is on a shared file system every executor reads; otherwise the local temp
   * directory, which only a local master can use (pre-flight refuses it on a cluster).
   */
  static String defaultStagingDir(String checkpointDir, String outputDir, Configuration conf) {
    if (checkpointDir != null && Preflight.onSharedFileSystem(checkpointDir, conf)) {
      return new Path(checkpointDir, "_staging").toString();
    }
    if (outputDir != null && Preflight.onSharedFileSystem(outputDir, conf)) {
      Path out = new Path(outputDir);
      if (out.getParent() != null) {
        return new Path(out.getParent(), "_staging-" + out.getName()).toString();
      }
    }
    return new File(System.getProperty("java.io.tmpdir"), "spark-trainer-staging")
        .toURI()
        .toString();
  }

  private static final System.Logger LOG = System.getLogger(DistributedTrainer.class.getName());

  /**
   * Fits the normalization on the training data only (one distributed pass over its planned splits)
   * and applies it to the training and validation batches alike; null without normalization.
   */
  private Normalization normalize(SparkSession spark, TrainingConfig job) {
    if (normalize == Normalization.Mode.NONE) {
      return null;
    }
    DatasetSource trainData = (DatasetSource) job.trainData;
    Normalization n =
        Normalization.of(normalize, FeatureStatistics.compute(trainData.plan(), spark));
    job.trainData = trainData.withNormalization(n);
    if (job.validationData instanceof DatasetSource v) {
      job.validationData = v.withNormalization(n);
    }
    return n;
  }

  /**
   * Runs the barrier job on as many workers as the cluster offers, from {@code numWorkers} down to
   * {@code minWorkers}, relaunching it as the cluster loses or regains slots ({@link
   * ElasticSupervisor}).
   */
  private TrainedModel fit(SparkSession spark, TrainingConfig job) {
    SparkContext sc = spark.sparkContext();
    int workers = Preflight.check(sc, job, outputDir, slotWaitMillis);
    Normalization normalization =
        normalize(spark, job); // after the checks: a full pass over the data
    ElasticPolicy policy = job.elasticPolicy();
    ElasticSupervisor.Outcome<List<WorkerResult>> outcome =
        new ElasticSupervisor(policy, job.numWorkers, slotWaitMillis)
            .run(
                workers,
                new ElasticSupervisor.Cluster<>() {
                  @Override
                  public ElasticSupervisor.Attempt<List<WorkerResult>> run(int n) {
                    TrainingConfig run = n == job.numWorkers ? job : resized(job, n);
                    List<WorkerResult> results;
                    try {
                      results = runBarrierJob(sc, run, policy);
                    } catch (SlotsLost e) {
                      return ElasticSupervisor.Attempt.slotsLost(e.offered);
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
                    job.trainData.preflight(n);
                  }

                  @Override
                  public void workersChanged(int from, int to, String reason) {
                    if (job.callback != null) {
                      try {
                        job.callback.onWorkersChanged(from, to, reason);
                      } catch (RuntimeException e) {
                        LOG.log(
                            System.Logger.Level.WARNING,
                            "The training callback failed on a change of workers: " + e);
                      }
                    }
                  }
                });
    return finish(job, outcome.results(), sc.hadoopConfiguration(), normalization);
  }

  /** {@code job} on {@code workers} workers (a new ring secret). */
  private static TrainingConfig resized(TrainingConfig job, int workers) {
    TrainingConfig c = copyWithSecret(job);
    c.numWorkers = workers;
    return c;
  }

  /**
   * The slot watch cancelled the barrier job: the cluster offered {@code offered} slots, too few.
   */
  private static final class SlotsLost extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int offered;

    SlotsLost(int offered, Throwable cause) {
      super("the cluster offered " + offered + " task slots", cause);
      this.offered = offered;
    }
  }

  private List<WorkerResult> runBarrierJob(
      SparkContext sc, TrainingConfig job, ElasticPolicy policy) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(sc);
    Broadcast<SerializableConfiguration> hadoop =
        jsc.broadcast(new SerializableConfiguration(sc.hadoopConfiguration()));
    List<Integer> ranks = IntStream.range(0, job.numWorkers).boxed().toList();
    String previous = sc.getLocalProperty("spark.job.description");
    sc.setJobDescription(
        "spark-trainer: " + job.numWorkers + " workers, " + job.epochs + " epochs, " + job.model);
    // The Spark UI names stages after the call site: name them after the job, not a Spark internal.
    sc.setCallSite(
        "spark-trainer: train " + job.numWorkers + " workers x " + job.epochs + " epochs");
    // A job tag (not a job group: the caller's group stays theirs) lets the listener cancel exactly
    // this job when a task fails in a way a stage retry would only repeat.
    String jobTag = "spark-trainer-" + UUID.randomUUID();
    NonRetryableFailureListener failFast = new NonRetryableFailureListener(sc, jobTag);
    String previousInterrupt = sc.getLocalProperty("spark.job.interruptOnCancel");
    sc.addSparkListener(failFast);
    sc.addJobTag(jobTag);
    // Cancelled tasks are interrupted, so none keeps its executor slot blocked on a dead ring.
    sc.setInterruptOnCancel(true);
    List<WorkerResult> results;
    boolean grow = job.grow && job.checkpointDir != null && job.numWorkers < job.plannedWorkers;
    GrowRequest request = GrowRequest.in(job.checkpointDir);
    request.delete(sc.hadoopConfiguration());
    SlotWatch watch =
        new SlotWatch(
            sc,
            job.numWorkers,
            slotWaitMillis,
            jobTag,
            !grow
                ? null
                : slots -> {
                  if (policy.workersFor(Math.min(slots, job.plannedWorkers)) > job.numWorkers) {
                    request.ask(sc.hadoopConfiguration(), slots, job.numWorkers);
                  }
                });
    try {
      ClassTag<WorkerResult> tag = ClassTag$.MODULE$.apply(WorkerResult.class);
      RDD<WorkerResult> trained =
          jsc.parallelize(ranks, job.numWorkers)
              .rdd()
              .barrier()
              .mapPartitions(new BarrierTrainingTask(job, hadoop, ringHost), false, tag);
      // The shuffle makes the barrier stage a shuffle-map stage: Spark retries it as a whole when a
      // task fails (a failed barrier result stage would not be retried).
      results = new ArrayList<>(JavaRDD.fromRDD(trained, tag).repartition(1).collect());
    } catch (Exception e) { // SparkException is checked, yet thrown by collect()
      watch.close();
      if (watch.cancelledWithSlots() >= 0) {
        throw new SlotsLost(watch.cancelledWithSlots(), e);
      }
      failFast.rethrowIfNonRetryable(e);
      failFast.rethrowWithTaskError(e);
      throw e;
    } finally {
      watch.close();
      request.delete(sc.hadoopConfiguration());
      sc.removeJobTag(jobTag);
      sc.setLocalProperty("spark.job.interruptOnCancel", previousInterrupt);
      sc.removeSparkListener(failFast);
      sc.setJobDescription(previous);
      sc.clearCallSite();
      hadoop.destroy();
    }
    return results;
  }

  /** Runs the workers as threads of this JVM, without Spark (tests, and the same code path). */
  TrainedModel fitInProcess(int attempt, Configuration conf) throws Exception {
    TrainingConfig job = copyWithSecret(cfg);
    return finish(job, InProcessRunner.run(job, attempt, conf), conf, null);
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
            job.model,
            job.loss,
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

  private static TrainingConfig copyWithSecret(TrainingConfig c) {
    TrainingConfig j = new TrainingConfig();
    j.model = c.model;
    j.loss = c.loss;
    j.optimizer = c.optimizer;
    j.trainData = c.trainData;
    j.validationData = c.validationData;
    j.numWorkers = c.numWorkers;
    j.epochs = c.epochs;
    j.seed = c.seed;
    j.checkpointDir = c.checkpointDir;
    j.checkpointEverySteps = c.checkpointEverySteps;
    j.keepCheckpoints = c.keepCheckpoints;
    j.cpuDevicesPerWorker = c.cpuDevicesPerWorker;
    j.useGpus = c.useGpus;
    j.fusionBucketBytes = c.fusionBucketBytes;
    j.overlap = c.overlap;
    j.accumulateSteps = c.accumulateSteps;
    j.rescale = c.rescale;
    j.minWorkers = c.minWorkers > 0 ? c.minWorkers : c.numWorkers;
    j.grow = c.grow;
    j.plannedWorkers = c.plannedWorkers > 0 ? c.plannedWorkers : c.numWorkers;
    j.placement = c.placement;
    j.operationTimeout = c.operationTimeout;
    j.gradientPrecision = c.gradientPrecision;
    j.precision = c.precision;
    j.ringTls = c.ringTls;
    j.ringSharedMemory = c.ringSharedMemory;
    j.connectTimeout = c.connectTimeout;
    j.faults = c.faults;
    j.callback = c.callback;
    j.secret = JobSecret.generate(); // a new ring secret per job
    return j;
  }

  /** Builder for {@link DistributedTrainer}; validation in {@link #build()}. */
  public static final class Builder {
    private final TrainingConfig c = new TrainingConfig();
    private String outputDir;
    private String ringHost;
    private Duration slotWait = Duration.ofSeconds(30);
    private DataInput train;
    private DataInput validation;
    private String stagingDir; // null: see defaultStagingDir
    private ExampleTransform transform;
    private Normalization.Mode normalize = Normalization.Mode.NONE;

    private Builder() {
      c.epochs = 1;
      c.keepCheckpoints = 3;
      c.fusionBucketBytes = DEFAULT_BUCKET_BYTES;
      c.operationTimeout = Duration.ofMinutes(5);
      c.connectTimeout = Duration.ofMinutes(2);
      c.faults = FaultInjection.installed();
    }

    /** The model. Required. */
    public Builder setModel(ModelSpec model) {
      c.model = model;
      return this;
    }

    /** The loss. Required. */
    public Builder setLoss(LossSpec loss) {
      c.loss = loss;
      return this;
    }

    /** The optimizer and learning-rate schedule. Required. */
    public Builder setOptimizer(OptimizerSpec optimizer) {
      c.optimizer = optimizer;
      return this;
    }

    /** Each worker's training batches (per-worker batch size: global batch = it x N). Required. */
    public Builder setTrainingData(BatchSourceFactory data) {
      c.trainData = data;
      train = null;
      return this;
    }

    /**
     * Training data as files: planned on the driver when {@link #fit} runs (a Spark job counts the
     * records), then streamed by every worker's input pipeline.
     */
    public Builder setTrainingData(DatasetSpec spec, PipelineOptions options) {
      train = new DataInput(spec, null, options);
      c.trainData = DataInput.PENDING;
      return this;
    }

    /**
     * Training data as a DataFrame: its own files if it is a plain TFRecord or Parquet scan,
     * otherwise written once to Parquet under {@link #optStagingDir} (deleted after training).
     * {@code columns} names the feature columns with their shapes and the label; its paths are
     * ignored.
     */
    public Builder setTrainingData(Dataset<Row> df, DatasetSpec columns, PipelineOptions options) {
      train = new DataInput(columns, df, options);
      c.trainData = DataInput.PENDING;
      return this;
    }

    /** Number of workers N (barrier tasks, one replica each). Required. */
    public Builder setNumWorkers(int numWorkers) {
      c.numWorkers = numWorkers;
      return this;
    }

    /** Number of epochs. Default 1. */
    public Builder optEpochs(int epochs) {
      c.epochs = epochs;
      return this;
    }

    /** Validation data, evaluated on every worker at each epoch end, metrics reduced globally. */
    public Builder optValidationData(BatchSourceFactory data) {
      c.validationData = data;
      validation = null;
      return this;
    }

    /**
     * Validation files: every worker evaluates its shard once per epoch (no padding, no shuffle).
     */
    public Builder optValidationData(DatasetSpec spec, PipelineOptions options) {
      validation = new DataInput(spec, null, options);
      return this;
    }

    /** Validation data as a DataFrame (see the training variant). */
    public Builder optValidationData(
        Dataset<Row> df, DatasetSpec columns, PipelineOptions options) {
      validation = new DataInput(columns, df, options);
      return this;
    }

    /**
     * A per-example map of the training data (tf.data's {@code map(fn,
     * num_parallel_calls=AUTOTUNE)}): augmentation, such as {@link
     * dev.sparktrainer.data.ImageAugment}'s, run in each worker's parallel decode stage with a
     * random generator seeded from (the pipeline's seed, epoch, rank, example), so a resumed run
     * sees the same augmented examples. It replaces the training {@link PipelineOptions}' transform
     * and never touches the validation data: a map that every input of the model needs (per-channel
     * normalization) goes into both datasets' {@link PipelineOptions#transform() options} instead.
     * Needs training data given as files or a DataFrame. Default none.
     */
    public Builder optTransform(ExampleTransform transform) {
      this.transform = transform;
      return this;
    }

    /**
     * Where DataFrames that are not plain file scans are staged as Parquet (any Hadoop path every
     * executor can read: on a cluster not a {@code file:} one, which pre-flight refuses). Default:
     * {@code _staging} under the checkpoint directory when that is on a shared file system, else
     * {@code _staging-<name>} next to the output directory when that is, else the local temp
     * directory (local master only).
     */
    public Builder optStagingDir(String dir) {
      stagingDir = dir;
      return this;
    }

    /**
     * Normalize the features: {@code STANDARD} ({@code (x - mean) / std}) or {@code MINMAX} ({@code
     * (x - min) / (max - min)}), with statistics computed in one distributed pass over the training
     * data (never the validation data) before training starts; constant features become 0. Applied
     * to training and validation batches, saved with the model and applied again by inference.
     * Needs training data given as files or a DataFrame. Default {@code NONE}.
     */
    public Builder optNormalize(Normalization.Mode mode) {
      normalize = Objects.requireNonNull(mode, "normalize");
      return this;
    }

    /** Seed of parameter initialization and of per-step randomness (dropout). Default 0. */
    public Builder optSeed(long seed) {
      c.seed = seed;
      return this;
    }

    /** Directory (any Hadoop FileSystem) for checkpoints; without it a retry starts over. */
    public Builder optCheckpointDir(String dir) {
      c.checkpointDir = dir;
      return this;
    }

    /** Also checkpoint every {@code steps} global steps (0: only at epoch ends, the default). */
    public Builder optCheckpointEverySteps(long steps) {
      c.checkpointEverySteps = steps;
      return this;
    }

    /** How many checkpoints to keep. Default 3. */
    public Builder optKeepCheckpoints(int keep) {
      c.keepCheckpoints = keep;
      return this;
    }

    /** Where the trained model is saved ({@link TrainedModel#save}). */
    public Builder optOutputDir(String dir) {
      this.outputDir = dir;
      return this;
    }

    /**
     * Train on the GPUs Spark assigns to each task (all of them, batch split across). Default
     * false.
     */
    public Builder optGpus(boolean gpus) {
      c.useGpus = gpus;
      return this;
    }

    /**
     * The former name of {@link #optGpus}.
     *
     * @deprecated use {@link #optGpus} ({@code --gpus} on the command line)
     */
    @Deprecated
    public Builder optUseGpus(boolean useGpus) {
      return optGpus(useGpus);
    }

    /**
     * Without GPUs, run this many replicas per worker on the CPU, each on a slice of the batch —
     * the multi-GPU code path, for testing it on CPU. Default 1.
     */
    public Builder optCpuDevicesPerWorker(int devices) {
      c.cpuDevicesPerWorker = devices;
      return this;
    }

    /**
     * Size of a gradient bucket in MiB (0.001 to 1024; rounded to a multiple of 8 bytes): one
     * all-reduce each, started as soon as backward has produced all of its gradients. Default 25
     * MiB, as DDP's; the first bucket (the last layers) is at most 1 MiB so that communication
     * starts early. A parameter larger than a bucket gets a bucket of its own.
     */
    public Builder optBucketMb(double mib) {
      c.fusionBucketBytes = TrainerOption.bucketBytes("bucketMb", mib);
      return this;
    }

    /**
     * The bucket size in bytes (a multiple of 8, at least 1024).
     *
     * @deprecated use {@link #optBucketMb} ({@code --bucket-mb}, the Estimator's {@code bucketMb})
     */
    @Deprecated
    public Builder optFusionBucketBytes(int bytes) {
      c.fusionBucketBytes = bytes;
      return this;
    }

    /**
     * Overlap the gradient all-reduce with backward (default true): buckets are reduced on a
     * communication thread, last layers first, while backward goes on through the earlier ones, and
     * each bucket's update is applied as it comes back. False: one all-reduce pass after the whole
     * backward, for comparison.
     */
    public Builder optOverlap(boolean overlap) {
      c.overlap = overlap;
      return this;
    }

    /**
     * Gradient accumulation: each optimizer step sums the gradients of {@code k} consecutive
     * batches of every worker locally and all-reduces them once, so the global batch is per-worker
     * batch x k x N with the memory of one batch. The update equals one step on the k-times-larger
     * batch (the loss is the mean over all its samples; batch norm normalizes each batch with its
     * own statistics). Learning-rate schedules and checkpoint intervals count optimizer steps.
     * Default 1.
     */
    public Builder optAccumulateSteps(int k) {
      c.accumulateSteps = k;
      return this;
    }

    /**
     * What a resume from a checkpoint written by another number of workers keeps: {@link
     * Rescale#GLOBAL_BATCH} (default; per-worker batch and accumulation chosen so that batch x
     * accumulation x workers matches the checkpoint's, at most the configured batch; refused,
     * naming the worker counts that work, when none does) or {@link Rescale#LEARNING_RATE} (the
     * configured batch, the learning rate scaled by the ratio of the global batches). The
     * interrupted epoch continues with the records not yet consumed for data with a global order
     * ({@link InMemoryDataset}); the file pipeline restarts it.
     */
    public Builder optRescale(Rescale rescale) {
      c.rescale = Objects.requireNonNull(rescale, "rescale");
      return this;
    }

    /** Where parameters and optimizer state live and are updated. Default {@code AUTO}. */
    public Builder optOptimizerPlacement(OptimizerPlacement placement) {
      c.placement = Objects.requireNonNull(placement, "placement");
      return this;
    }

    /**
     * The arithmetic of forward and backward: {@code FP32} (default) or {@code BF16}, mixed
     * precision: forward and backward run on a bfloat16 copy of the parameters, refreshed from the
     * float32 master weights before every step; the gradients are cast into float32 buckets, and
     * the optimizer, its state, normalization layers' parameters and statistics, and the loss stay
     * float32. Checkpoints hold the float32 master state, so a run resumes in either precision;
     * validation and the trained model use the float32 weights. (How gradients travel between
     * workers is {@link #optGradientPrecision}, independent of this.)
     */
    public Builder optPrecision(Precision precision) {
      c.precision = Objects.requireNonNull(precision, "precision");
      return this;
    }

    /**
     * How gradients travel in the ring all-reduce: {@code FP32} (default, exact averaging) or
     * {@code BF16}, which halves the bytes on the wire; partial sums are accumulated in FP32 and
     * rounded once per hop, and every replica still receives the identical result. Batch-norm
     * statistics always travel at full precision. {@code FP16} is refused: gradients span more
     * orders of magnitude than FP16 holds (6e-8 to 65504), so without loss scaling small ones flush
     * to zero and sums overflow; BF16 has FP32's exponent range and needs no scaling.
     */
    public Builder optGradientPrecision(WirePrecision precision) {
      c.gradientPrecision = precision;
      return this;
    }

    /**
     * TLS (mutual, certificates from the given key and trust stores) for the ring's sockets: every
     * gradient frame encrypted and integrity-protected. The store files must exist on every
     * executor (relative paths: the task's working directory, where {@code --files} puts them).
     * Default: none.
     */
    public Builder optRingTls(RingTls tls) {
      c.ringTls = tls;
      return this;
    }

    /**
     * How ring neighbours exchange gradients: {@link RingTransport#AUTO} (default: neighbours on
     * the same host, executors sharing a machine, through an owner-only memory-mapped file in
     * {@code /dev/shm} instead of loopback TCP; neighbours on other hosts over TCP) or {@link
     * RingTransport#TCP} (every link on TCP). Shared memory is not used with {@link #optRingTls}:
     * whoever asked for TLS gets TLS on every link.
     */
    public Builder optRingTransport(RingTransport transport) {
      c.ringSharedMemory = Objects.requireNonNull(transport, "ringTransport").sharedMemory();
      return this;
    }

    /**
     * True: {@link RingTransport#AUTO}; false: {@link RingTransport#TCP}.
     *
     * @deprecated use {@link #optRingTransport} ({@code --ring-transport})
     */
    @Deprecated
    public Builder optRingSharedMemory(boolean sharedMemory) {
      return optRingTransport(sharedMemory ? RingTransport.AUTO : RingTransport.TCP);
    }

    /**
     * Deadline of each collective operation: a worker that stops responding fails the stage after
     * this long, naming its rank and address. Default 5 minutes.
     */
    public Builder optCollectiveTimeout(Duration timeout) {
      c.operationTimeout = timeout;
      return this;
    }

    /**
     * The former name of {@link #optCollectiveTimeout}.
     *
     * @deprecated use {@link #optCollectiveTimeout} ({@code --collective-timeout})
     */
    @Deprecated
    public Builder optOperationTimeout(Duration timeout) {
      return optCollectiveTimeout(timeout);
    }

    /** Host the ring listeners bind and advertise; default: the executor's host from Spark. */
    public Builder optRingHost(String host) {
      this.ringHost = host;
      return this;
    }

    /**
     * Elastic training: the fewest workers to go on with (default: {@link #setNumWorkers}, which
     * keeps a job on exactly N workers). When the cluster offers fewer than N slots for longer than
     * {@link #optSlotWait} — at the start, or once a running job has lost executors for good — the
     * trainer (re)launches on the largest count from N down to this one that it offers (with the
     * default {@link Rescale#GLOBAL_BATCH}, one that divides the global batch), from the latest
     * checkpoint. Each change is logged, reported to the callback ({@link
     * TrainingCallback#onWorkersChanged}) and recorded in the history's resumes. Needs a checkpoint
     * directory to resume a running job.
     */
    public Builder optMinWorkers(int minWorkers) {
      c.minWorkers = minWorkers;
      return this;
    }

    /**
     * With {@link #optMinWorkers}: after a relaunch on fewer workers, grow back toward {@link
     * #setNumWorkers} when the cluster offers more slots again: the workers stop at the next epoch
     * end (its checkpoint written) and the job is relaunched on the larger count. Default false.
     */
    public Builder optGrow(boolean grow) {
      c.grow = grow;
      return this;
    }

    /** How long the pre-flight check waits for executors to offer enough slots. Default 30 s. */
    public Builder optSlotWait(Duration wait) {
      this.slotWait = wait;
      return this;
    }

    /**
     * A hook run by rank 0 inside its task (live progress to the driver, TensorBoard event files);
     * it never fails training. See {@code dev.sparktrainer.monitor.TrainingMonitor}.
     */
    public Builder optCallback(TrainingCallback callback) {
      c.callback = callback;
      return this;
    }

    /**
     * Testing only: the faults to inject (default: {@link FaultInjection#installed()}, NONE outside
     * tests).
     */
    Builder optFaultInjection(FaultInjection faults) {
      c.faults = Objects.requireNonNull(faults, "faults");
      return this;
    }

    /** Testing only: {@code rank} perturbs its parameters before every epoch-end replica check. */
    Builder optInjectDivergence(int rank) {
      return optFaultInjection(c.faults.withDivergence(rank));
    }

    /**
     * Testing only: {@code rank} pauses {@code millis} before every step (in every attempt), so
     * that it is the straggler the epoch's report names.
     */
    Builder optInjectSlowRank(int rank, long millis) {
      return optFaultInjection(c.faults.withSlowRank(rank, millis));
    }

    /**
     * Testing only: {@code rank} fails after global step {@code step}, in the first attempt only.
     */
    Builder optInjectFailure(int rank, long step) {
      return optFaultInjection(c.faults.withFailure(rank, step));
    }

    /** Validates and builds. */
    public DistributedTrainer build() {
      Objects.requireNonNull(c.model, "model: setModel is required");
      Objects.requireNonNull(c.loss, "loss: setLoss is required");
      Objects.requireNonNull(c.optimizer, "optimizer: setOptimizer is required");
      Objects.requireNonNull(c.trainData, "trainingData: setTrainingData is required");
      if (transform != null && train == null) {
        throw new IllegalArgumentException(
            "Invalid optTransform: it maps training data given as files or a"
                + " DataFrame (setTrainingData with a DatasetSpec), not a BatchSourceFactory's batches");
      }
      check(
          normalize == Normalization.Mode.NONE || train != null,
          "normalize",
          normalize,
          "NONE with a BatchSourceFactory as training data (statistics need files or a DataFrame)");
      check(c.numWorkers >= 1, "numWorkers", c.numWorkers, ">= 1");
      check(c.epochs >= 1, "epochs", c.epochs, ">= 1");
      check(c.checkpointEverySteps >= 0, "checkpointEverySteps", c.checkpointEverySteps, ">= 0");
      check(c.keepCheckpoints >= 1, "keepCheckpoints", c.keepCheckpoints, ">= 1");
      check(c.accumulateSteps >= 1, "accumulateSteps", c.accumulateSteps, ">= 1");
      check(
          c.minWorkers >= 0 && c.minWorkers <= c.numWorkers,
          "minWorkers",
          c.minWorkers,
          "1 to numWorkers (" + c.numWorkers + ")");
      check(c.cpuDevicesPerWorker >= 1, "cpuDevicesPerWorker", c.cpuDevicesPerWorker, ">= 1");
      check(
          c.fusionBucketBytes >= 1024 && c.fusionBucketBytes % 8 == 0,
          "fusionBucketBytes",
          c.fusionBucketBytes,
          "a multiple of 8, at least 1024 (default " + DEFAULT_BUCKET_BYTES + ")");
      check(
          c.gradientPrecision != null && c.gradientPrecision != WirePrecision.FP16,
          "gradientPrecision",
          c.gradientPrecision,
          "FP32 or BF16 (FP16 has too little range for gradients without loss scaling; BF16 has FP32's)");
      check(
          c.operationTimeout != null
              && !c.operationTimeout.isNegative()
              && !c.operationTimeout.isZero(),
          "collectiveTimeout",
          c.operationTimeout,
          "a positive duration");
      return new DistributedTrainer(this, c);
    }

    private static void check(boolean ok, String name, Object value, String expected) {
      if (!ok) {
        throw new IllegalArgumentException(
            "Invalid " + name + " " + value + ": expected " + expected);
      }
    }
  }
}
