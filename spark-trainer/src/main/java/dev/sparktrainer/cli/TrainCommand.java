package dev.sparktrainer.cli;

import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.collective.RingTls;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.ml.SpecStrings;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.monitor.ConsoleProgress;
import dev.sparktrainer.monitor.MetricsReport;
import dev.sparktrainer.monitor.ProgressView;
import dev.sparktrainer.monitor.TrainingMonitor;
import dev.sparktrainer.monitor.TrainingPlot;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.AtomicOutputs;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.EpochMetrics;
import dev.sparktrainer.train.History;
import dev.sparktrainer.train.OptimizerPlacement;
import dev.sparktrainer.train.Precision;
import dev.sparktrainer.train.Rescale;
import dev.sparktrainer.train.Resume;
import dev.sparktrainer.train.TrainedModel;
import java.awt.AWTError;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/** {@code train}: distributed training from TFRecord or Parquet files to an output directory. */
final class TrainCommand extends Command {
  TrainCommand() {
    super(
        "train",
        "--data PATH --features COL --label COL --num-classes K --output DIR [options]",
        "Trains a model with N synchronous data-parallel workers (MultiWorkerMirroredStrategy semantics) and\n"
            + "writes DIR/model/ (the model), DIR/metrics.json (per-epoch history, each epoch's slowest\n"
            + "worker, final figures), DIR/logs/ (TensorBoard event files: tensorboard --logdir DIR/logs) and\n"
            + "DIR/training.png. With N > 1 each epoch's line names its slowest worker (slow: rank R on HOST +P %).");
  }

