package dev.sparktrainer.train;

import dev.sparktrainer.collective.WirePrecision;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * The option table: every setting of a training, named once, with its name on each of the three
 * public surfaces — the command line's {@code train} flag, the {@link DistributedTrainerBuilder}
 * method (or the {@code PipelineOptions} / {@code OptimizerSpec} builder method it feeds) and the
 * Spark ML Estimator's Param — and, where a surface deliberately lacks it, the reason; and its one
 * default ({@link #defaultValue()}), which every surface starts from. The unit conversions (MiB to
 * bytes, seconds to durations) and the checks of enumerated values, with their messages, are here
 * once and used by every surface.
 *
 * <p>The command line ({@code cli.TrainerFlags}) and the Estimator ({@code
 * ml.SparkTrainerEstimator#fit}) each map their values onto the builders in one place; {@code
 * OptionTableTest} checks that every builder option is a row here, that every row's flag and Param
 * exist, that each surface's default is the row's, and that the option tables of {@code
 * docs/cli.md} list them all.
 */
public enum TrainerOption {
  MODEL(Target.TRAINER, "setModel", "model", "modelSpec", null),
  ACTIVATION(
      Target.TRAINER,
      "setModel",
      "activation",
      "activation",
      null,
      "relu",
      "tanh",
      "sigmoid",
      "gelu"),
  DROPOUT(Target.TRAINER, "setModel", "dropout", "dropout", null),
  NUM_CLASSES(Target.TRAINER, "setModel", "num-classes", "numClasses", null),
  LOSS(
      Target.TRAINER,
      "setLoss",
      "loss",
      "loss",
      null,
      "softmax_cross_entropy",
      "sigmoid_binary_cross_entropy",
      "l2"),
  TRAINING_DATA(
      Target.TRAINER,
      "setTrainingData",
      "data",
      null,
      "Estimator: the training data is the DataFrame given to fit"),
  FORMAT(
      Target.TRAINER,
      "setTrainingData",
      "format",
      null,
      "Estimator: fit reads its DataFrame (a plain file scan in its own format)",
      "tfrecord",
      "parquet"),
  FEATURES(Target.TRAINER, "setTrainingData", "features", "featuresCol", null),
  LABEL(Target.TRAINER, "setTrainingData", "label", "labelCol", null),
  VALIDATION_DATA(
      Target.TRAINER,
      "optValidationData",
      "validation-data",
      null,
      "Estimator: a Pipeline scores held-out data with the model's transform and an Evaluator"),
  WORKERS(Target.TRAINER, "setNumWorkers", "workers", "numWorkers", null),
  MIN_WORKERS(Target.TRAINER, "optMinWorkers", "min-workers", "minWorkers", null),
  GROW(Target.TRAINER, "optGrow", "grow", "grow", null),
  SLOT_WAIT(Target.TRAINER, "optSlotWait", "slot-wait", "slotWait", null),
  EPOCHS(Target.TRAINER, "optEpochs", "epochs", "epochs", null),
  BATCH_SIZE(Target.PIPELINE, "optBatchSize", "batch-size", "batchSize", null),
  ACCUMULATE_STEPS(
      Target.TRAINER, "optAccumulateSteps", "accumulate-steps", "accumulateSteps", null),
  OPTIMIZER(Target.TRAINER, "setOptimizer", "optimizer", "optimizer", null, "adam", "adamw", "sgd"),
  LEARNING_RATE(Target.OPTIMIZER, "optLearningRate", "learning-rate", "learningRate", null),
  MOMENTUM(Target.OPTIMIZER, "optMomentum", "momentum", "momentum", null),
  WEIGHT_DECAY(Target.OPTIMIZER, "optWeightDecay", "weight-decay", "weightDecay", null),
  WARMUP_STEPS(Target.OPTIMIZER, "optWarmupSteps", "warmup-steps", "warmupSteps", null),
  COSINE_DECAY_STEPS(
      Target.OPTIMIZER, "optCosineDecay", "cosine-decay-steps", "cosineDecaySteps", null),
  SEED(Target.TRAINER, "optSeed", "seed", "seed", null),
  SHUFFLE_BUFFER(Target.PIPELINE, "optShuffleBuffer", "shuffle-buffer", "shuffleBuffer", null),
  /** The flag is the switch's negation: {@code --nondeterministic}. */
  DETERMINISTIC(Target.PIPELINE, "optDeterministic", "nondeterministic", "deterministic", null),
  IMAGE_TRANSFER(
      Target.PIPELINE,
      "optImageTransfer",
      "image-transfer",
      "imageTransfer",
      null,
      "uint8",
      "float32",
      "auto"),
  SHARDING(Target.PIPELINE, "optSharding", "sharding", "sharding", null, "auto", "file", "data"),
  CACHE_DIR(Target.PIPELINE, "optCacheDir", "cache-dir", "cacheDir", null),
  TRANSFORM(Target.TRAINER, "optTransform", "augment", "transform", null),
  IMAGE_SIZE(
      Target.TRAINER,
      "setTrainingData",
      "image-size",
      null,
      "Estimator: fit's DataFrame columns are numbers; encoded images go through the Builder's"
          + " DatasetSpec.addImageFeature"),
  CHANNELS(
      Target.TRAINER,
      "setTrainingData",
      "channels",
      null,
      "Estimator: as image-size (the Builder's DatasetSpec.addImageFeature takes it)"),
  RESIZE(
      Target.PIPELINE,
      "optImageResize",
      "resize",
      null,
      "Estimator: as image-size (encoded images are read by the command line and the Builder)"),
  MAX_LENGTH(Target.TRAINER, "setTrainingData", "max-length", "maxLength", null),
  VOCAB_SIZE(Target.TRAINER, "setTrainingData", "vocab-size", "vocabSize", null),
  PAD_VALUE(Target.PIPELINE, "optPadValue", "pad-value", "padValue", null),
  BUCKET_BOUNDARIES(
      Target.PIPELINE, "optBucketBoundaries", "bucket-boundaries", "bucketBoundaries", null),
  NORMALIZE(
      Target.TRAINER, "optNormalize", "normalize", "normalize", null, "standard", "minmax", "none"),
  STAGING_DIR(
      Target.TRAINER,
      "optStagingDir",
      null,
      "stagingDir",
      "CLI: it reads files; an image folder (--format images) is staged where the Builder's"
          + " default puts it"),
  BUCKET_MB(Target.TRAINER, "optBucketMb", "bucket-mb", "bucketMb", null),
  /** The flag is the switch's negation: {@code --no-overlap}. */
  OVERLAP(Target.TRAINER, "optOverlap", "no-overlap", "overlap", null),
  OPTIMIZER_PLACEMENT(
      Target.TRAINER,
      "optOptimizerPlacement",
      "optimizer-placement",
      "optimizerPlacement",
      null,
      "auto",
      "device",
      "host"),
  PRECISION(Target.TRAINER, "optPrecision", "precision", "precision", null, "fp32", "bf16"),
  GRADIENT_PRECISION(
      Target.TRAINER,
      "optGradientPrecision",
      "gradient-precision",
      "gradientPrecision",
      null,
      "fp32",
      "bf16"),
  CHECKPOINT_DIR(Target.TRAINER, "optCheckpointDir", "checkpoint-dir", "checkpointDir", null),
  CHECKPOINT_EVERY_STEPS(
      Target.TRAINER,
      "optCheckpointEverySteps",
      "checkpoint-every-steps",
      "checkpointEverySteps",
      null),
  KEEP_CHECKPOINTS(
      Target.TRAINER, "optKeepCheckpoints", "keep-checkpoints", "keepCheckpoints", null),
  RESCALE(Target.TRAINER, "optRescale", "rescale", "rescale", null, "batch", "lr"),
  RING_KEYSTORE(
      Target.TRAINER,
      "optRingTls",
      "ring-keystore",
      null,
      "Estimator: its Params are saved with it, and so would the key store's password be; use the"
          + " Builder's optRingTls"),
  RING_TRUSTSTORE(
      Target.TRAINER,
      "optRingTls",
      "ring-truststore",
      null,
      "Estimator: as ring-keystore (a password would be saved with the Params)"),
  RING_TRANSPORT(
      Target.TRAINER, "optRingTransport", "ring-transport", "ringTransport", null, "auto", "tcp"),
  COLLECTIVE_TIMEOUT(
      Target.TRAINER, "optCollectiveTimeout", "collective-timeout", "collectiveTimeout", null),
  GPUS(Target.TRAINER, "optGpus", "gpus", "useGpus", null),
  RING_HOST(
      Target.TRAINER,
      "optRingHost",
      null,
      null,
      "CLI and Estimator: the executors' hosts from Spark (the CLI binds the driver's host itself on"
          + " a local master)"),
  CPU_DEVICES_PER_WORKER(
      Target.TRAINER,
      "optCpuDevicesPerWorker",
      null,
      null,
      "CLI and Estimator: testing only (the multi-GPU code path on a CPU)"),
  OUTPUT_DIR(
      Target.TRAINER,
      "optOutputDir",
      "output",
      null,
      "Estimator: the fitted model is saved with model.write().save(path)"),
  /** The CLI's callback is its live monitor, whose view {@code --progress} chooses. */
  CALLBACK(
      Target.TRAINER,
      "optCallback",
      "progress",
      null,
      "Estimator: a callback is a live object, not a Param (use the Builder's optCallback)");

  /** Which builder a row's builder method belongs to. */
  public enum Target {
    /** {@code DistributedTrainerBuilder}. */
    TRAINER,
    /** {@code dev.sparktrainer.data.PipelineOptions.Builder} (the training data's options). */
    PIPELINE,
    /** {@code dev.sparktrainer.optim.OptimizerSpec.Builder} (through {@code SpecStrings}). */
    OPTIMIZER
  }

  /** Default gradient bucket size, 25 MiB as PyTorch DDP's (the first bucket is 1 MiB). */
  public static final int DEFAULT_BUCKET_BYTES = 25 << 20;

  private final Target target;
  private final String builderMethod;
  private final String flag;
  private final String param;
  private final String absent;
  private final List<String> choices;

  TrainerOption(
      Target target,
      String builderMethod,
      String flag,
      String param,
      String absent,
      String... choices) {
    this.target = target;
    this.builderMethod = builderMethod;
    this.flag = flag;
    this.param = param;
    this.absent = absent;
    this.choices = List.of(choices);
  }

  /** The builder the {@link #builderMethod()} belongs to. */
  public Target target() {
    return target;
  }

  /** The builder method that sets it (the current name; see {@link #deprecatedBuilderMethods}). */
  public String builderMethod() {
    return builderMethod;
  }

  /** The {@code train} flag without the dashes; null where the command line lacks it. */
  public String flag() {
    return flag;
  }

  /** The Estimator's Param name; null where the Estimator lacks it. */
  public String param() {
    return param;
  }

  /** Why a surface lacks it (null when every surface has it). */
  public String absentBecause() {
    return absent;
  }

  /** The allowed values of an enumerated setting, in the order messages name them; else empty. */
  public List<String> choices() {
    return choices;
  }

  /** The choices as an array (Spark ML's {@code ParamValidators.inArray}). */
  public String[] choiceArray() {
    return choices.toArray(new String[0]);
  }

  /** Older builder names kept working (deprecated), delegating to {@link #builderMethod()}. */
  public List<String> deprecatedBuilderMethods() {
    switch (this) {
      case BUCKET_MB:
        return List.of("optFusionBucketBytes");
      case GPUS:
        return List.of("optUseGpus");
      case RING_TRANSPORT:
        return List.of("optRingSharedMemory");
      case COLLECTIVE_TIMEOUT:
        return List.of("optOperationTimeout");
      default:
        return List.of();
    }
  }

  /**
   * The unit of the value on the command line and in the Estimator, where it has one ({@code MiB},
   * {@code seconds}); null otherwise. The Builder takes the same MiB, and a {@link Duration} for
   * seconds.
   */
  public String unit() {
    switch (this) {
      case BUCKET_MB:
        return "MiB";
      case SLOT_WAIT:
      case COLLECTIVE_TIMEOUT:
        return "seconds";
      default:
        return null;
    }
  }

  /** A surface of the option table. */
  public enum Surface {
    /** The {@code train} command's flags. */
    CLI,
    /** {@link DistributedTrainerBuilder} (and the builder its row's method belongs to). */
    BUILDER,
    /** The Spark ML Estimator's Params. */
    ESTIMATOR
  }

  /**
   * The setting's default, written once for every surface: in the type and unit of the command line
   * and the Estimator (an {@link Integer}, {@link Long}, {@link Double}, {@link Boolean}, or a
   * {@link String}, enumerated values in lower case), or null where unset means none. A switch
   * ({@code --nondeterministic}, {@code --no-overlap}) is the negation of its row's default. The
   * command line's flag defaults ({@link #cliDefault()}), the Estimator's {@code setDefault} calls
   * and the Builder's initial settings are this value; {@link #defaultDiffers} names a surface that
   * cannot start from it, and why.
   */
  public Object defaultValue() {
    switch (this) {
      case MODEL:
        return "mlp:128";
      case ACTIVATION:
        return "relu";
      case DROPOUT:
        return 0.0;
      case NUM_CLASSES:
        return 0;
      case LOSS:
        return "softmax_cross_entropy";
      case FEATURES:
        return "features";
      case LABEL:
        return "label";
      case WORKERS:
        return 2;
      case MIN_WORKERS:
        return 0;
      case GROW:
      case GPUS:
        return false;
      case SLOT_WAIT:
        return 30L;
      case EPOCHS:
        return 10;
      case BATCH_SIZE:
        return 32;
      case ACCUMULATE_STEPS:
        return 1;
      case OPTIMIZER:
        return "adam";
      case LEARNING_RATE:
        return 1e-3;
      case MOMENTUM:
        return 0.9;
      case WEIGHT_DECAY:
        return 0.0;
      case WARMUP_STEPS:
      case COSINE_DECAY_STEPS:
      case CHECKPOINT_EVERY_STEPS:
        return 0L;
      case SEED:
        return 42L;
      case SHUFFLE_BUFFER:
        return 10_000;
      case DETERMINISTIC:
      case OVERLAP:
        return true;
      case IMAGE_TRANSFER:
      case SHARDING:
      case OPTIMIZER_PLACEMENT:
      case RING_TRANSPORT:
        return "auto";
      case NORMALIZE:
        return "none";
      case PAD_VALUE:
        return 0.0;
      case BUCKET_MB:
        return DEFAULT_BUCKET_BYTES / (double) (1 << 20);
      case PRECISION:
      case GRADIENT_PRECISION:
        return "fp32";
      case KEEP_CHECKPOINTS:
      case CHANNELS:
        return 3;
      case RESCALE:
        return "batch";
      case COLLECTIVE_TIMEOUT:
        return 300L;
      case CPU_DEVICES_PER_WORKER:
        return 1;
      default:
        return null;
    }
  }

  /**
   * Why {@code surface}'s default is not {@link #defaultValue()}: the Builder requires the settings
   * of its {@code setX} methods; a few defaults are the command line's own. Null where the surface
   * starts from the table's default (or lacks the setting: {@link #absentBecause()}).
   */
  public String defaultDiffers(Surface surface) {
    if (surface == Surface.BUILDER && target == Target.TRAINER && builderMethod.startsWith("set")) {
      return "Builder: " + builderMethod + " is required";
    }
    if (surface == Surface.CLI) {
      switch (this) {
        case NUM_CLASSES:
          return "CLI: required unless --loss l2 (0, from the label column, is the Estimator's)";
        case FEATURES:
        case LABEL:
          return "CLI: required (files have no conventional column names)";
        case CALLBACK:
          return "CLI: --progress chooses the view of its own live monitor (auto: a bar on a"
              + " terminal, log lines otherwise)";
        default:
          return null;
      }
    }
    if (surface == Surface.BUILDER && this == MOMENTUM) {
      return "Builder: OptimizerSpec.sgd() is plain SGD (momentum 0) unless optMomentum; the"
          + " command line's and the Estimator's sgd has momentum 0.9";
    }
    return null;
  }

  /**
   * The switch's flag negates the row's setting ({@code --nondeterministic}, {@code --no-overlap}).
   */
  public boolean flagNegates() {
    return this == DETERMINISTIC || this == OVERLAP;
  }

  /**
   * The {@link #defaultValue()} as the command line's flag default ({@code 0.001}, {@code 25},
   * {@code fp32}); null for none, and for a switch (off unless given).
   */
  public String cliDefault() {
    Object v = defaultValue();
    if (v == null || v instanceof Boolean) {
      return null;
    }
    if (v instanceof Double) {
      return new BigDecimal(v.toString()).stripTrailingZeros().toPlainString();
    }
    return v.toString();
  }

  /** The {@link #defaultValue()} of an integer setting. */
  public int intDefault() {
    return typedDefault(Integer.class);
  }

  /** The {@link #defaultValue()} of a long setting (steps, seconds, a seed). */
  public long longDefault() {
    return typedDefault(Long.class);
  }

  /** The {@link #defaultValue()} of a real-valued setting. */
  public double doubleDefault() {
    return typedDefault(Double.class);
  }

  /** The {@link #defaultValue()} of an on/off setting. */
  public boolean booleanDefault() {
    return typedDefault(Boolean.class);
  }

  /** The {@link #defaultValue()} of a text or enumerated setting (null: none). */
  public String stringDefault() {
    Object v = defaultValue();
    return v == null ? null : typedDefault(String.class);
  }

  private <T> T typedDefault(Class<T> type) {
    Object v = defaultValue();
    if (!type.isInstance(v)) {
      throw new IllegalStateException(
          this + "'s default " + v + " is not a " + type.getSimpleName());
    }
    return type.cast(v);
  }

  /** "a, b or c": the choices as messages name them. */
  public String expected() {
    if (choices.size() < 2) {
      return String.join("", choices);
    }
    return String.join(", ", choices.subList(0, choices.size() - 1))
        + " or "
        + choices.get(choices.size() - 1);
  }

  /**
   * {@code value} as one of this setting's choices (matched ignoring case), in its canonical lower
   * case.
   *
   * @param source how the user named the setting, for the message ({@code --ring-transport}, {@code
   *     ringTransport}, {@code ring-transport (from FILE)})
   * @throws IllegalArgumentException "Invalid SOURCE 'value': expected a, b or c"
   */
  public String choice(String source, String value) {
    String v = value == null ? "" : value.trim();
    for (String c : choices) {
      if (c.equalsIgnoreCase(v)) {
        return c;
      }
    }
    throw new IllegalArgumentException(
        "Invalid " + source + " '" + value + "': expected " + expected());
  }

  // ---- Unit conversions and checks, once for every surface ----

  /** The default bucket size in MiB as the CLI prints it ({@code 25}). */
  public static String defaultBucketMb() {
    return BUCKET_MB.cliDefault();
  }

  /**
   * A bucket size given in MiB ({@code --bucket-mb}, {@code bucketMb}, {@code optBucketMb}) as
   * bytes, rounded to a multiple of 8.
   *
   * @throws IllegalArgumentException "Invalid SOURCE 'MIB': expected 0.001 to 1024 (MiB)"
   */
  public static int bucketBytes(String source, double mib) {
    return (int) Math.round(bucketMb(source, mib) * (1 << 20) / 8) * 8;
  }

  /**
   * A bucket size in MiB, checked but not converted: what the command line hands the Builder, whose
   * {@code optBucketMb} converts it to bytes once, for the step.
   *
   * @throws IllegalArgumentException "Invalid SOURCE 'MIB': expected 0.001 to 1024 (MiB)"
   */
  public static double bucketMb(String source, double mib) {
    if (!(mib >= 1.0 / 1024 && mib <= 1024)) {
      throw new IllegalArgumentException(
          "Invalid " + source + " '" + mib + "': expected 0.001 to 1024 (MiB)");
    }
    return mib;
  }

  /**
   * Gradient precision on the wire: {@code fp32} or {@code bf16}; {@code fp16} refused with the
   * reason.
   */
  public static WirePrecision gradientPrecision(String source, String value) {
    if (value != null && value.trim().equalsIgnoreCase("fp16")) {
      throw new IllegalArgumentException(
          "Invalid "
              + source
              + " '"
              + value
              + "': expected fp32 or bf16 (fp16"
              + " has too little range for gradients without loss scaling; bf16 has fp32's range)");
    }
    return WirePrecision.valueOf(GRADIENT_PRECISION.choice(source, value).toUpperCase(Locale.ROOT));
  }

  /**
   * The ring transport: {@code auto} (shared memory between same-host neighbours) or {@code tcp}.
   */
  public static RingTransport ringTransport(String source, String value) {
    return RingTransport.valueOf(RING_TRANSPORT.choice(source, value).toUpperCase(Locale.ROOT));
  }

  /** The slot wait, given in seconds ({@code --slot-wait}, {@code slotWait}): at least 0. */
  public static Duration slotWait(String source, long seconds) {
    if (seconds < 0) {
      throw new IllegalArgumentException("Invalid " + source + " " + seconds + ": expected >= 0");
    }
    return Duration.ofSeconds(seconds);
  }

  /**
   * The deadline of each ring operation, given in seconds ({@code --collective-timeout}, {@code
   * collectiveTimeout}): at least 1.
   */
  public static Duration collectiveTimeout(String source, long seconds) {
    if (seconds < 1) {
      throw new IllegalArgumentException(
          "Invalid " + source + " " + seconds + ": expected at least 1 (seconds)");
    }
    return Duration.ofSeconds(seconds);
  }
}
