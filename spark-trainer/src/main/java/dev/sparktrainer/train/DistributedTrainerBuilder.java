package dev.sparktrainer.train;

import dev.sparktrainer.collective.CommOptions;
import dev.sparktrainer.collective.RingTls;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.Rescale;
import dev.sparktrainer.train.input.BatchSourceFactory;
import dev.sparktrainer.train.input.DataInput;
import dev.sparktrainer.train.loop.FaultInjection;
import dev.sparktrainer.train.metrics.TrainingCallback;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.StepOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Builder for {@link DistributedTrainer} ({@link DistributedTrainer#builder()}): {@code setX} for
 * required values, {@code optX} for optional ones, validation in {@link #build()}.
 */
public final class DistributedTrainerBuilder {
  private final Settings c = new Settings();
  TrainingCallback callback;
  FaultInjection faults = FaultInjection.installed();
  String outputDir;
  String ringHost;
  Duration slotWait = TrainerOption.slotWait("slotWait", TrainerOption.SLOT_WAIT.longDefault());
  DataInput train;
  DataInput validation;
  String stagingDir; // null: see defaultStagingDir
  ExampleTransform transform;
  Normalization.Mode normalize = Normalization.Mode.parse(TrainerOption.NORMALIZE.stringDefault());

  DistributedTrainerBuilder() {
    c.connectTimeout = Duration.ofMinutes(2);
  }

  /** The model. Required. */
  public DistributedTrainerBuilder setModel(ModelSpec model) {
    c.model = model;
    return this;
  }

  /** The loss. Required. */
  public DistributedTrainerBuilder setLoss(LossSpec loss) {
    c.loss = loss;
    return this;
  }

  /** The optimizer and learning-rate schedule. Required. */
  public DistributedTrainerBuilder setOptimizer(OptimizerSpec optimizer) {
    c.optimizer = optimizer;
    return this;
  }

  /** Each worker's training batches (per-worker batch size: global batch = it x N). Required. */
  public DistributedTrainerBuilder setTrainingData(BatchSourceFactory data) {
    c.trainData = data;
    train = null;
    return this;
  }

  /**
   * Training data as files: planned on the driver when {@link #fit} runs (a Spark job counts the
   * records), then streamed by every worker's input pipeline.
   */
  public DistributedTrainerBuilder setTrainingData(DatasetSpec spec, PipelineOptions options) {
    train = new DataInput(spec, null, options);
    c.trainData = DataInput.PENDING;
    return this;
  }

  /**
   * Training data as a DataFrame: its own files if it is a plain TFRecord or Parquet scan,
   * otherwise written once to Parquet under {@link #optStagingDir} (deleted after training). {@code
   * columns} names the feature columns with their shapes and the label; its paths are ignored.
   */
  public DistributedTrainerBuilder setTrainingData(
      Dataset<Row> df, DatasetSpec columns, PipelineOptions options) {
    train = new DataInput(columns, df, options);
    c.trainData = DataInput.PENDING;
    return this;
  }

  /** Number of workers N (barrier tasks, one replica each). Required. */
  public DistributedTrainerBuilder setNumWorkers(int numWorkers) {
    c.numWorkers = numWorkers;
    return this;
  }

  /** Number of epochs. Default 10, as on every surface ({@link TrainerOption#EPOCHS}). */
  public DistributedTrainerBuilder optEpochs(int epochs) {
    c.epochs = epochs;
    return this;
  }

  /** Validation data, evaluated on every worker at each epoch end, metrics reduced globally. */
  public DistributedTrainerBuilder optValidationData(BatchSourceFactory data) {
    c.validationData = data;
    validation = null;
    return this;
  }

  /** Validation files: every worker evaluates its shard once per epoch (no padding, no shuffle). */
  public DistributedTrainerBuilder optValidationData(DatasetSpec spec, PipelineOptions options) {
    validation = new DataInput(spec, null, options);
    return this;
  }

  /** Validation data as a DataFrame (see the training variant). */
  public DistributedTrainerBuilder optValidationData(
      Dataset<Row> df, DatasetSpec columns, PipelineOptions options) {
    validation = new DataInput(columns, df, options);
    return this;
  }

  /**
   * A per-example map of the training data (tf.data's {@code map(fn,
   * num_parallel_calls=AUTOTUNE)}): augmentation, such as {@link
   * dev.sparktrainer.data.ImageAugment}'s, run in each worker's parallel decode stage with a random
   * generator seeded from (the pipeline's seed, epoch, rank, example), so a resumed run sees the
   * same augmented examples. It replaces the training {@link PipelineOptions}' transform and never
   * touches the validation data: a map that every input of the model needs (per-channel
   * normalization) goes into both datasets' {@link PipelineOptions#transform() options} instead.
   * Needs training data given as files or a DataFrame. Default none.
   */
  public DistributedTrainerBuilder optTransform(ExampleTransform transform) {
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
  public DistributedTrainerBuilder optStagingDir(String dir) {
    stagingDir = dir;
    return this;
  }

  /**
   * Normalize the features: {@code STANDARD} ({@code (x - mean) / std}) or {@code MINMAX} ({@code
   * (x - min) / (max - min)}), with statistics computed in one distributed pass over the training
   * data (never the validation data) before training starts; constant features become 0. Applied to
   * training and validation batches, saved with the model and applied again by inference. Needs
   * training data given as files or a DataFrame. Default {@code NONE}.
   */
  public DistributedTrainerBuilder optNormalize(Normalization.Mode mode) {
    normalize = Objects.requireNonNull(mode, "normalize");
    return this;
  }

  /**
   * Seed of parameter initialization and of per-step randomness (dropout). Default 42, as on every
   * surface and as the input pipeline's ({@link TrainerOption#SEED}).
   */
  public DistributedTrainerBuilder optSeed(long seed) {
    c.seed = seed;
    return this;
  }

  /** Directory (any Hadoop FileSystem) for checkpoints; without it a retry starts over. */
  public DistributedTrainerBuilder optCheckpointDir(String dir) {
    c.checkpointDir = dir;
    return this;
  }

  /** Also checkpoint every {@code steps} global steps (0: only at epoch ends, the default). */
  public DistributedTrainerBuilder optCheckpointEverySteps(long steps) {
    c.checkpointEverySteps = steps;
    return this;
  }

  /** How many checkpoints to keep. Default 3. */
  public DistributedTrainerBuilder optKeepCheckpoints(int keep) {
    c.keepCheckpoints = keep;
    return this;
  }

  /** Where the trained model is saved ({@link TrainedModel#save}). */
  public DistributedTrainerBuilder optOutputDir(String dir) {
    this.outputDir = dir;
    return this;
  }

  /**
   * Train on the GPUs Spark assigns to each task (all of them, batch split across). Default false.
   */
  public DistributedTrainerBuilder optGpus(boolean gpus) {
    c.useGpus = gpus;
    return this;
  }

  /**
   * The former name of {@link #optGpus}.
   *
   * @deprecated use {@link #optGpus} ({@code --gpus} on the command line)
   */
  @Deprecated
  public DistributedTrainerBuilder optUseGpus(boolean useGpus) {
    return optGpus(useGpus);
  }

  /**
   * Without GPUs, run this many replicas per worker on the CPU, each on a slice of the batch — the
   * multi-GPU code path, for testing it on CPU. Default 1.
   */
  public DistributedTrainerBuilder optCpuDevicesPerWorker(int devices) {
    c.cpuDevicesPerWorker = devices;
    return this;
  }

  /**
   * Size of a gradient bucket in MiB (0.001 to 1024; rounded to a multiple of 8 bytes): one
   * all-reduce each, started as soon as backward has produced all of its gradients. Default 25 MiB,
   * as DDP's; the first bucket (the last layers) is at most 1 MiB so that communication starts
   * early. A parameter larger than a bucket gets a bucket of its own.
   */
  public DistributedTrainerBuilder optBucketMb(double mib) {
    c.bucketBytes = TrainerOption.bucketBytes("bucketMb", mib);
    return this;
  }

  /**
   * The bucket size in bytes (a multiple of 8, at least 1024).
   *
   * @deprecated use {@link #optBucketMb} ({@code --bucket-mb}, the Estimator's {@code bucketMb})
   */
  @Deprecated
  public DistributedTrainerBuilder optFusionBucketBytes(int bytes) {
    c.bucketBytes = bytes;
    return this;
  }

  /**
   * Overlap the gradient all-reduce with backward (default true): buckets are reduced on a
   * communication thread, last layers first, while backward goes on through the earlier ones, and
   * each bucket's update is applied as it comes back. False: one all-reduce pass after the whole
   * backward, for comparison.
   */
  public DistributedTrainerBuilder optOverlap(boolean overlap) {
    c.overlap = overlap;
    return this;
  }

  /**
   * Gradient accumulation: each optimizer step sums the gradients of {@code k} consecutive batches
   * of every worker locally and all-reduces them once, so the global batch is per-worker batch x k
   * x N with the memory of one batch. The update equals one step on the k-times-larger batch (the
   * loss is the mean over all its samples; batch norm normalizes each batch with its own
   * statistics). Learning-rate schedules and checkpoint intervals count optimizer steps. Default 1.
   */
  public DistributedTrainerBuilder optAccumulateSteps(int k) {
    c.accumulateSteps = k;
    return this;
  }

  /**
   * What a resume from a checkpoint written by another number of workers keeps: {@link
   * Rescale#GLOBAL_BATCH} (default; per-worker batch and accumulation chosen so that batch x
   * accumulation x workers matches the checkpoint's, at most the configured batch; refused, naming
   * the worker counts that work, when none does) or {@link Rescale#LEARNING_RATE} (the configured
   * batch, the learning rate scaled by the ratio of the global batches). The interrupted epoch
   * continues with the records not yet consumed for data with a global order ({@link
   * InMemoryDataset}); the file pipeline restarts it.
   */
  public DistributedTrainerBuilder optRescale(Rescale rescale) {
    c.rescale = Objects.requireNonNull(rescale, "rescale");
    return this;
  }

  /** Where parameters and optimizer state live and are updated. Default {@code AUTO}. */
  public DistributedTrainerBuilder optOptimizerPlacement(OptimizerPlacement placement) {
    c.placement = Objects.requireNonNull(placement, "placement");
    return this;
  }

  /**
   * The arithmetic of forward and backward: {@code FP32} (default) or {@code BF16}, mixed
   * precision: forward and backward run on a bfloat16 copy of the parameters, refreshed from the
   * float32 master weights before every step; the gradients are cast into float32 buckets, and the
   * optimizer, its state, normalization layers' parameters and statistics, and the loss stay
   * float32. Checkpoints hold the float32 master state, so a run resumes in either precision;
   * validation and the trained model use the float32 weights. (How gradients travel between workers
   * is {@link #optGradientPrecision}, independent of this.)
   */
  public DistributedTrainerBuilder optPrecision(Precision precision) {
    c.precision = Objects.requireNonNull(precision, "precision");
    return this;
  }

  /**
   * How gradients travel in the ring all-reduce: {@code FP32} (default, exact averaging) or {@code
   * BF16}, which halves the bytes on the wire; partial sums are accumulated in FP32 and rounded
   * once per hop, and every replica still receives the identical result. Batch-norm statistics
   * always travel at full precision. {@code FP16} is refused: gradients span more orders of
   * magnitude than FP16 holds (6e-8 to 65504), so without loss scaling small ones flush to zero and
   * sums overflow; BF16 has FP32's exponent range and needs no scaling.
   */
  public DistributedTrainerBuilder optGradientPrecision(WirePrecision precision) {
    c.gradientPrecision = precision;
    return this;
  }

  /**
   * TLS (mutual, certificates from the given key and trust stores) for the ring's sockets: every
   * gradient frame encrypted and integrity-protected. The store files must exist on every executor
   * (relative paths: the task's working directory, where {@code --files} puts them). Default: none.
   */
  public DistributedTrainerBuilder optRingTls(RingTls tls) {
    c.ringTls = tls;
    return this;
  }

  /**
   * How ring neighbours exchange gradients: {@link RingTransport#AUTO} (default: neighbours on the
   * same host, executors sharing a machine, through an owner-only memory-mapped file in {@code
   * /dev/shm} instead of loopback TCP; neighbours on other hosts over TCP) or {@link
   * RingTransport#TCP} (every link on TCP). Shared memory is not used with {@link #optRingTls}:
   * whoever asked for TLS gets TLS on every link.
   */
  public DistributedTrainerBuilder optRingTransport(RingTransport transport) {
    c.ringSharedMemory = Objects.requireNonNull(transport, "ringTransport").sharedMemory();
    return this;
  }

  /**
   * True: {@link RingTransport#AUTO}; false: {@link RingTransport#TCP}.
   *
   * @deprecated use {@link #optRingTransport} ({@code --ring-transport})
   */
  @Deprecated
  public DistributedTrainerBuilder optRingSharedMemory(boolean sharedMemory) {
    return optRingTransport(sharedMemory ? RingTransport.AUTO : RingTransport.TCP);
  }

  /**
   * Deadline of each collective operation: a worker that stops responding fails the stage after
   * this long, naming its rank and address. Default 5 minutes.
   */
  public DistributedTrainerBuilder optCollectiveTimeout(Duration timeout) {
    c.operationTimeout = timeout;
    return this;
  }

  /**
   * The former name of {@link #optCollectiveTimeout}.
   *
   * @deprecated use {@link #optCollectiveTimeout} ({@code --collective-timeout})
   */
  @Deprecated
  public DistributedTrainerBuilder optOperationTimeout(Duration timeout) {
    return optCollectiveTimeout(timeout);
  }

  /** Host the ring listeners bind and advertise; default: the executor's host from Spark. */
  public DistributedTrainerBuilder optRingHost(String host) {
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
  public DistributedTrainerBuilder optMinWorkers(int minWorkers) {
    c.minWorkers = minWorkers;
    return this;
  }

  /**
   * With {@link #optMinWorkers}: after a relaunch on fewer workers, grow back toward {@link
   * #setNumWorkers} when the cluster offers more slots again: the workers stop at the next epoch
   * end (its checkpoint written) and the job is relaunched on the larger count. Default false.
   */
  public DistributedTrainerBuilder optGrow(boolean grow) {
    c.grow = grow;
    return this;
  }

  /** How long the pre-flight check waits for executors to offer enough slots. Default 30 s. */
  public DistributedTrainerBuilder optSlotWait(Duration wait) {
    this.slotWait = wait;
    return this;
  }

  /**
   * A hook run by rank 0 inside its task (live progress to the driver, TensorBoard event files); it
   * never fails training. See {@code dev.sparktrainer.monitor.TrainingMonitor}.
   */
  public DistributedTrainerBuilder optCallback(TrainingCallback callback) {
    this.callback = callback;
    return this;
  }

  /**
   * Testing only: the faults to inject (default: {@link FaultInjection#installed()}, NONE outside
   * tests).
   */
  DistributedTrainerBuilder optFaultInjection(FaultInjection faults) {
    this.faults = Objects.requireNonNull(faults, "faults");
    return this;
  }

  /** Testing only: {@code rank} perturbs its parameters before every epoch-end replica check. */
  DistributedTrainerBuilder optInjectDivergence(int rank) {
    return optFaultInjection(faults.withDivergence(rank));
  }

  /**
   * Testing only: {@code rank} pauses {@code millis} before every step (in every attempt), so that
   * it is the straggler the epoch's report names.
   */
  DistributedTrainerBuilder optInjectSlowRank(int rank, long millis) {
    return optFaultInjection(faults.withSlowRank(rank, millis));
  }

  /** Testing only: {@code rank} fails after global step {@code step}, in the first attempt only. */
  DistributedTrainerBuilder optInjectFailure(int rank, long step) {
    return optFaultInjection(faults.withFailure(rank, step));
  }

  /** Validates and builds. */
  public DistributedTrainer build() {
    Objects.requireNonNull(c.model, "model: setModel is required");
    Objects.requireNonNull(c.loss, "loss: setLoss is required");
    Objects.requireNonNull(c.optimizer, "optimizer: setOptimizer is required");
    Objects.requireNonNull(c.trainData, "trainingData: setTrainingData is required");
    if (c.model instanceof TorchScriptSpec ts
        && ts.columns().isEmpty()
        && train != null
        && !train.spec().fixedFloatOnly()) {
      // int64 or sequence columns: the module is checked against them, and predictions feed it
      // what training does
      c.model = ts.forColumns(torchScriptColumns(train.spec()));
    }
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
        c.bucketBytes >= 1024 && c.bucketBytes % 8 == 0,
        "optFusionBucketBytes",
        c.bucketBytes,
        "a multiple of 8, at least 1024 (default " + DistributedTrainer.DEFAULT_BUCKET_BYTES + ")");
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
    return new DistributedTrainer(this, c.toConfig());
  }

  /** The columns of {@code spec} as a TorchScript module's forward receives them. */
  static List<TorchScriptSpec.Column> torchScriptColumns(DatasetSpec spec) {
    List<TorchScriptSpec.Column> out = new ArrayList<>();
    for (DatasetSpec.Feature f : spec.features()) {
      boolean int64 = f.type() == DatasetSpec.ValueType.INT64;
      TorchScriptSpec.Column.Kind kind =
          f.sequence()
              ? (int64 ? TorchScriptSpec.Column.Kind.IDS : TorchScriptSpec.Column.Kind.SEQ)
              : (int64 ? TorchScriptSpec.Column.Kind.INT64 : TorchScriptSpec.Column.Kind.FLOAT32);
      out.add(new TorchScriptSpec.Column(f.name(), kind, f.shape(), f.vocabSize()));
    }
    return out;
  }

  private static void check(boolean ok, String name, Object value, String expected) {
    if (!ok) {
      throw new IllegalArgumentException(
          "Invalid " + name + " " + value + ": expected " + expected);
    }
  }

  /** The builder's settings as given, until {@link #build} validates them. */
  private static final class Settings {
    ModelSpec model;
    LossSpec loss;
    OptimizerSpec optimizer;
    BatchSourceFactory trainData;
    BatchSourceFactory validationData;
    int numWorkers;
    // The option table's defaults (OptionTableTest checks each surface starts from them).
    int epochs = TrainerOption.EPOCHS.intDefault();
    long seed = TrainerOption.SEED.longDefault();
    String checkpointDir = TrainerOption.CHECKPOINT_DIR.stringDefault();
    long checkpointEverySteps = TrainerOption.CHECKPOINT_EVERY_STEPS.longDefault();
    int keepCheckpoints = TrainerOption.KEEP_CHECKPOINTS.intDefault();
    int cpuDevicesPerWorker = TrainerOption.CPU_DEVICES_PER_WORKER.intDefault();
    boolean useGpus = TrainerOption.GPUS.booleanDefault();
    int bucketBytes =
        TrainerOption.bucketBytes("bucketMb", TrainerOption.BUCKET_MB.doubleDefault());
    int accumulateSteps = TrainerOption.ACCUMULATE_STEPS.intDefault();
    Rescale rescale = Rescale.parse("rescale", TrainerOption.RESCALE.stringDefault());
    int minWorkers = TrainerOption.MIN_WORKERS.intDefault();
    boolean grow = TrainerOption.GROW.booleanDefault();
    boolean overlap = TrainerOption.OVERLAP.booleanDefault();
    OptimizerPlacement placement =
        OptimizerPlacement.parse(
            "optimizerPlacement", TrainerOption.OPTIMIZER_PLACEMENT.stringDefault());
    Duration operationTimeout =
        TrainerOption.collectiveTimeout(
            "collectiveTimeout", TrainerOption.COLLECTIVE_TIMEOUT.longDefault());
    RingTls ringTls;
    boolean ringSharedMemory =
        TrainerOption.ringTransport("ringTransport", TrainerOption.RING_TRANSPORT.stringDefault())
            .sharedMemory();
    Precision precision = Precision.parse("precision", TrainerOption.PRECISION.stringDefault());
    WirePrecision gradientPrecision =
        TrainerOption.gradientPrecision(
            "gradientPrecision", TrainerOption.GRADIENT_PRECISION.stringDefault());
    Duration connectTimeout;

    TrainingConfig toConfig() {
      return new TrainingConfig(
          new TrainingConfig.Model(model, loss, optimizer, precision, seed),
          new TrainingConfig.Devices(useGpus, cpuDevicesPerWorker, placement),
          new TrainingConfig.Data(trainData, validationData, epochs, accumulateSteps),
          new CommOptions(
              connectTimeout, operationTimeout, gradientPrecision, ringTls, ringSharedMemory),
          new StepOptions(bucketBytes, overlap),
          new TrainingConfig.Checkpoints(checkpointDir, checkpointEverySteps, keepCheckpoints),
          new TrainingConfig.Elastic(
              numWorkers, minWorkers > 0 ? minWorkers : numWorkers, numWorkers, grow, rescale));
    }
  }
}
