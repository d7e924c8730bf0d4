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
            + " vocabulary");
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
      String where) {
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
}
