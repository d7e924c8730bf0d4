package dev.sparktrainer.cli;

import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.ImageFolder;
import dev.sparktrainer.data.ImageResize;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.SequenceStatistics;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.ResNetSpec;
import dev.sparktrainer.model.SpecStrings;
import dev.sparktrainer.model.sequence.SequenceInput;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.monitor.ConsoleProgress;
import dev.sparktrainer.monitor.MetricsReport;
import dev.sparktrainer.monitor.ProgressView;
import dev.sparktrainer.monitor.TrainingMonitor;
import dev.sparktrainer.monitor.TrainingPlot;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.AtomicOutputs;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.TrainerOption;
import dev.sparktrainer.train.loop.TrainingLoop;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.History;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.step.OptimizerPlacement;
import java.awt.AWTError;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
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

/**
 * {@code train}: distributed training from TFRecord or Parquet files, or a folder of image files
 * ({@code --format images}), to an output directory.
 *
 * <p>Why this file is long: it is the command a user runs most, in the order they meet it — the
 * flags it adds to the shared option table's ({@link TrainerFlags}), the plan from flags to data,
 * model and image specs, the checks made before Spark starts, and the run with its outputs (model,
 * history, metrics, plots, the resumes on stderr). Each part reads the previous one's values; the
 * trainer's own options are already mapped in {@link TrainerFlags}.
 */
final class TrainCommand extends Command {
  TrainCommand() {
    super(
        "train",
        "--data PATH --features COL --label COL --num-classes K --output DIR [options]",
        "Trains a model with N synchronous data-parallel workers (MultiWorkerMirroredStrategy semantics) and\n"
            + "writes DIR/model/ (the model), DIR/metrics.json (per-epoch history, each epoch's slowest\n"
            + "worker, final figures), DIR/logs/ (TensorBoard event files: tensorboard --logdir DIR/logs) and\n"
            + "DIR/training.png. With N > 1 an epoch's line names a straggler (slow: rank R on HOST +P %, then a warning) only when one rank was at least 20 % slower in most steps and held the others up; every epoch's per-rank times are in metrics.json.");
  }

