package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.text.TextEncoding;
import dev.sparktrainer.train.TrainedModel;
import java.io.IOException;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/** What {@code evaluate} and {@code predict} share: a saved model, data, the feature columns. */
abstract class ModelCommand extends Command {
  ModelCommand(String name, String usage, String description) {
    super(name, usage, description);
  }

  void defineCommon(Flags f) {
    f.required(
        "model",
        Kind.STRING,
        "DIR",
        "a model directory written by train (DIR/model) or TrainedModel.save");
    f.required(
        "data",
        Kind.STRING,
        "PATH",
        "data: files, directories or globs, comma-separated (any Hadoop FS)");
    f.add(
        "features",
        Kind.STRING,
        "COL[,COL...]",
        null,
        "feature column(s) (default: those the model was trained on)");
    f.add(
        "format",
        Kind.STRING,
        "FORMAT",
        null,
        "tfrecord or parquet (default: parquet if every file ends in .parquet); csv (with a header"
            + " row) for a text column a model of token sequences cuts into ids with its"
            + " vocabulary; images: --data is a folder of image files, one subfolder per class (columns"
            + " image, label, path), for a model trained on encoded images");
    f.add("batch-size", Kind.INT, "ROWS", "256", "rows per inference batch");
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    if (f.integer("batch-size") < 1) {
      throw new CliException(
          "Invalid "
              + f.source("batch-size")
              + " "
              + f.integer("batch-size")
              + ": expected at least 1");
    }
    checkModelDir(f.string("model"), ctx.hadoopConf());
    if (DataChecks.imageFolder(f)) {
      DataChecks.folderExists(
          DataChecks.paths(f.string("data")), f.source("data"), ctx.hadoopConf());
      return;
    }
    DataChecks.list(
        DataChecks.paths(f.string("data")),
        f.source("data"),
        csv(f) ? "tfrecord" : f.given("format") ? f.string("format") : null,
        ctx.hadoopConf());
  }

  /** Whether --format says csv (a text column for a sequence model). */
  static boolean csv(Flags f) {
    return f.given("format") && f.string("format").trim().equalsIgnoreCase("csv");
  }

  /** Text to token ids, as the model's vocabulary and tokenizer cut them. */
  private static org.apache.spark.sql.expressions.UserDefinedFunction tokenize(
      CliContext ctx, TextEncoding text) {
    org.apache.spark.broadcast.Broadcast<TextEncoding> shared =
        org.apache.spark.api.java.JavaSparkContext.fromSparkContext(ctx.spark().sparkContext())
            .broadcast(text);
    return org.apache.spark.sql.functions.udf(
        (org.apache.spark.sql.api.java.UDF1<String, long[]>) s -> shared.value().ids(s),
        org.apache.spark.sql.types.DataTypes.createArrayType(
            org.apache.spark.sql.types.DataTypes.LongType, false));
  }

  static void checkModelDir(String dir, Configuration conf) {
    try {
      Path d = new Path(dir);
      FileSystem fs = d.getFileSystem(conf);
      if (!fs.exists(d)) {
        throw new CliException("No model at " + dir + " (--model): the directory does not exist");
      }
      if (!fs.exists(new Path(d, "model.properties")) || !fs.exists(new Path(d, "model.params"))) {
        if (fs.exists(new Path(d, "model/model.params"))) {
          throw new CliException(
              "No model at "
                  + dir
                  + " (--model): it is a training output directory; use "
                  + new Path(d, "model"));
        }
        throw new CliException(
            "No model at "
                + dir
                + " (--model): expected model.properties and model.params"
                + " (the model/ directory written by train)");
      }
      if (!fs.exists(new Path(d, TrainedModel.MARKER))) {
        throw new CliException(
            "No complete model at "
                + dir
                + " (--model): "
                + TrainedModel.MARKER
                + " is missing"
                + " (a save that did not finish, or a model saved by a spark-trainer version before completion markers)");
      }
    } catch (IOException e) {
      throw new CliException("Cannot read --model " + dir + ": " + e.getMessage());
    }
  }