  @Override
  void define(Flags f) {
    f.required(
        "data",
        Kind.STRING,
        "PATH",
        "training data: files, directories or globs, comma-separated (any Hadoop FS)");
    f.required(
        "features",
        Kind.STRING,
        "COL[:SHAPE]",
        "feature column(s), comma-separated, each optionally with its"
            + " shape (e.g. pixels or pixels:1x28x28; default: the size of the first record)");
    f.required("label", Kind.STRING, "COL", "label column");
    f.add(
        "num-classes",
        Kind.INT,
        "K",
        null,
        "number of classes; labels must be 0..K-1 (required unless --loss l2)");
    f.required(
        "output",
        Kind.STRING,
        "DIR",
        "output directory (model/, metrics.json, logs/, training.png)");
    f.add(
        "validation-data",
        Kind.STRING,
        "PATH",
        null,
        "held-out data evaluated after every epoch (same columns)");
    f.add(
        "format",
        Kind.STRING,
        "FORMAT",
        null,
        "tfrecord or parquet (default: parquet if every file ends in .parquet)");
    f.add("model", Kind.STRING, "SPEC", "mlp:128", "the model: " + SpecStrings.MODEL_FORMS);
    f.add(
        "activation",
        Kind.STRING,
        "NAME",
        "relu",
        "activation of the MLP's hidden layers: relu, tanh, sigmoid, gelu");
    f.add(
        "dropout",
        Kind.DOUBLE,
        "RATE",
        "0",
        "dropout after hidden layers (MLP), before the output layer (CNN)");
    f.add(
        "loss",
        Kind.STRING,
        "NAME",
        null,
        "softmax_cross_entropy (default with --num-classes),"
            + " sigmoid_binary_cross_entropy (labels 0/1) or l2 (regression)");
    f.add(
        "normalize",
        Kind.STRING,
        "MODE",
        "none",
        "feature normalization: standard ((x - mean) / std), minmax"
            + " ((x - min) / (max - min)) or none; statistics from the training data, saved with the model");
    f.add(
        "workers", Kind.INT, "N", "2", "number of workers: barrier tasks, one model replica each");
    f.add(
        "min-workers",
        Kind.INT,
        "M",
        null,
        "elastic training: go on with fewer workers, down to M, when the"
            + " cluster offers fewer than N slots for --slot-wait (default: N, never fewer); resumes from the checkpoint");
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
        "30",
        "how long to wait for the cluster to offer the workers' slots,"
            + " at the start and when executors are lost");
    f.add("epochs", Kind.INT, "E", "10", "number of epochs");
    f.add(
        "batch-size",
        Kind.INT,
        "B",
        "32",
        "examples per batch on one worker (global batch = B x N)");
    f.add(
        "accumulate-steps",
        Kind.INT,
        "K",
        "1",
        "gradient accumulation: K batches per optimizer step, gradients"
            + " summed locally and all-reduced once (global batch = B x K x N)");
    f.add("learning-rate", Kind.DOUBLE, "LR", "0.001", "base learning rate");
    f.add("optimizer", Kind.STRING, "NAME", "adam", "adam, adamw or sgd");
    f.add("momentum", Kind.DOUBLE, "M", "0.9", "SGD momentum");
    f.add(
        "weight-decay",
        Kind.DOUBLE,
        "WD",
        "0",
        "weight decay; AdamW's is decoupled (0: the optimizer's own, none for adam and sgd, 0.01 for adamw)");
    f.add("warmup-steps", Kind.LONG, "STEPS", "0", "linear learning-rate warm-up steps");
    f.add(
        "cosine-decay-steps",
        Kind.LONG,
        "STEPS",
        "0",
        "cosine decay of the learning rate to 0 over these steps" + " after warm-up (0: constant)");
    f.add("seed", Kind.LONG, "SEED", "42", "seed of initialization, shuffling and dropout");
    f.add(
        "shuffle-buffer",
        Kind.INT,
        "RECORDS",
        "10000",
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
        "auto",
        "uint8 or float32: how image features cross to the device (uint8: one byte per pixel,"
            + " scaled, augmented and normalized there; auto: uint8 on GPUs, float32 on CPUs)");
    f.add(
        "sharding",
        Kind.STRING,
        "POLICY",
        "auto",
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
            + " normalize:MEAN,.../STD,... (per channel, also applied to --validation-data, evaluate and predict);"
            + " e.g. flip,crop:4. Needs image-shaped features (CxHxW, e.g. --features pixels:3x32x32)");
    f.add(
        "bucket-mb",
        Kind.DOUBLE,
        "MB",
        new BigDecimal(DistributedTrainer.DEFAULT_BUCKET_BYTES)
            .divide(BigDecimal.valueOf(1 << 20))
            .stripTrailingZeros()
            .toPlainString(),
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
        "auto",
        "where parameters and optimizer state live and are"
            + " updated: device (tensors on the replica's device), host (Java, multi-threaded) or auto (device on"
            + " GPUs, the faster one on CPU)");
    f.add(
        "precision",
        Kind.STRING,
        "P",
        "fp32",
        "arithmetic of forward and backward: fp32, or bf16 (mixed precision:"
            + " a bfloat16 copy of the weights, float32 master weights, optimizer, batch-norm and loss)");
    f.add(
        "gradient-precision",
        Kind.STRING,
        "P",
        "fp32",
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
        "batch",
        "resuming a checkpoint of another worker count: batch keeps the"
            + " global batch (per-worker batch and accumulation chosen to match), lr keeps --batch-size and scales the"
            + " learning rate (linear scaling rule); either way the interrupted epoch goes on with the"
            + " records not yet consumed");
    f.add(
        "checkpoint-every-steps",
        Kind.LONG,
        "STEPS",
        "0",
        "also checkpoint every STEPS steps (0: at epoch ends)");
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
        "auto",
        "auto: ring neighbours on the same host exchange gradients"
            + " through shared memory (/dev/shm), others over TCP; tcp: TCP only. With --ring-keystore every link is TLS");
    f.add(
        "collective-timeout",
        Kind.LONG,
        "SECONDS",
        "300",
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
    f.add(
        "progress",
        Kind.STRING,
        "MODE",
        "auto",
        "auto (a bar on a terminal, log lines otherwise), bar, log or none");
    f.add(
        "skip-label-check", Kind.BOOL, null, null, "do not scan the label column before training");
    f.add("overwrite", Kind.BOOL, null, null, "replace a model already in DIR/model");
  }

  /** Everything parsed and checked before Spark starts. */
  private record Plan(
      List<String> data,
      List<String> validation,
      List<DataChecks.FeatureArg> features,
      String label,
      int numClasses,
      LossSpec loss,
      OptimizerSpec optimizer,
      PipelineOptions options,
      String output,
      ImageAugment augment) {}

  /**
   * Environment variables holding the ring's key and trust store passwords (never on the command
   * line).
   */
  static final String RING_KEYSTORE_PASSWORD_ENV = "SPARK_TRAINER_RING_KEYSTORE_PASSWORD";

  static final String RING_TRUSTSTORE_PASSWORD_ENV = "SPARK_TRAINER_RING_TRUSTSTORE_PASSWORD";

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

  /** --ring-transport: whether same-host neighbours may use shared memory. */
  private static boolean ringSharedMemory(Flags f) {
    String v = f.string("ring-transport");
    if (v.equals("auto")) {
      return true;
    }
    if (v.equals("tcp")) {
      return false;
    }
    throw new CliException(
        "Invalid " + f.source("ring-transport") + " '" + v + "': expected auto or tcp");
  }

  private static Rescale rescale(Flags f) {
    try {
      return Rescale.parse(f.source("rescale"), f.string("rescale"));
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
  }

  private static int bucketBytes(Flags f) {
    try {
      return DistributedTrainer.bucketBytes(f.number("bucket-mb"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          "Invalid "
              + f.source("bucket-mb")
              + " '"
              + f.number("bucket-mb")
              + "': expected 0.001 to 1024 (MiB)");
    }
  }

  private static OptimizerPlacement placement(Flags f) {
    try {
      return OptimizerPlacement.parse(
          f.source("optimizer-placement"), f.string("optimizer-placement"));
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
  }

  private static Normalization.Mode normalize(Flags f) {
    try {
      return Normalization.Mode.parse(f.string("normalize"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          "Invalid "
              + f.source("normalize")
              + " '"
              + f.string("normalize")
              + "': expected standard, minmax or none");
    }
  }

  private static Precision precision(Flags f) {
    try {
      return Precision.parse(f.source("precision"), f.string("precision"));
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
  }

  private static WirePrecision gradientPrecision(Flags f) {
    String v = f.string("gradient-precision");
    if (v.equalsIgnoreCase("fp16")) {
      throw new CliException(
          "Invalid "
              + f.source("gradient-precision")
              + " 'fp16': expected fp32 or bf16 (fp16"
              + " has too little range for gradients without loss scaling; bf16 has fp32's range)");
    }
    for (WirePrecision p : WirePrecision.values()) {
      if (p.name().equalsIgnoreCase(v)) {
        return p;
      }
    }
    throw new CliException(
        "Invalid " + f.source("gradient-precision") + " '" + v + "': expected fp32 or bf16");
  }

  private Plan plan(Flags f) {
    List<DataChecks.FeatureArg> features =
        DataChecks.features(f.string("features"), f.source("features"));
    LossSpec loss;
    try {
      loss = f.given("loss") ? LossSpec.parse(f.string("loss")) : LossSpec.SOFTMAX_CROSS_ENTROPY;
    } catch (IllegalArgumentException e) {
      throw new CliException(
          "Invalid "
              + f.source("loss")
              + " '"
              + f.string("loss")
              + "': expected softmax_cross_entropy, sigmoid_binary_cross_entropy or l2");
    }
    int k = f.given("num-classes") ? f.integer("num-classes") : 0;
    if (loss == LossSpec.SOFTMAX_CROSS_ENTROPY && !f.given("num-classes")) {
      throw new CliException(
          "Missing --num-classes for train: expected the number of classes K (labels 0..K-1),"
              + " or --loss l2 for regression");
    }
    if (loss == LossSpec.SOFTMAX_CROSS_ENTROPY && k < 2) {
      throw new CliException(
          "Invalid " + f.source("num-classes") + " " + k + ": expected at least 2 classes");
    }
    positive(f, "workers");
    positive(f, "epochs");
    positive(f, "batch-size");
    if (f.longValue("collective-timeout") < 1) {
      throw new CliException(
          "Invalid "
              + f.source("collective-timeout")
              + " "
              + f.longValue("collective-timeout")
              + ": expected at least 1 (seconds)");
    }
    if (f.number("learning-rate") <= 0) {
      throw new CliException(
          "Invalid "
              + f.source("learning-rate")
              + " "
              + f.number("learning-rate")
              + ": expected a positive number");
    }
    if (f.number("dropout") < 0 || f.number("dropout") >= 1) {
      throw new CliException(
          "Invalid "
              + f.source("dropout")
              + " "
              + f.number("dropout")
              + ": expected 0 <= rate < 1");
    }
    try {
      Activation.parse(f.string("activation"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          "Invalid "
              + f.source("activation")
              + " '"
              + f.string("activation")
              + "': expected relu, tanh, sigmoid or gelu");
    }
    String progress = f.string("progress");
    if (!List.of("auto", "bar", "log", "none").contains(progress)) {
      throw new CliException(
          "Invalid "
              + f.source("progress")
              + " '"
              + progress
              + "': expected auto, bar, log or none");
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
    if (f.given("min-workers")
        && (f.integer("min-workers") < 1 || f.integer("min-workers") > f.integer("workers"))) {
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
    if (f.longValue("slot-wait") < 0) {
      throw new CliException(
          "Invalid " + f.source("slot-wait") + " " + f.longValue("slot-wait") + ": expected >= 0");
    }
    gradientPrecision(f); // checked before Spark starts
    precision(f);
    bucketBytes(f);
    placement(f);
    ringSharedMemory(f);
    ringTls(f);
    OptimizerSpec optimizer;
    try {
      float wd = (float) f.number("weight-decay");
      optimizer =
          SpecStrings.optimizer(
              f.string("optimizer"),
              (float) f.number("learning-rate"),
              (float) f.number("momentum"),
              wd,
              f.longValue("warmup-steps"),
              f.longValue("cosine-decay-steps"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid optimizer", "Invalid " + f.source("optimizer")));
    }
    PipelineOptions options;
    try {
      PipelineOptions.Builder b =
          PipelineOptions.builder()
              .optBatchSize(f.integer("batch-size"))
              .optShuffleBuffer(f.integer("shuffle-buffer"))
              .optSeed(f.longValue("seed"))
              .optSharding(PipelineOptions.ShardingPolicy.parse(f.string("sharding")))
              .optDeterministic(!f.bool("nondeterministic"));
      try {
        b.optImageTransfer(f.string("image-transfer"));
      } catch (IllegalArgumentException e) {
        throw new CliException(
            "Invalid "
                + f.source("image-transfer")
                + " '"
                + f.string("image-transfer")
                + "': expected uint8, float32 or auto");
      }
      if (f.given("cache-dir")) {
        b.optCacheDir(f.string("cache-dir"));
      }
      options = b.build();
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
    ImageAugment augment = null;
    if (f.given("augment")) {
      try {
        augment = ImageAugment.parse(f.string("augment"), ImageAugment.Layout.CHW);
      } catch (IllegalArgumentException e) {
        throw new CliException(
            e.getMessage().replace("Invalid augmentation", "Invalid " + f.source("augment")));
      }
    }
    // The model's own checks (sizes, CNN shapes) need the feature shapes: with explicit shapes,
    // now.
    if (features.stream().allMatch(a -> a.shape() != null)) {
      if (augment != null) {
        checkAugment(
            f, augment, features.stream().map(DataChecks.FeatureArg::shape).toArray(long[][]::new));
      }
      modelSpec(
          f, features.stream().map(DataChecks.FeatureArg::shape).toArray(long[][]::new), k, loss);
    } else {
      // Check the form now; the sizes once the data tells the shapes (placeholders big enough for a
      // CNN).
      String m = f.string("model").trim().toLowerCase(Locale.ROOT);
      long[][] placeholder =
          m.startsWith("cnn") || m.startsWith("resnet")
              ? new long[][] {{1, 256, 256}}
              : new long[][] {{1}};
      modelSpec(f, placeholder, Math.max(k, 2), loss);
    }
    return new Plan(
        DataChecks.paths(f.string("data")),
        f.given("validation-data") ? DataChecks.paths(f.string("validation-data")) : null,
        features,
        f.string("label"),
        k,
        loss,
        optimizer,
        options,
        f.string("output"),
        augment);
  }

  /**
   * --augment against the feature shapes: an image-shaped (CxHxW) feature, normalize's channel
   * count.
   */
  private static void checkAugment(Flags f, ImageAugment augment, long[][] shapes) {
    try {
      augment.check(shapes, ImageAugment.Layout.CHW);
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid augmentation", "Invalid " + f.source("augment"))
              + " (declare the shape with --features COL:CxHxW)");
    }
  }

  private static void positive(Flags f, String name) {
    long v = f.integer(name);
    if (v < 1) {
      throw new CliException("Invalid " + f.source(name) + " " + v + ": expected at least 1");
    }
  }

  private static ModelSpec modelSpec(Flags f, long[][] shapes, int k, LossSpec loss) {
    int outputs = loss == LossSpec.SOFTMAX_CROSS_ENTROPY ? k : 1;
    try {
      return SpecStrings.model(
          f.string("model"),
          shapes,
          outputs,
          Activation.parse(f.string("activation")),
          (float) f.number("dropout"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid model", "Invalid " + f.source("model")));
    }
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    Plan p = plan(f);
    Configuration conf = ctx.hadoopConf();
    DataChecks.list(
        p.data(), f.source("data"), f.given("format") ? f.string("format") : null, conf);
    if (p.validation() != null) {
      DataChecks.list(
          p.validation(),
          f.source("validation-data"),
          f.given("format") ? f.string("format") : null,
          conf);
    }
    try {
      Path model = new Path(p.output(), "model");
      FileSystem fs = model.getFileSystem(conf);
      // Only a complete model counts: what a run killed while saving left (no marker) is replaced.
      if (TrainedModel.isComplete(model.toString(), conf) && !f.bool("overwrite")) {
        throw new CliException(
            "Output directory "
                + p.output()
                + " already holds a model ("
                + model
                + "): choose another --output, or add --overwrite");
      }
      Path out = new Path(p.output());
      if (fs.exists(out) && fs.getFileStatus(out).isFile()) {
        throw new CliException(
            "Invalid --output " + p.output() + ": it is a file, expected a directory");
      }
    } catch (IOException e) {
      throw new CliException("Cannot use --output " + p.output() + ": " + e.getMessage());
    }
  }

  @Override
  int slots(Flags f) {
    return f.integer("workers");
  }

  @Override
  int run(Flags f, CliContext ctx) throws Exception {
    long start = System.nanoTime();
    Plan p = plan(f);
    SparkSession spark = ctx.spark();
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    String formatFlag = f.given("format") ? f.string("format") : null;
    DataChecks.Files train = DataChecks.list(p.data(), f.source("data"), formatFlag, conf);
    DataChecks.Files validation =
        p.validation() == null
            ? null
            : DataChecks.list(p.validation(), f.source("validation-data"), formatFlag, conf);
    String where = String.join(",", p.data());
    Dataset<Row> trainDf = DataChecks.read(spark, train, f.source("data"));
    long[][] shapes = DataChecks.featureShapes(trainDf, p.features(), where);
    boolean binary = p.loss() == LossSpec.SIGMOID_BINARY_CROSS_ENTROPY;
    int classes = p.loss() == LossSpec.SOFTMAX_CROSS_ENTROPY ? p.numClasses() : 0;
    boolean scan = !f.bool("skip-label-check");
    DataChecks.label(trainDf, p.label(), classes, binary, where, scan, ctx.err);
    if (validation != null) {
      String vwhere = String.join(",", p.validation());
      Dataset<Row> valDf = DataChecks.read(spark, validation, f.source("validation-data"));
      long[][] vshapes = DataChecks.featureShapes(valDf, p.features(), vwhere);
      for (int i = 0; i < shapes.length; i++) {
        if (!Arrays.equals(shapes[i], vshapes[i])) {
          throw new CliException(
              "Feature column '"
                  + p.features().get(i).name()
                  + "' has "
                  + SpecStrings.shapeString(shapes[i])
                  + " values in "
                  + where
                  + " but "
                  + SpecStrings.shapeString(vshapes[i])
                  + " in "
                  + vwhere
                  + ": expected the same shape");
        }
      }
      DataChecks.label(valDf, p.label(), classes, binary, vwhere, scan, ctx.err);
    }
    ModelSpec model = modelSpec(f, shapes, p.numClasses(), p.loss());
    // Augmentation maps the training data only; per-channel normalization maps every input of the
    // model.
    PipelineOptions trainOptions = p.options();
    PipelineOptions validationOptions = p.options();
    if (p.augment() != null) {
      checkAugment(f, p.augment(), shapes);
      trainOptions = trainOptions.toBuilder().optTransform(p.augment().training()).build();
      validationOptions =
          validationOptions.toBuilder().optTransform(p.augment().inference()).build();
    }

    DatasetSpec.Builder spec =
        DatasetSpec.builder()
            .optFormat(train.format())
            .setLabel(
                p.label(),
                p.loss() == LossSpec.SOFTMAX_CROSS_ENTROPY
                    ? DatasetSpec.LabelType.INT
                    : DatasetSpec.LabelType.FLOAT);
    for (int i = 0; i < shapes.length; i++) {
      spec.addFeature(p.features().get(i).name(), shapes[i]);
    }
    DatasetSpec trainSpec = spec.setPaths(p.data()).build();
    String out = p.output();
    String modelDir = new Path(out, "model").toString();
    String logsDir = new Path(out, "logs").toString();
    try {
      CheckpointStore.checkWritable("--output", out, conf);
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
    if (!TrainedModel.isComplete(modelDir, conf)
        && new Path(modelDir).getFileSystem(conf).exists(new Path(modelDir))) {
      ctx.err.println(
          "Replacing the incomplete model in "
              + modelDir
              + " (no "
              + TrainedModel.MARKER
              + ": left by a run that stopped while saving)");
    }
    int workers = f.integer("workers");
    int epochs = f.integer("epochs");
    ctx.err.println(
        "Training "
            + SpecStrings.describe(model)
            + " on "
            + where
            + " ("
            + train.files().size()
            + " "
            + train.format().name().toLowerCase(Locale.ROOT)
            + " files) with "
            + workers
            + " workers x batch "
            + f.integer("batch-size")
            + ", "
            + epochs
            + " epochs, "
            + p.optimizer());
    if (spark.sparkContext().uiWebUrl().isDefined()) {
      ctx.err.println("Spark UI: " + spark.sparkContext().uiWebUrl().get());
    }

    ProgressView view = progressView(f.string("progress"), ctx);
    if (view != null && !f.bool("verbose")) {
      Outputs.quiet(
          "dev.sparktrainer.train"); // the live view shows what the workers would log per epoch
    }
    TrainedModel trained;
    try (TrainingMonitor monitor = TrainingMonitor.start(spark, view, logsDir)) {
      DistributedTrainer.Builder b =
          DistributedTrainer.builder()
              .setModel(model)
              .setLoss(p.loss())
              .setOptimizer(p.optimizer())
              .setTrainingData(trainSpec, trainOptions)
              .setNumWorkers(workers)
              .optEpochs(epochs)
              .optSeed(f.longValue("seed"))
              .optOperationTimeout(Duration.ofSeconds(f.longValue("collective-timeout")))
              .optCallback(monitor.callback())
              .optUseGpus(f.bool("gpus"));
      if (validation != null) {
        b.optValidationData(
            spec.setPaths(p.validation()).optFormat(validation.format()).build(),
            validationOptions);
      }
      b.optAccumulateSteps(f.integer("accumulate-steps")).optRescale(rescale(f));
      b.optMinWorkers(f.given("min-workers") ? f.integer("min-workers") : 0)
          .optGrow(f.bool("grow"))
          .optSlotWait(Duration.ofSeconds(f.longValue("slot-wait")));
      b.optGradientPrecision(gradientPrecision(f)).optNormalize(normalize(f));
      b.optPrecision(precision(f));
      b.optFusionBucketBytes(bucketBytes(f))
          .optOverlap(!f.bool("no-overlap"))
          .optOptimizerPlacement(placement(f));
      b.optRingTls(ringTls(f));
      b.optRingSharedMemory(ringSharedMemory(f));
      if (f.given("checkpoint-dir")) {
        b.optCheckpointDir(f.string("checkpoint-dir"))
            .optCheckpointEverySteps(f.longValue("checkpoint-every-steps"));
      }
      if (spark.sparkContext().isLocal()) {
        b.optRingHost(spark.sparkContext().getConf().get("spark.driver.host", "127.0.0.1"));
      }
      try {
        trained = b.build().fit(spark);
      } catch (IllegalArgumentException e) {
        throw new CliException(DataChecks.firstLine(e)); // the trainer's pre-flight checks
      }
    }
    // The model and the columns it was trained on, saved together: all or nothing.
    ModelInputs inputs =
        new ModelInputs(
            f.string("features").contains(":")
                ? f.string("features")
                : featuresWithShapes(p, shapes),
            p.label(),
            train.format().name().toLowerCase(Locale.ROOT),
            p.numClasses(),
            p.augment() == null ? null : p.augment().inferenceText());
    trained.save(modelDir, conf, Map.of(ModelInputs.FILE, inputs.toBytes()));

    double wall = (System.nanoTime() - start) / 1e9;
    Map<String, Object> info = new LinkedHashMap<>();
    info.put("model", SpecStrings.describe(model));
    info.put("model_dir", modelDir);
    info.put("data", where);
    info.put("validation_data", p.validation() == null ? null : String.join(",", p.validation()));
    info.put("workers", workers);
    info.put("batch_size", f.integer("batch-size"));
    info.put("global_batch_size", f.integer("batch-size") * workers);
    info.put("optimizer", p.optimizer().toString());
    info.put("master", spark.sparkContext().master());
    String metricsPath = new Path(out, "metrics.json").toString();
    write(
        metricsPath,
        MetricsReport.toJson(trained.history(), wall, info).getBytes(StandardCharsets.UTF_8),
        conf);
    String plotPath = new Path(out, "training.png").toString();
    boolean plotted = plot(trained.history(), SpecStrings.describe(model), plotPath, conf, ctx);

    printResumes(trained.history().resumes(), ctx.err);
    EpochMetrics last = trained.history().last();
    if (Double.isFinite(last.validationAccuracy())) {
      ctx.out.printf(
          Locale.ROOT,
          "Held-out accuracy: %.4f (val_loss %.4f) after %d epochs, %s%n",
          last.validationAccuracy(),
          last.validationLoss(),
          trained.history().epochs().size(),
          ConsoleProgressFormat.duration(wall));
    } else if (Double.isFinite(last.accuracy())) {
      ctx.out.printf(
          Locale.ROOT,
          "Training accuracy: %.4f (loss %.4f) after %d epochs, %s%n",
          last.accuracy(),
          last.loss(),
          trained.history().epochs().size(),
          ConsoleProgressFormat.duration(wall));
    } else if (last.regression() != null) {
      boolean held = Double.isFinite(last.validationMse());
      ctx.out.printf(
          Locale.ROOT,
          "%s R²: %.4f (MSE %.6g, MAE %.6g) after %d epochs, %s%n",
          held ? "Held-out" : "Training",
          held ? last.validationR2() : last.r2(),
          held ? last.validationMse() : last.mse(),
          held ? last.validationMae() : last.mae(),
          trained.history().epochs().size(),
          ConsoleProgressFormat.duration(wall));
    } else {
      ctx.out.printf(
          Locale.ROOT,
          "Loss: %.6f%s after %d epochs, %s%n",
          last.loss(),
          Double.isFinite(last.validationLoss())
              ? String.format(Locale.ROOT, " (val_loss %.6f)", last.validationLoss())
              : "",
          trained.history().epochs().size(),
          ConsoleProgressFormat.duration(wall));
    }
    ctx.out.println("Model:       " + modelDir);
    ctx.out.println("Metrics:     " + metricsPath);
    ctx.out.println("TensorBoard: tensorboard --logdir " + logsDir);
    if (plotted) {
      ctx.out.println("Plot:        " + plotPath);
    }
    return 0;
  }

  private static String featuresWithShapes(Plan p, long[][] shapes) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < shapes.length; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append(p.features().get(i).name()).append(':').append(SpecStrings.shapeString(shapes[i]));
    }
    return sb.toString();
  }

  private static ProgressView progressView(String mode, CliContext ctx) {
    switch (mode) {
      case "none":
        return null;
      case "bar":
        return new ConsoleProgress(ctx.err, true, 10);
      case "log":
        return new ConsoleProgress(ctx.err, false, 10);
      default:
        return ConsoleProgress.auto(ctx.err);
    }
  }

  static boolean plot(
      History history, String title, String path, Configuration conf, CliContext ctx) {
    try {
      Path p = new Path(path);
      try (OutputStream os = Outputs.create(p, conf)) {
        TrainingPlot.write(history, title, os, 900, 720);
      }
      return true;
    } catch (IOException | RuntimeException | AWTError | LinkageError e) {
      // The model and metrics are what matter: a missing display (AWTError, HeadlessException),
      // font
      // library (UnsatisfiedLinkError) or store never fails the run.
      ctx.err.println("warning: could not draw " + path + ": " + e);
      return false;
    } catch (Error e) {
      // Out of memory, a stack overflow, ...: not the plot's to hide. Only the font manager's plain
      // Error ("Probable fatal error:No fonts found.") is a missing font.
      if (e.getClass() != Error.class) {
        throw e;
      }
      ctx.err.println("warning: could not draw " + path + ": " + e);
      return false;
    }
  }

  /**
   * Replaces {@code path} with {@code bytes} atomically: a reader finds the previous file or the
   * whole new one.
   */
  static void write(String path, byte[] bytes, Configuration conf) throws IOException {
    Path p = new Path(path);
    AtomicOutputs.writeFile(Outputs.fileSystem(p, conf), p, bytes);
  }

  /** Shared duration format. */
  static final class ConsoleProgressFormat {
    private ConsoleProgressFormat() {}

    static String duration(double seconds) {
      long s = Math.round(seconds);
      return s >= 3600
          ? String.format(Locale.ROOT, "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60)
          : String.format(Locale.ROOT, "%d:%02d", s / 60, s % 60);
    }
  }

  /**
   * One line per start from a checkpoint (or from scratch because every checkpoint was corrupt),
   * followed by the checkpoints it skipped and why.
   */
  static void printResumes(List<Resume> resumes, PrintStream err) {
    for (Resume r : resumes) {
      String when =
          r.stageAttempt() > 0 ? "Spark stage attempt " + r.stageAttempt() : "a new run of the job";
      if (r.fromScratch()) {
        err.println(
            "Started from scratch ("
                + when
                + "): every checkpoint in "
                + r.checkpoint()
                + " was corrupt");
      } else {
        err.println(
            "Resumed from the checkpoint at step "
                + r.step()
                + " (epoch "
                + (r.epoch() + 1)
                + ", "
                + when
                + ")"
                + (r.workers() == null ? "" : ": " + r.workers()));
      }
      for (SkippedCheckpoint k : r.skipped()) {
        err.println("  skipped checkpoint " + k.file() + ": " + k.reason());
      }
    }
  }
}
