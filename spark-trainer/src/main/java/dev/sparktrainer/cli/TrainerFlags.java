package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.collective.RingTls;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.SpecStrings;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.RingTransport;
import dev.sparktrainer.train.TrainerOption;
import dev.sparktrainer.train.elastic.Rescale;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import java.time.Duration;
import java.util.function.Supplier;

/**
 * The {@code train} flags of the trainer's settings, and the one place where the command line maps
 * them onto the builders ({@link DistributedTrainerBuilder}, {@link PipelineOptions}, {@link
 * OptimizerSpec}). Flag names, unit conversions and allowed values are those of the option table,
 * {@link TrainerOption}; every check here runs before Spark starts, each error a {@link
 * CliException} naming the flag (or the config file key), the value and what is expected.
 */
final class TrainerFlags {
  /**
   * Environment variables holding the ring's key and trust store passwords (never on the command
   * line).
   */
  static final String RING_KEYSTORE_PASSWORD_ENV = "SPARK_TRAINER_RING_KEYSTORE_PASSWORD";

  static final String RING_TRUSTSTORE_PASSWORD_ENV = "SPARK_TRAINER_RING_TRUSTSTORE_PASSWORD";

  private TrainerFlags() {}

  /** Defines the trainer's flags, in the order {@code train --help} lists them. */
  static void define(Flags f) {
    f.add(
        "normalize",
        Kind.STRING,
        "MODE",
        TrainerOption.NORMALIZE.cliDefault(),
        "feature normalization: standard ((x - mean) / std), minmax"
            + " ((x - min) / (max - min)) or none; statistics from the training data, saved with the model");
    f.add(
        "workers",
        Kind.INT,
        "N",
        TrainerOption.WORKERS.cliDefault(),
        "number of workers: barrier tasks, one model replica each");
    f.add(
        "min-workers",
        Kind.INT,
        "M",
        TrainerOption.MIN_WORKERS.cliDefault(),
        "elastic training: go on with fewer workers, down to M, when the"
            + " cluster offers fewer than N slots for --slot-wait (0: N, never fewer); resumes from the checkpoint");
    f.add(
        "grow",
        Kind.BOOL,
        null,
        null,
        "with --min-workers: after going on with fewer workers, grow back toward N"
            + " at an epoch end when the cluster offers more slots again");
    f.add(
        "slot-wait",
        Kind.LONG,
        "SECONDS",
        TrainerOption.SLOT_WAIT.cliDefault(),
        "how long to wait for the cluster to offer the workers' slots,"
            + " at the start and when executors are lost");
    f.add("epochs", Kind.INT, "E", TrainerOption.EPOCHS.cliDefault(), "number of epochs");
    f.add(
        "batch-size",
        Kind.INT,
        "B",
        TrainerOption.BATCH_SIZE.cliDefault(),
        "examples per batch on one worker (global batch = B x N)");
    f.add(
        "accumulate-steps",
        Kind.INT,
        "K",
        TrainerOption.ACCUMULATE_STEPS.cliDefault(),
        "gradient accumulation: K batches per optimizer step, gradients"
            + " summed locally and all-reduced once (global batch = B x K x N)");
    f.add(
        "learning-rate",
        Kind.DOUBLE,
        "LR",
        TrainerOption.LEARNING_RATE.cliDefault(),
        "base learning rate");
    f.add(
        "optimizer",
        Kind.STRING,
        "NAME",
        TrainerOption.OPTIMIZER.cliDefault(),
        "adam, adamw or sgd");
    f.add("momentum", Kind.DOUBLE, "M", TrainerOption.MOMENTUM.cliDefault(), "SGD momentum");
    f.add(
        "weight-decay",
        Kind.DOUBLE,
        "WD",
        TrainerOption.WEIGHT_DECAY.cliDefault(),
        "weight decay; AdamW's is decoupled (0: the optimizer's own, none for adam and sgd, 0.01 for adamw)");
    f.add(
        "warmup-steps",
        Kind.LONG,
        "STEPS",
        TrainerOption.WARMUP_STEPS.cliDefault(),
        "linear learning-rate warm-up steps");
    f.add(
        "cosine-decay-steps",
        Kind.LONG,
        "STEPS",
        TrainerOption.COSINE_DECAY_STEPS.cliDefault(),
        "cosine decay of the learning rate to 0 over these steps" + " after warm-up (0: constant)");
    f.add(
        "seed",
        Kind.LONG,
        "SEED",
        TrainerOption.SEED.cliDefault(),
        "seed of initialization, shuffling and dropout");
    f.add(
        "shuffle-buffer",
        Kind.INT,
        "RECORDS",
        TrainerOption.SHUFFLE_BUFFER.cliDefault(),
        "records in each worker's shuffle buffer (0: none)");
    f.add(
        "nondeterministic",
        Kind.BOOL,
        null,
        null,
        "with --shuffle-buffer 0: readers make whole batches and"
            + " hand them on as they are ready (tf.data deterministic=False): faster, order not reproducible");
    f.add(
        "image-transfer",
        Kind.STRING,
        "TYPE",
        TrainerOption.IMAGE_TRANSFER.cliDefault(),
        "uint8 or float32: how image features cross to the device (uint8: one byte per pixel,"
            + " scaled, augmented and normalized there; auto: uint8 on GPUs, float32 on CPUs)");
    f.add(
        "sharding",
        Kind.STRING,
        "POLICY",
        TrainerOption.SHARDING.cliDefault(),
        "auto, file or data: how records are dealt to workers");
    f.add(
        "cache-dir",
        Kind.STRING,
        "DIR",
        null,
        "local directory caching decoded records after the first epoch");
    f.add(
        "augment",
        Kind.STRING,
        "LIST",
        null,
        "image augmentation of the training data, in order: flip (horizontal,"
            + " p=0.5), crop:PADDING (random crop of the image's size from it zero-padded by PADDING pixels),"
            + " random-resized-crop[:SMIN-SMAX[,RMIN-RMAX]] (encoded image features only: torchvision's"
            + " RandomResizedCrop, default 0.08-1,3/4-4/3),"
            + " normalize:MEAN,.../STD,... (per channel, also applied to --validation-data, evaluate and predict);"
            + " e.g. flip,crop:4 or random-resized-crop,flip. Needs image-shaped features (CxHxW, e.g."
            + " --features pixels:3x32x32, or encoded images: COL:image, --format images)");
    f.add(
        "image-size",
        Kind.STRING,
        "HxW",
        null,
        "encoded image features (COL:image, --format images): the size the model sees, e.g."
            + " 224x224 (default: the column's declared COL:HxW:image)");
    f.add(
        "channels",
        Kind.INT,
        "C",
        TrainerOption.CHANNELS.cliDefault(),
        "encoded image features: 3 (RGB) or 1 (grey)");
    f.add(
        "resize",
        Kind.STRING,
        "RULE",
        null,
        "encoded image features: shorter:N resizes a photo's shorter side to N, then the centre"
            + " --image-size is taken (validation, evaluate, predict, and training without"
            + " random-resized-crop); saved with the model (default: shorter:round(max(H,W) / 0.875),"
            + " 256 for 224x224)");
    f.add(
        "bucket-mb",
        Kind.DOUBLE,
        "MB",
        TrainerOption.BUCKET_MB.cliDefault(),
        "gradient bucket size in MiB: one all-reduce each, started while" + " backward goes on");
    f.add(
        "no-overlap",
        Kind.BOOL,
        null,
        null,
        "all-reduce the gradients after the whole backward instead of"
            + " overlapping buckets with it (for comparison)");
    f.add(
        "optimizer-placement",
        Kind.STRING,
        "WHERE",
        TrainerOption.OPTIMIZER_PLACEMENT.cliDefault(),
        "where parameters and optimizer state live and are"
            + " updated: device (tensors on the replica's device), host (Java, multi-threaded) or auto (device on"
            + " GPUs, the faster one on CPU)");
    f.add(
        "precision",
        Kind.STRING,
        "P",
        TrainerOption.PRECISION.cliDefault(),
        "arithmetic of forward and backward: fp32, or bf16 (mixed precision:"
            + " a bfloat16 copy of the weights, float32 master weights, optimizer, batch-norm and loss)");
    f.add(
        "gradient-precision",
        Kind.STRING,
        "P",
        TrainerOption.GRADIENT_PRECISION.cliDefault(),
        "gradients on the wire: fp32, or bf16 (half the bytes)");
    f.add(
        "checkpoint-dir",
        Kind.STRING,
        "DIR",
        null,
        "checkpoints (any Hadoop FS): a rerun or a retried stage resumes");
    f.add(
        "rescale",
        Kind.STRING,
        "WHAT",
        TrainerOption.RESCALE.cliDefault(),
        "resuming a checkpoint of another worker count: batch keeps the"
            + " global batch (per-worker batch and accumulation chosen to match), lr keeps --batch-size and scales the"
            + " learning rate (linear scaling rule); either way the interrupted epoch goes on with the"
            + " records not yet consumed");
    f.add(
        "checkpoint-every-steps",
        Kind.LONG,
        "STEPS",
        TrainerOption.CHECKPOINT_EVERY_STEPS.cliDefault(),
        "also checkpoint every STEPS steps (0: at epoch ends)");
    f.add(
        "keep-checkpoints",
        Kind.INT,
        "N",
        TrainerOption.KEEP_CHECKPOINTS.cliDefault(),
        "how many checkpoints to keep");
    f.add(
        "ring-keystore",
        Kind.STRING,
        "FILE",
        null,
        "TLS for the ring: this key store (PKCS12) on every executor;"
            + " password in $"
            + RING_KEYSTORE_PASSWORD_ENV);
    f.add(
        "ring-truststore",
        Kind.STRING,
        "FILE",
        null,
        "the ring's trust store (default: the key store);"
            + " password in $"
            + RING_TRUSTSTORE_PASSWORD_ENV);
    f.add(
        "ring-transport",
        Kind.STRING,
        "MODE",
        TrainerOption.RING_TRANSPORT.cliDefault(),
        "auto: ring neighbours on the same host exchange gradients"
            + " through shared memory (/dev/shm), others over TCP; tcp: TCP only. With --ring-keystore every link is TLS");
    f.add(
        "collective-timeout",
        Kind.LONG,
        "SECONDS",
        TrainerOption.COLLECTIVE_TIMEOUT.cliDefault(),
        "deadline of each ring operation: a worker that stops"
            + " responding fails the stage after this long, with an error naming its rank and address");
    f.add(
        "gpus",
        Kind.BOOL,
        null,
        null,
        "train on the GPUs Spark assigns each task (BarrierTaskContext.resources());"
            + " needs spark.task.resource.gpu.amount, spark.executor.resource.gpu.amount and a discovery script,"
            + " checked before training (default: CPU)");
  }