  /** The loaded model, the data and the feature columns to use, all checked. */
  record Input(
      TrainedModel model,
      ModelInputs inputs,
      Dataset<Row> data,
      List<String> features,
      String where,
      List<String> classes,
      List<String> imageColumns) {
    Input(
        TrainedModel model,
        ModelInputs inputs,
        Dataset<Row> data,
        List<String> features,
        String where) {
      this(model, inputs, data, features, where, null, List.of());
    }

    /**
     * The per-channel normalization the model was trained with (train --augment normalize:...), or
     * null.
     */
    ImageAugment inputMap() {
      return inputs == null ? null : inputs.inputMap(features);
    }
  }

  Input load(Flags f, CliContext ctx) throws IOException {
    Configuration conf = ctx.spark().sparkContext().hadoopConfiguration();
    String dir = f.string("model");
    TrainedModel model = TrainedModel.load(dir, conf);
    ModelInputs inputs = ModelInputs.load(dir, conf);
    List<String> features;
    if (f.given("features")) {
      features =
          DataChecks.features(f.string("features"), f.source("features")).stream()
              .map(DataChecks.FeatureArg::name)
              .toList();
    } else if (inputs != null) {
      features = inputs.featureNames();
    } else {
      throw new CliException(
          "Missing --features for "
              + name
              + ": the model at "
              + dir
              + " does not record its feature columns (it was not written by train)");
    }
    List<String> classes = ModelInputs.classes(dir, conf);
    java.util.Map<String, long[]> images =
        inputs == null ? java.util.Map.of() : inputs.imageColumns();
    if (DataChecks.imageFolder(f)) {
      return imageFolder(f, ctx, model, inputs, features, classes, images);
    }
    boolean csv = csv(f);
    DataChecks.Files files =
        DataChecks.list(
            DataChecks.paths(f.string("data")),
            f.source("data"),
            // csv: listed only (an explicit format skips the guess that refuses .csv names)
            csv ? "tfrecord" : f.given("format") ? f.string("format") : null,
            conf);
    Dataset<Row> df =
        csv
            ? ctx.spark()
                .read()
                .option("header", "true")
                .option("inferSchema", "true")
                .csv(files.paths().toArray(new String[0]))
            : DataChecks.read(ctx.spark(), files, f.source("data"));
    String where = f.string("data");
    if (!images.isEmpty()) {
      if (files.format() == dev.sparktrainer.data.DatasetSpec.Format.TFRECORD) {
        // image bytes as binary, not text
        df =
            ctx.spark()
                .read()
                .format("tfrecord")
                .option("bytesAsBinary", "true")
                .load(files.paths().toArray(new String[0]));
      }
      return decoded(
          new Input(model, inputs, df, features, where, classes, List.copyOf(images.keySet())));
    }
    if (inputs != null && !inputs.sequenceColumns().isEmpty()) {
      // Token ids of any length: the model pads each batch itself (BatchInference); the columns'
      // types are checked there. A text column is cut into ids as the training data was.
      TextEncoding text = Vocabularies.ofModel(dir, conf);
      for (String c : features) {
        if (!inputs.sequenceColumns().containsKey(c)
            || !java.util.Arrays.asList(df.columns()).contains(c)
            || !(df.schema().apply(c).dataType()
                instanceof org.apache.spark.sql.types.StringType)) {
          continue;
        }
        if (text == null) {
          throw new CliException(
              "Feature column '"
                  + c
                  + "' in "
                  + where
                  + " is text, and the model at "
                  + dir
                  + " keeps no vocabulary (it was trained on ids without convert --tokenize's"
                  + " vocab.txt beside them): give token ids");
        }
        df = df.withColumn(c, tokenize(ctx, text).apply(org.apache.spark.sql.functions.col(c)));
      }
      return new Input(model, inputs, df, features, where);
    }
    if (csv) {
      throw new CliException(
          "Invalid "
              + f.source("format")
              + " csv: a CSV is read for a model of token sequences (a text column); convert other"
              + " CSV data to TFRecord or Parquet first");
    }
    long[][] shapes =
        DataChecks.featureShapes(
            df, features.stream().map(n -> new DataChecks.FeatureArg(n, null)).toList(), where);
    var expected = model.spec().inputShapes();
    long total = 0;
    for (long[] s : shapes) {
      long n = 1;
      for (long d : s) {
        n *= d;
      }
      total += n;
    }
    long want = 0;
    for (var s : expected) {
      want += s.size();
    }
    if (total != want) {
      throw new CliException(
          "The feature columns "
              + features
              + " of "
              + where
              + " hold "
              + total
              + " values per record: the model at "
              + dir
              + " expects "
              + want);
    }
    return new Input(model, inputs, df, features, where);
  }