  @Override
  void define(Flags f) {
    f.required(
        "data",
        Kind.STRING,
        "PATH",
        "training data: files, directories or globs, comma-separated (any Hadoop FS)");
    f.add(
        "features",
        Kind.STRING,
        "COL[:SHAPE]",
        null,
        "feature column(s), comma-separated, each optionally with its"
            + " shape (e.g. pixels or pixels:1x28x28; default: the size of the first record), or a kind:"
            + " COL:int64, COL:ids, COL:seq, COL:image (encoded images, decoded to --image-size);"
            + " required unless --format images (then image:image)");
    f.add(
        "label",
        Kind.STRING,
        "COL",
        null,
        "label column (required unless --format images: then label, the class folder's index)");
    f.add(
        "num-classes",
        Kind.INT,
        "K",
        null,
        "number of classes; labels must be 0..K-1 (required unless --loss l2; with --format images"
            + " the number of class folders)");
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
        "tfrecord, parquet (default: parquet if every file ends in .parquet) or images (--data is a"
            + " folder of image files, one subfolder per class, read with Spark's binaryFile source)");
    f.add(
        "model",
        Kind.STRING,
        "SPEC",
        TrainerOption.MODEL.cliDefault(),
        "the model: " + SpecStrings.MODEL_FORMS);
    f.add(
        "activation",
        Kind.STRING,
        "NAME",
        TrainerOption.ACTIVATION.cliDefault(),
        "activation of the MLP's hidden layers: relu, tanh, sigmoid, gelu");
    f.add(
        "dropout",
        Kind.DOUBLE,
        "RATE",
        TrainerOption.DROPOUT.cliDefault(),
        "dropout after hidden layers (MLP), before the output layer (CNN)");
    f.add(
        "loss",
        Kind.STRING,
        "NAME",
        TrainerOption.LOSS.cliDefault(),
        "softmax_cross_entropy (with --num-classes),"
            + " sigmoid_binary_cross_entropy (labels 0/1) or l2 (regression)");
    TrainerFlags.define(f);
    f.add(
        "progress",
        Kind.STRING,
        "MODE",
        "auto",
        "auto (a bar on a terminal, log lines otherwise), bar, log or none");
    f.add(
        "max-length",
        Kind.INT,
        "N",
        null,
        "sequence columns (COL:ids, COL:seq): the longest sequence fed to the model; longer ones are"
            + " truncated and counted (default: the longest in the training data)");
    f.add(
        "vocab-size",
        Kind.LONG,
        "V",
        null,
        "ids columns: ids must be 0..V-1 (default: the lines of vocab.txt beside the data, written"
            + " by convert --tokenize, else the largest id in the training data + 1)");
    f.add(
        "pad-value",
        Kind.DOUBLE,
        "X",
        TrainerOption.PAD_VALUE.cliDefault(),
        "sequence columns: what pads a sequence to its batch's longest (a mask beside it says"
            + " which positions are real)");
    f.add(
        "bucket-boundaries",
        Kind.STRING,
        "L1,L2,...",
        null,
        "sequence columns: batch sequences of similar length together (tf.data's"
            + " bucket_by_sequence_length): lengths below L1, L1..L2-1, ..., and the rest; e.g."
            + " 16,32,64,128");
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
      ImageAugment augment,
      ImageInput image) {}

  /**
   * Encoded image features: the size the model sees, the channels, the resize of validation,
   * evaluation and prediction (and of training without random-resized-crop); {@code folder}: the
   * data is a folder of image files ({@code --format images}).
   */
  record ImageInput(int height, int width, int channels, ImageResize resize, boolean folder) {
    long[] shape() {
      return new long[] {height, width, channels};
    }
  }

  /** The feature and label columns: as given, or an image folder's image and label. */
  private static List<DataChecks.FeatureArg> featureArgs(Flags f, boolean folder) {
    if (folder) {
      if (f.given("label") && !f.string("label").equals("label")) {
        throw new CliException(
            "Invalid "
                + f.source("label")
                + " '"
                + f.string("label")
                + "' with --format images: the label is the column label (the index of the"
                + " file's class folder): leave --label out");
      }
      if (f.given("features")) {
        List<DataChecks.FeatureArg> given =
            DataChecks.features(f.string("features"), f.source("features"));
        if (given.size() != 1 || !given.get(0).name().equals("image") || !given.get(0).image()) {
          throw new CliException(
              "Invalid "
                  + f.source("features")
                  + " '"
                  + f.string("features")
                  + "' with --format images: an image folder has one feature column, image (the"
                  + " files' bytes): leave --features out, or give image:image or image:HxW:image");
        }
        return given;
      }
      return List.of(new DataChecks.FeatureArg("image", null, DataChecks.FeatureArg.IMAGE));
    }
    if (!f.given("features")) {
      throw new CliException(
          "Missing --features for train: expected the feature column(s), COL[:SHAPE][,...] (or"
              + " --format images for a folder of image files)");
    }
    if (!f.given("label")) {
      throw new CliException(
          "Missing --label for train: expected the label column (or --format images for a folder"
              + " of image files)");
    }
    return DataChecks.features(f.string("features"), f.source("features"));
  }

  /** The encoded image features' size, channels and resize, checked; null without any. */
  private static ImageInput imageInput(
      Flags f, List<DataChecks.FeatureArg> features, boolean folder) {
    boolean any = features.stream().anyMatch(DataChecks.FeatureArg::image);
    if (!any) {
      for (String flag : List.of("image-size", "channels", "resize")) {
        if (f.given(flag)) {
          throw new CliException(
              "Invalid "
                  + f.source(flag)
                  + ": it applies to encoded image features, and --features names none"
                  + " (COL:image, or --format images)");
        }
      }
      return null;
    }
    int c = f.integer("channels");
    if (c != 1 && c != 3) {
      throw new CliException(
          "Invalid " + f.source("channels") + " " + c + ": expected 3 (RGB) or 1 (grey)");
    }
    long[] size = null;
    if (f.given("image-size")) {
      String t = f.string("image-size").trim().toLowerCase(Locale.ROOT);
      String[] hw = t.split("x", -1);
      try {
        if (hw.length == 2 && Integer.parseInt(hw[0]) > 0 && Integer.parseInt(hw[1]) > 0) {
          size = new long[] {Integer.parseInt(hw[0]), Integer.parseInt(hw[1])};
        }
      } catch (NumberFormatException e) {
        // below
      }
      if (size == null) {
        throw new CliException(
            "Invalid "
                + f.source("image-size")
                + " '"
                + f.string("image-size")
                + "': expected HxW in pixels, e.g. 224x224");
      }
    }
    for (DataChecks.FeatureArg a : features) {
      if (!a.image() || a.shape() == null) {
        continue;
      }
      if (size == null) {
        size = a.shape();
      } else if (!Arrays.equals(size, a.shape())) {
        throw new CliException(
            "Image column '"
                + a.name()
                + "' is declared "
                + SpecStrings.shapeString(a.shape())
                + " but the image size is "
                + SpecStrings.shapeString(size)
                + ": give one size (--image-size HxW)");
      }
    }
    if (size == null) {
      throw new CliException(
          "Missing --image-size for the encoded image column '"
              + features.stream().filter(DataChecks.FeatureArg::image).findFirst().get().name()
              + "': expected HxW, the size the model sees, e.g. 224x224");
    }
    int h = (int) size[0];
    int w = (int) size[1];
    int longer = Math.max(h, w);
    ImageResize resize;
    if (f.given("resize")) {
      try {
        resize = ImageResize.parse(f.string("resize"));
      } catch (IllegalArgumentException e) {
        throw new CliException(
            e.getMessage().replace("Invalid resize", "Invalid " + f.source("resize")));
      }
      if (resize.shorterSide() < longer) {
        throw new CliException(
            "Invalid "
                + f.source("resize")
                + " '"
                + f.string("resize")
                + "': the shorter side must be at least "
                + longer
                + ", the larger side of the image size "
                + h
                + "x"
                + w
                + ", for the centre crop to fit");
      }
    } else {
      resize = ImageResize.shorter(defaultShorterSide(h, w));
    }
    return new ImageInput(h, w, c, resize, folder);
  }

  /**
   * The default resize before the centre crop: the shorter side to {@code round(max(H, W) /
   * 0.875)}, the classic ImageNet evaluation (256 then 224; timm's {@code crop_pct} 0.875).
   */
  static int defaultShorterSide(int h, int w) {
    return (int) Math.round(Math.max(h, w) / 0.875);
  }

  private Plan plan(Flags f) {
    boolean folder = DataChecks.imageFolder(f);
    List<DataChecks.FeatureArg> features = featureArgs(f, folder);
    ImageInput image = imageInput(f, features, folder);
    if (image != null) {
      // An image column's shape is settled: what the model sees, [H, W, C].
      features =
          features.stream()
              .map(
                  a -> a.image() ? new DataChecks.FeatureArg(a.name(), image.shape(), a.kind()) : a)
              .toList();
    }
    LossSpec loss;
    try {
      loss = LossSpec.parse(f.string("loss"));
    } catch (IllegalArgumentException e) {
      throw new CliException(
          "Invalid "
              + f.source("loss")
              + " '"
              + f.string("loss")
              + "': expected softmax_cross_entropy, sigmoid_binary_cross_entropy or l2");
    }
    int k = f.given("num-classes") ? f.integer("num-classes") : 0;
    if (loss == LossSpec.SOFTMAX_CROSS_ENTROPY && !f.given("num-classes") && !folder) {
      throw new CliException(
          "Missing --num-classes for train: expected the number of classes K (labels 0..K-1),"
              + " or --loss l2 for regression");
    }
    if (loss == LossSpec.SOFTMAX_CROSS_ENTROPY && k < 2 && (f.given("num-classes") || !folder)) {
      throw new CliException(
          "Invalid " + f.source("num-classes") + " " + k + ": expected at least 2 classes");
    }
    TrainerFlags.check(f);
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
    OptimizerSpec optimizer = TrainerFlags.optimizer(f);
    PipelineOptions options = sequenceOptions(f, features, TrainerFlags.pipeline(f));
    ImageAugment augment = null;
    if (f.given("augment")) {
      try {
        // Decoded photos are [H, W, C]; the command line's numeric image columns are CxHxW.
        augment =
            ImageAugment.parse(
                f.string("augment"),
                image != null ? ImageAugment.Layout.HWC : ImageAugment.Layout.CHW);
      } catch (IllegalArgumentException e) {
        throw new CliException(
            e.getMessage().replace("Invalid augmentation", "Invalid " + f.source("augment")));
      }
      if (ImageAugment.resizeOf(augment.training()) != null && image == null) {
        // It works while encoded images are decoded: numbers have no photo to take a box of.
        throw new CliException(
            "Invalid "
                + f.source("augment")
                + " '"
                + f.string("augment")
                + "': random-resized-crop needs encoded image features (--features COL:image with"
                + " --image-size HxW, or --format images), and --features names none");
      }
      for (DataChecks.FeatureArg a : features) {
        if (image != null && !a.image() && a.shape() != null && a.shape().length == 3) {
          // Augmentation maps every 3-D column as [H, W, C] once photos are among them.
          throw new CliException(
              "Invalid "
                  + f.source("augment")
                  + " with encoded image features: numeric column '"
                  + a.name()
                  + "' is image-shaped too ("
                  + SpecStrings.shapeString(a.shape())
                  + ") and would be augmented as [H, W, C]: leave it out of --features");
        }
      }
    }
    // The model's own checks (sizes, CNN shapes) need the feature shapes: with explicit shapes,
    // now.
    boolean torchScript =
        f.string("model").trim().toLowerCase(Locale.ROOT).startsWith("torchscript:");
    if (torchScript && features.stream().anyMatch(a -> a.kind() != null)) {
      // int64 or sequence columns: checked against the module once the data tells their lengths
      // and vocabularies (run); the form now
      try {
        SpecStrings.torchScriptPath(f.string("model"));
      } catch (IllegalArgumentException e) {
        throw new CliException(
            e.getMessage().replace("Invalid model", "Invalid " + f.source("model")));
      }
      if (augment != null) {
        throw new CliException(
            "Invalid "
                + f.source("augment")
                + ": it maps float32 image columns, and --features names int64 or sequence ones");
      }
    } else if (features.stream().allMatch(a -> a.shape() != null)) {
      if (augment != null) {
        checkAugment(
            f,
            augment,
            features.stream().map(DataChecks.FeatureArg::shape).toArray(long[][]::new),
            image != null);
      }
      featureModel(
          f,
          features,
          features.stream().map(DataChecks.FeatureArg::shape).toArray(long[][]::new),
          folder ? Math.max(k, 2) : k,
          loss,
          null);
    } else if (features.stream().anyMatch(DataChecks.FeatureArg::sequence)) {
      // The form now; the vocabulary and maximum length once the data's statistics are known.
      modelSpec(f, null, new long[][] {{1}}, Math.max(k, 2), loss, new SequenceInput(2, 1));
    } else if (!f.string("model").trim().toLowerCase(Locale.ROOT).startsWith("torchscript:")) {
      // Check the form now; the sizes once the data tells the shapes (placeholders big enough for a
      // CNN).
      String m = f.string("model").trim().toLowerCase(Locale.ROOT);
      long[][] placeholder =
          m.startsWith("cnn") || m.startsWith("resnet")
              ? new long[][] {{1, 256, 256}}
              : new long[][] {{1}};
      modelSpec(f, null, placeholder, Math.max(k, 2), loss);
    }
    return new Plan(
        DataChecks.paths(f.string("data")),
        f.given("validation-data") ? DataChecks.paths(f.string("validation-data")) : null,
        features,
        folder ? "label" : f.string("label"),
        k,
        loss,
        optimizer,
        options,
        f.string("output"),
        augment,
        image);
  }

  /**
   * What a sequence model needs of its input: the one ids column's vocabulary size and maximum
   * length; null without an ids column.
   */
  private static SequenceInput sequenceInput(Plan p, Map<String, long[]> sequences) {
    List<DataChecks.FeatureArg> ids =
        p.features().stream().filter(a -> DataChecks.FeatureArg.IDS.equals(a.kind())).toList();
    if (ids.isEmpty()) {
      return null;
    }
    long[] s = sequences.get(ids.get(0).name());
    return new SequenceInput(s[1], (int) s[0]);
  }

  /** The pipeline's options with the sequence flags (pad value, buckets), checked. */
  private static PipelineOptions sequenceOptions(
      Flags f, List<DataChecks.FeatureArg> features, PipelineOptions options) {
    boolean sequences = features.stream().anyMatch(DataChecks.FeatureArg::sequence);
    for (String flag : List.of("max-length", "bucket-boundaries")) {
      if (f.given(flag) && !sequences) {
        throw new CliException(
            "Invalid "
                + f.source(flag)
                + ": it applies to sequence columns, and --features names none (COL:ids or"
                + " COL:seq)");
      }
    }
    if (f.given("max-length") && f.integer("max-length") < 1) {
      throw new CliException(
          "Invalid "
              + f.source("max-length")
              + " "
              + f.integer("max-length")
              + ": expected at least 1");
    }
    if (f.given("vocab-size") && f.longValue("vocab-size") < 2) {
      throw new CliException(
          "Invalid "
              + f.source("vocab-size")
              + " "
              + f.longValue("vocab-size")
              + ": expected at least 2");
    }
    PipelineOptions.Builder b = options.toBuilder().optPadValue(f.number("pad-value"));
    if (f.given("bucket-boundaries")) {
      String text = f.string("bucket-boundaries");
      int[] bounds;
      try {
        bounds =
            java.util.Arrays.stream(text.split(","))
                .map(String::trim)
                .mapToInt(Integer::parseInt)
                .toArray();
        b.optBucketBoundaries(bounds);
      } catch (IllegalArgumentException e) {
        throw new CliException(
            "Invalid "
                + f.source("bucket-boundaries")
                + " '"
                + text
                + "': expected strictly increasing positive lengths, e.g. 16,32,64,128");
      }
    }
    return b.build();
  }

  /**
   * The sequence columns' maximum lengths and ids columns' vocabulary sizes, from the flags and the
   * training data's statistics (printed); the shapes of sequence columns set to their maximum.
   */
  private static Map<String, long[]> sequenceShapes(
      Flags f,
      Plan p,
      Map<String, SequenceStatistics.Stats> stats,
      long[][] shapes,
      String where,
      Configuration conf,
      CliContext ctx) {
    Map<String, long[]> out = new LinkedHashMap<>(); // column -> {maxLength, vocabSize}
    for (int i = 0; i < p.features().size(); i++) {
      DataChecks.FeatureArg a = p.features().get(i);
      SequenceStatistics.Stats st = stats.get(a.name());
      if (st == null) {
        continue;
      }
      long vocab = 0;
      if (!a.kind().equals(DataChecks.FeatureArg.SEQ)) {
        String source;
        if (f.given("vocab-size")) {
          vocab = f.longValue("vocab-size");
          source = f.source("vocab-size");
        } else {
          long lines = Vocabularies.sizeBeside(p.data(), conf);
          vocab = lines > 0 ? lines : st.defaultVocabSize();
          source = lines > 0 ? "vocab.txt beside the data" : "the largest id + 1";
        }
        try {
          st.checkVocabulary(where, vocab, source);
        } catch (IllegalArgumentException e) {
          throw new CliException(e.getMessage());
        }
        ctx.err.printf(
            Locale.ROOT,
            "Column '%s': ids %d..%d, vocabulary size %d (%s)%n",
            a.name(),
            st.minId(),
            st.maxId(),
            vocab,
            source);
      }
      if (!a.sequence()) {
        out.put(a.name(), new long[] {0, vocab});
        continue;
      }
      int max = f.given("max-length") ? f.integer("max-length") : st.defaultMaxLength();
      shapes[i] = new long[] {max};
      ctx.err.printf(
          Locale.ROOT,
          "Column '%s': %d sequences, lengths median %d, 95th percentile %d, longest %d;"
              + " max length %d%s%n",
          a.name(),
          st.records(),
          st.median(),
          st.p95(),
          st.longest(),
          max,
          st.longer() > 0
              ? String.format(
                  Locale.ROOT,
                  " (%d sequences longer, %.2f %%, are truncated to it)",
                  st.longer(),
                  100.0 * st.longer() / Math.max(1, st.records()))
              : "");
      out.put(a.name(), new long[] {max, vocab});
    }
    return out;
  }

  /**
   * --augment against the feature shapes: an image-shaped (CxHxW) feature, normalize's channel
   * count.
   */
  private static void checkAugment(Flags f, ImageAugment augment, long[][] shapes, boolean images) {
    try {
      augment.check(shapes, images ? ImageAugment.Layout.HWC : ImageAugment.Layout.CHW);
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid augmentation", "Invalid " + f.source("augment"))
              + (images ? "" : " (declare the shape with --features COL:CxHxW)"));
    }
  }

  /**
   * The model for the feature columns, as {@code modelSpec}; a CNN or ResNet over an encoded image
   * column takes its decoded {@code [H, W, C]} tensor and transposes it to channels first itself.
   */
  private static ModelSpec featureModel(
      Flags f,
      List<DataChecks.FeatureArg> features,
      long[][] shapes,
      int k,
      LossSpec loss,
      SequenceInput sequence) {
    String m = f.string("model").trim().toLowerCase(Locale.ROOT);
    boolean conv = m.startsWith("cnn") || m.startsWith("resnet");
    boolean images = features.stream().anyMatch(DataChecks.FeatureArg::image);
    long[][] s = shapes.clone();
    if (conv && images) {
      for (int i = 0; i < s.length; i++) {
        if (features.get(i).image()) {
          s[i] = new long[] {shapes[i][2], shapes[i][0], shapes[i][1]};
        }
      }
    }
    ModelSpec spec =
        modelSpec(
            f, features.stream().map(DataChecks.FeatureArg::name).toList(), s, k, loss, sequence);
    if (conv && images) {
      if (spec instanceof CnnSpec c) {
        return c.withChannelsLast();
      }
      if (spec instanceof ResNetSpec r) {
        return r.withChannelsLast();
      }
    }
    return spec;
  }

  /**
   * A TorchScript model fed from int64 and sequence columns as well as float32 ones (a sequence
   * column: two forward arguments, its values then its mask), checked against them.
   */
  private static ModelSpec torchScriptModel(
      Flags f, Plan p, long[][] shapes, Map<String, long[]> sequences, int numClasses) {
    List<TorchScriptSpec.Column> columns = new ArrayList<>();
    for (int i = 0; i < shapes.length; i++) {
      DataChecks.FeatureArg a = p.features().get(i);
      long[] s = sequences.get(a.name());
      long vocab = s == null ? 0 : s[1];
      if (a.kind() == null || a.image()) { // an image: its decoded [H, W, C] floats
        columns.add(TorchScriptSpec.Column.floats(a.name(), shapes[i]));
      } else if (a.kind().equals(DataChecks.FeatureArg.INT64)) {
        columns.add(
            new TorchScriptSpec.Column(
                a.name(), TorchScriptSpec.Column.Kind.INT64, shapes[i], vocab));
      } else if (a.kind().equals(DataChecks.FeatureArg.IDS)) {
        columns.add(TorchScriptSpec.Column.ids(a.name(), (int) s[0], vocab));
      } else {
        columns.add(TorchScriptSpec.Column.sequence(a.name(), (int) s[0]));
      }
    }
    int outputs = p.loss() == LossSpec.SOFTMAX_CROSS_ENTROPY ? numClasses : 1;
    try {
      return SpecStrings.torchScript(f.string("model"), columns, outputs);
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid model", "Invalid " + f.source("model")));
    }
  }

  private static ModelSpec modelSpec(
      Flags f, List<String> columns, long[][] shapes, int k, LossSpec loss) {
    return modelSpec(f, columns, shapes, k, loss, null);
  }

  /**
   * The model for the feature columns; {@code sequence}: the vocabulary size and maximum length of
   * the ids column a sequence model reads (null: none, or not known yet).
   */
  private static ModelSpec modelSpec(
      Flags f,
      List<String> columns,
      long[][] shapes,
      int k,
      LossSpec loss,
      SequenceInput sequence) {
    int outputs = loss == LossSpec.SOFTMAX_CROSS_ENTROPY ? k : 1;
    try {
      return SpecStrings.model(
          f.string("model"),
          columns,
          shapes,
          outputs,
          Activation.parse(f.string("activation")),
          (float) f.number("dropout"),
          sequence);
    } catch (IllegalArgumentException e) {
      throw new CliException(
          e.getMessage().replace("Invalid model", "Invalid " + f.source("model")));
    }
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    Plan p = plan(f);
    Configuration conf = ctx.hadoopConf();
    if (p.image() != null && p.image().folder()) {
      DataChecks.folderExists(p.data(), f.source("data"), conf);
      if (p.validation() != null) {
        DataChecks.folderExists(p.validation(), f.source("validation-data"), conf);
      }
    } else {
      DataChecks.list(
          p.data(), f.source("data"), f.given("format") ? f.string("format") : null, conf);
    }
    if (p.validation() != null && (p.image() == null || !p.image().folder())) {
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

  /**
   * The banner's settings a run's speed and numbers depend on, resolved as the workers will resolve
   * them ({@code auto} on a GPU with {@code --gpus}, else on a CPU): {@code precision fp32,
   * gradients fp32, optimizer on the host (auto on a CPU), image transfer float32 (no encoded-image
   * feature)}.
   */
  static String settings(Flags f) {
    boolean gpu = f.bool("gpus");
    String where = gpu ? "a GPU" : "a CPU";
    String precision = TrainerOption.PRECISION.choice(f.source("precision"), f.string("precision"));
    String gradients =
        TrainerOption.GRADIENT_PRECISION.choice(
            f.source("gradient-precision"), f.string("gradient-precision"));
    OptimizerPlacement asked =
        OptimizerPlacement.parse(f.source("optimizer-placement"), f.string("optimizer-placement"));
    OptimizerPlacement placement = TrainingLoop.resolvePlacement(asked, gpu);
    // Numeric feature columns cross as float32 whatever --image-transfer says (DeviceImages' plan
    // falls back the same way); encoded image columns as --image-transfer resolves.
    boolean images =
        (f.given("format") && f.string("format").trim().equalsIgnoreCase(DataChecks.IMAGES))
            || (f.given("features")
                && DataChecks.features(f.string("features"), f.source("features")).stream()
                    .anyMatch(DataChecks.FeatureArg::image));
    String transfer;
    if (images) {
      PipelineOptions.ImageTransfer t =
          PipelineOptions.ImageTransfer.parse(
              TrainerOption.IMAGE_TRANSFER.choice(
                  f.source("image-transfer"), f.string("image-transfer")));
      transfer =
          t.resolve(gpu).name().toLowerCase(Locale.ROOT)
              + (t == PipelineOptions.ImageTransfer.AUTO ? " (auto on " + where + ")" : "");
    } else {
      transfer = "float32 (no encoded-image feature)";
    }
    return "precision "
        + precision
        + ", gradients "
        + gradients
        + ", optimizer on the "
        + placement.name().toLowerCase(Locale.ROOT)
        + (asked == OptimizerPlacement.AUTO ? " (auto on " + where + ")" : "")
        + ", image transfer "
        + transfer;
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
    boolean folder = p.image() != null && p.image().folder();
    String where = String.join(",", p.data());
    int numClasses = p.numClasses();
    boolean binary = p.loss() == LossSpec.SIGMOID_BINARY_CROSS_ENTROPY;
    boolean scan = !f.bool("skip-label-check");
    DataChecks.Files train = null;
    ImageFolder trainImages = null;
    ImageFolder validationImages = null;
    long[][] shapes;
    Map<String, SequenceStatistics.Stats> sequenceStats = new LinkedHashMap<>();
    if (folder) {
      trainImages = DataChecks.images(spark, where, f.source("data"));
      List<String> names = trainImages.classes();
      if (p.validation() != null) {
        String vwhere = String.join(",", p.validation());
        validationImages = DataChecks.images(spark, vwhere, f.source("validation-data"));
        if (!validationImages.classes().equals(names)) {
          throw new CliException(
              "The class folders of "
                  + vwhere
                  + " ("
                  + f.source("validation-data")
                  + ") are "
                  + validationImages.classes()
                  + " but those of "
                  + where
                  + " ("
                  + f.source("data")
                  + ") are "
                  + names
                  + ": expected the same classes");
        }
      }
      if (p.loss() == LossSpec.SOFTMAX_CROSS_ENTROPY) {
        if (f.given("num-classes") && numClasses != names.size()) {
          throw new CliException(
              "--num-classes "
                  + numClasses
                  + " does not match the "
                  + names.size()
                  + " class folders of "
                  + where
                  + " ("
                  + String.join(", ", names)
                  + "): leave --num-classes out");
        }
        if (names.size() < 2) {
          throw new CliException(
              "Image folder "
                  + where
                  + " has "
                  + names.size()
                  + " class folder ("
                  + String.join(", ", names)
                  + "): expected at least 2, one subfolder per class");
        }
        numClasses = names.size();
      }
      ctx.err.println(
          "Image folder "
              + where
              + ": "
              + names.size()
              + " classes ("
              + String.join(", ", names.subList(0, Math.min(10, names.size())))
              + (names.size() > 10 ? ", ..." : "")
              + "), images resized to "
              + p.image().height()
              + "x"
              + p.image().width());
      shapes = new long[][] {p.image().shape()};
    } else {
      train = DataChecks.list(p.data(), f.source("data"), formatFlag, conf);
      DataChecks.Files validation =
          p.validation() == null
              ? null
              : DataChecks.list(p.validation(), f.source("validation-data"), formatFlag, conf);
      Dataset<Row> trainDf = DataChecks.read(spark, train, f.source("data"));
      shapes = DataChecks.featureShapes(trainDf, p.features(), where);
      sequenceStats =
          DataChecks.sequences(
              spark,
              train,
              trainDf,
              p.features(),
              f.given("max-length") ? f.integer("max-length") : 0);
      int classes = p.loss() == LossSpec.SOFTMAX_CROSS_ENTROPY ? p.numClasses() : 0;
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
    }
    Map<String, long[]> sequences = sequenceShapes(f, p, sequenceStats, shapes, where, conf, ctx);
    ModelSpec model =
        p.features().stream().anyMatch(a -> a.kind() != null && !a.image())
                && SpecStrings.torchScriptPath(f.string("model")) != null
            ? torchScriptModel(f, p, shapes, sequences, numClasses)
            : featureModel(
                f, p.features(), shapes, numClasses, p.loss(), sequenceInput(p, sequences));
    // Augmentation maps the training data only; per-channel normalization maps every input of the
    // model.
    PipelineOptions trainOptions = p.options();
    PipelineOptions validationOptions = p.options();
    if (p.image() != null) {
      // Photos of any size: shorter side to N, then the centre (training too, unless
      // random-resized-crop draws its own box).
      trainOptions = trainOptions.toBuilder().optImageResize(p.image().resize()).build();
      validationOptions = validationOptions.toBuilder().optImageResize(p.image().resize()).build();
    }
    if (p.augment() != null) {
      checkAugment(f, p.augment(), shapes, p.image() != null);
      trainOptions = trainOptions.toBuilder().optTransform(p.augment().training()).build();
      validationOptions =
          validationOptions.toBuilder().optTransform(p.augment().inference()).build();
    }

    DatasetSpec.Builder spec =
        DatasetSpec.builder()
            .optFormat(folder ? DatasetSpec.Format.PARQUET : train.format())
            .setLabel(
                p.label(),
                p.loss() == LossSpec.SOFTMAX_CROSS_ENTROPY
                    ? DatasetSpec.LabelType.INT
                    : DatasetSpec.LabelType.FLOAT);
    for (int i = 0; i < shapes.length; i++) {
      DataChecks.FeatureArg a = p.features().get(i);
      if (a.kind() == null) {
        spec.addFeature(a.name(), shapes[i]);
      } else if (a.image()) {
        spec.addImageFeature(a.name(), p.image().height(), p.image().width(), p.image().channels());
      } else if (a.kind().equals(DataChecks.FeatureArg.INT64)) {
        spec.addIntFeature(a.name(), shapes[i]);
      } else {
        long[] s = sequences.get(a.name());
        spec.addSequenceFeature(
            a.name(),
            a.kind().equals(DataChecks.FeatureArg.IDS)
                ? DatasetSpec.ValueType.INT64
                : DatasetSpec.ValueType.FLOAT32,
            (int) s[0],
            s[1]);
      }
    }
    DatasetSpec trainSpec = spec.setPaths(p.data()).build();
    if (p.image() != null && !f.given("shuffle-buffer")) {
      // Decoded photos are large (224x224x3: 602 KB a record): by default the shuffle buffer takes
      // at most half of each worker's input memory budget instead of failing for want of it.
      long recordBytes = 4L * trainSpec.featureSize() + 64;
      long fits = Math.max(1, trainOptions.memoryBudgetBytes() / 2 / recordBytes);
      if (fits < trainOptions.shuffleBuffer()) {
        trainOptions = trainOptions.toBuilder().optShuffleBuffer((int) fits).build();
        ctx.err.printf(
            Locale.ROOT,
            "Shuffle buffer: %d decoded photos a worker (half of its %d MiB input memory budget;"
                + " --shuffle-buffer sets it)%n",
            fits,
            trainOptions.memoryBudgetBytes() >> 20);
      }
    }
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
            + (folder
                ? "image files"
                : train.files().size()
                    + " "
                    + train.format().name().toLowerCase(Locale.ROOT)
                    + " files")
            + ") with "
            + workers
            + " workers x batch "
            + f.integer("batch-size")
            + ", "
            + epochs
            + " epochs, "
            + p.optimizer()
            + ", "
            + settings(f));
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
      DistributedTrainerBuilder b =
          TrainerFlags.apply(
              f,
              DistributedTrainer.builder()
                  .setModel(model)
                  .setLoss(p.loss())
                  .setOptimizer(p.optimizer())
                  .optCallback(monitor.callback()));
      if (folder) {
        // Staged once to Parquet (the builder's staging directory), then streamed.
        // Each file's header is checked as it is staged (no extra pass over the files).
        b.setTrainingData(
            DataChecks.checkedImages(trainImages.frame(), f.source("data")),
            trainSpec,
            trainOptions);
        if (validationImages != null) {
          b.optValidationData(
              DataChecks.checkedImages(validationImages.frame(), f.source("validation-data")),
              trainSpec,
              validationOptions);
        }
      } else {
        b.setTrainingData(trainSpec, trainOptions);
        if (p.validation() != null) {
          b.optValidationData(
              spec.setPaths(p.validation())
                  .optFormat(
                      DataChecks.list(p.validation(), f.source("validation-data"), formatFlag, conf)
                          .format())
                  .build(),
              validationOptions);
        }
      }
      if (spark.sparkContext().isLocal()) {
        b.optRingHost(spark.sparkContext().getConf().get("spark.driver.host", "127.0.0.1"));
      }
      try {
        trained = b.build().fit(spark);
      } catch (IllegalArgumentException e) {
        throw new CliException(DataChecks.firstLine(e)); // the trainer's pre-flight checks
      } catch (Exception e) { // a Spark job's failure may be a (checked) SparkException
        DataChecks.BadImageFile bad = DataChecks.badImage(e); // found while staging the folder
        if (bad != null) {
          throw new CliException(bad.getMessage());
        }
        throw e;
      }
    }
    // The model and the columns it was trained on, saved together: all or nothing.
    ModelInputs inputs =
        new ModelInputs(
            f.given("features")
                    && f.string("features").contains(":")
                    && sequences.isEmpty()
                    && p.image() == null
                ? f.string("features")
                : featuresWithShapes(p, shapes),
            p.label(),
            folder ? DataChecks.IMAGES : train.format().name().toLowerCase(Locale.ROOT),
            numClasses,
            p.augment() == null ? null : p.augment().inferenceText(),
            sequences.isEmpty()
                ? null
                : String.join(
                    ",",
                    sequences.entrySet().stream()
                        .map(e -> e.getKey() + ":" + e.getValue()[0] + ":" + e.getValue()[1])
                        .toList()),
            f.number("pad-value"),
            p.image() == null ? null : p.image().resize().toString());
    Map<String, byte[]> files = new LinkedHashMap<>();
    files.put(ModelInputs.FILE, inputs.toBytes());
    if (trainImages != null) {
      files.put(ModelInputs.CLASSES, ModelInputs.classesFile(trainImages.classes()));
    }
    files.putAll(Vocabularies.modelFiles(p.data(), p.features(), conf, ctx));
    trained.save(modelDir, conf, files);

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
    if (!sequenceStats.isEmpty()) {
      Map<String, Object> columns = new LinkedHashMap<>();
      for (SequenceStatistics.Stats st : sequenceStats.values()) {
        Map<String, Object> c = new LinkedHashMap<>();
        long[] s = sequences.get(st.column());
        if (s[0] == 0) {
          continue; // a fixed int64 column
        }
        c.put("records", st.records());
        c.put("length_median", st.median());
        c.put("length_p95", st.p95());
        c.put("length_max", st.longest());
        c.put("max_length", s[0]);
        c.put("truncated_sequences", st.longer());
        c.put("vocab_size", s[1]);
        columns.put(st.column(), c);
      }
      info.put("sequence_columns", columns);
    }
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
      DataChecks.FeatureArg a = p.features().get(i);
      sb.append(a.name());
      if (!a.sequence()) {
        sb.append(':').append(SpecStrings.shapeString(shapes[i]));
      }
      if (a.kind() != null) {
        sb.append(':').append(a.kind());
      }
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