  /**
   * Checks every trainer flag (the ones that need the data, such as {@code --augment} against the
   * feature shapes, are the command's).
   */
  static void check(Flags f) {
    positive(f, "workers");
    positive(f, "epochs");
    positive(f, "batch-size");
    collectiveTimeout(f);
    if (f.number("learning-rate") <= 0) {
      throw new CliException(
          "Invalid "
              + f.source("learning-rate")
              + " "
              + f.number("learning-rate")
              + ": expected a positive number");
    }
    normalize(f);
    if (f.integer("accumulate-steps") < 1) {
      throw new CliException(
          "Invalid "
              + f.source("accumulate-steps")
              + " "
              + f.integer("accumulate-steps")
              + ": expected >= 1");
    }
    rescale(f);
    if (f.integer("min-workers") < 0 || f.integer("min-workers") > f.integer("workers")) {
      throw new CliException(
          "Invalid "
              + f.source("min-workers")
              + " "
              + f.integer("min-workers")
              + ": expected 1 to"
              + " --workers ("
              + f.integer("workers")
              + ")");
    }
    slotWait(f);
    if (f.longValue("checkpoint-every-steps") < 0) {
      throw new CliException(
          "Invalid "
              + f.source("checkpoint-every-steps")
              + " "
              + f.longValue("checkpoint-every-steps")
              + ": expected >= 0");
    }
    positive(f, "keep-checkpoints");
    gradientPrecision(f);
    precision(f);
    bucketMb(f);
    placement(f);
    ringTransport(f);
    ringTls(f);
  }