  /** {@code --format images}: the folder's files as {@code image}, {@code label}, {@code path}. */
  private Input imageFolder(
      Flags f,
      CliContext ctx,
      TrainedModel model,
      ModelInputs inputs,
      List<String> features,
      List<String> classes,
      java.util.Map<String, long[]> images) {
    String dir = f.string("model");
    String where = f.string("data");
    if (images.isEmpty()) {
      throw new CliException(
          "Invalid "
              + f.source("format")
              + " images: the model at "
              + dir
              + " was not trained on encoded images (its features: "
              + (inputs == null ? "not recorded" : inputs.features())
              + ")");
    }
    if (features.size() != 1 || !images.containsKey(features.get(0))) {
      throw new CliException(
          "Invalid --features "
              + features
              + " with --format images: an image folder has one feature column, the image (the"
              + " model's image column: "
              + String.join(", ", images.keySet())
              + ")");
    }
    dev.sparktrainer.data.ImageFolder folder =
        DataChecks.images(ctx.spark(), where, f.source("data"), name.equals("evaluate"));
    if (name.equals("evaluate") && classes != null && !folder.classes().equals(classes)) {
      throw new CliException(
          "The class folders of "
              + where
              + " ("
              + f.source("data")
              + ") are "
              + folder.classes()
              + " but the model at "
              + dir
              + " was trained on "
              + classes
              + ": expected the same classes (a label is the index of its folder's name)");
    }
    // No pass over the files first: the decoder names a file that is no image (its path).
    // The files' bytes under the name of the model's image column (image, unless trained on
    // another column's).
    Dataset<Row> frame = folder.frame().withColumnRenamed("image", features.get(0));
    return decoded(new Input(model, inputs, frame, features, where, classes, features));
  }

  /**
   * The input with each encoded-image column decoded, on the executors, to the {@code [H, W, C]}
   * floats the model was trained on: the recorded resize ({@code shorter:N}) then the centre crop,
   * as validation saw them.
   */
  private static Input decoded(Input in) {
    Dataset<Row> df = in.data();
    boolean paths = java.util.Arrays.asList(df.columns()).contains("path");
    dev.sparktrainer.data.ImageResize resize =
        in.inputs().resize() == null
            ? null
            : dev.sparktrainer.data.ImageResize.parse(in.inputs().resize());
    for (String c : in.imageColumns()) {
      DataChecks.column(df.schema(), c, "feature", in.where());
      String type = df.schema().apply(c).dataType().typeName();
      if (!type.equals("binary")) {
        throw new CliException(
            "Feature column '"
                + c
                + "' in "
                + in.where()
                + " has type "
                + df.schema().apply(c).dataType().simpleString()
                + ": the model reads encoded images there (a bytes feature in TFRecord, binary in"
                + " Parquet)");
      }
      long[] s = in.inputs().imageColumns().get(c);
      int h = (int) s[0];
      int w = (int) s[1];
      int ch = (int) s[2];
      org.apache.spark.sql.expressions.UserDefinedFunction decode =
          org.apache.spark.sql.functions.udf(
              (org.apache.spark.sql.api.java.UDF2<byte[], String, float[]>)
                  (bytes, path) -> {
                    if (bytes == null) {
                      return null;
                    }
                    try {
                      return dev.sparktrainer.data.ImageDecoder.decode(bytes, h, w, ch, resize);
                    } catch (IOException e) {
                      throw new IllegalArgumentException(
                          "Cannot decode the image "
                              + (path == null ? "in column '" + c + "'" : path)
                              + ": "
                              + e.getMessage(),
                          e);
                    }
                  },
              org.apache.spark.sql.types.DataTypes.createArrayType(
                  org.apache.spark.sql.types.DataTypes.FloatType, false));
      df =
          df.withColumn(
              c,
              decode.apply(
                  org.apache.spark.sql.functions.col(c),
                  paths
                      ? org.apache.spark.sql.functions.col("path")
                      : org.apache.spark.sql.functions.lit(null).cast("string")));
    }
    return new Input(
        in.model(), in.inputs(), df, in.features(), in.where(), in.classes(), in.imageColumns());
  }
}