  /** The optimizer of {@code --optimizer}, {@code --learning-rate} and its schedule. */
  static OptimizerSpec optimizer(Flags f) {
    try {
      return SpecStrings.optimizer(
          f.string("optimizer"),
          (float) f.number("learning-rate"),
          (float) f.number("momentum"),
          (float) f.number("weight-decay"),
          f.longValue("warmup-steps"),
          f.longValue("cosine-decay-steps"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid optimizer", "Invalid " + f.source("optimizer")));
    }
  }

  /** The input pipeline's options (batch, shuffling, sharding, cache, image transfer). */
  static PipelineOptions pipeline(Flags f) {
    try {
      PipelineOptions.Builder b =
          PipelineOptions.builder()
              .optBatchSize(f.integer("batch-size"))
              .optShuffleBuffer(f.integer("shuffle-buffer"))
              .optSeed(f.longValue("seed"))
              .optSharding(
                  PipelineOptions.ShardingPolicy.parse(
                      table(
                          () ->
                              TrainerOption.SHARDING.choice(
                                  f.source("sharding"), f.string("sharding")))))
              .optDeterministic(!f.bool("nondeterministic"))
              .optImageTransfer(
                  table(
                      () ->
                          TrainerOption.IMAGE_TRANSFER.choice(
                              f.source("image-transfer"), f.string("image-transfer"))));
      if (f.given("cache-dir")) {
        b.optCacheDir(f.string("cache-dir"));
      }
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
  }

  /**
   * Sets the trainer's settings from the flags: workers, epochs, elasticity, communication,
   * precision, checkpoints (the model, loss, optimizer, data and callback are the command's).
   */
  static DistributedTrainerBuilder apply(Flags f, DistributedTrainerBuilder b) {
    b.setNumWorkers(f.integer("workers"))
        .optEpochs(f.integer("epochs"))
        .optSeed(f.longValue("seed"))
        .optCollectiveTimeout(collectiveTimeout(f))
        .optGpus(f.bool("gpus"))
        .optAccumulateSteps(f.integer("accumulate-steps"))
        .optRescale(rescale(f))
        .optMinWorkers(f.integer("min-workers"))
        .optGrow(f.bool("grow"))
        .optSlotWait(slotWait(f))
        .optGradientPrecision(gradientPrecision(f))
        .optNormalize(normalize(f))
        .optPrecision(precision(f))
        .optBucketMb(bucketMb(f))
        .optOverlap(!f.bool("no-overlap"))
        .optOptimizerPlacement(placement(f))
        .optRingTls(ringTls(f))
        .optRingTransport(ringTransport(f))
        .optKeepCheckpoints(f.integer("keep-checkpoints"));
    if (f.given("checkpoint-dir")) {
      b.optCheckpointDir(f.string("checkpoint-dir"))
          .optCheckpointEverySteps(f.longValue("checkpoint-every-steps"));
    }
    return b;
  }

  /** A conversion or check of the option table, its error as a usage error. */
  private static <T> T table(Supplier<T> conversion) {
    try {
      return conversion.get();
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
  }

  private static void positive(Flags f, String name) {
    long v = f.integer(name);
    if (v < 1) {
      throw new CliException("Invalid " + f.source(name) + " " + v + ": expected at least 1");
    }
  }

  private static Duration collectiveTimeout(Flags f) {
    return table(
        () ->
            TrainerOption.collectiveTimeout(
                f.source("collective-timeout"), f.longValue("collective-timeout")));
  }

  private static Duration slotWait(Flags f) {
    return table(() -> TrainerOption.slotWait(f.source("slot-wait"), f.longValue("slot-wait")));
  }

  /** Checked here (before Spark starts), converted to bytes once, by the Builder. */
  private static double bucketMb(Flags f) {
    return table(() -> TrainerOption.bucketMb(f.source("bucket-mb"), f.number("bucket-mb")));
  }

  private static Normalization.Mode normalize(Flags f) {
    return Normalization.Mode.parse(
        table(() -> TrainerOption.NORMALIZE.choice(f.source("normalize"), f.string("normalize"))));
  }

  private static Rescale rescale(Flags f) {
    return table(() -> Rescale.parse(f.source("rescale"), f.string("rescale")));
  }

  private static OptimizerPlacement placement(Flags f) {
    return table(
        () ->
            OptimizerPlacement.parse(
                f.source("optimizer-placement"), f.string("optimizer-placement")));
  }

  private static Precision precision(Flags f) {
    return table(() -> Precision.parse(f.source("precision"), f.string("precision")));
  }

  private static WirePrecision gradientPrecision(Flags f) {
    return table(
        () ->
            TrainerOption.gradientPrecision(
                f.source("gradient-precision"), f.string("gradient-precision")));
  }

  private static RingTransport ringTransport(Flags f) {
    return table(
        () -> TrainerOption.ringTransport(f.source("ring-transport"), f.string("ring-transport")));
  }

  private static RingTls ringTls(Flags f) {
    if (!f.given("ring-keystore")) {
      if (f.given("ring-truststore")) {
        throw new CliException(f.source("ring-truststore") + " needs --ring-keystore too");
      }
      return null;
    }
    String password = System.getenv(RING_KEYSTORE_PASSWORD_ENV);
    if (password == null) {
      throw new CliException(
          f.source("ring-keystore")
              + " needs the key store's password in the environment"
              + " variable "
              + RING_KEYSTORE_PASSWORD_ENV);
    }
    RingTls.Builder b = RingTls.builder().setKeyStore(f.string("ring-keystore"), password);
    if (f.given("ring-truststore")) {
      String tp = System.getenv(RING_TRUSTSTORE_PASSWORD_ENV);
      b.optTrustStore(f.string("ring-truststore"), tp != null ? tp : password);
    }
    return b.build();
  }
}
