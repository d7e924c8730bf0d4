package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.ml.BatchInference;
import java.io.IOException;
import java.util.Locale;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;

/** {@code predict}: distributed batch inference, written as Parquet next to the input's columns. */
final class PredictCommand extends ModelCommand {
  PredictCommand() {
    super(
        "predict",
        "--model DIR/model --data PATH --output DIR2 [options]",
        "Runs a trained model over data with distributed batch inference (each executor loads the model once\n"
            + "and runs batches of rows) and writes Parquet to DIR2: the input's columns, then 'prediction'\n"
            + "(the class index, or the value for l2) and 'probability' (class probabilities).");
  }

  @Override
  void define(Flags f) {
    defineCommon(f);
    f.required("output", Kind.STRING, "DIR2", "output directory (Parquet)");
    f.add("prediction-col", Kind.STRING, "NAME", "prediction", "name of the prediction column");
    f.add("probability-col", Kind.STRING, "NAME", "probability", "name of the probability column");
    f.add(
        "raw-prediction-col",
        Kind.STRING,
        "NAME",
        null,
        "also write the raw outputs (logits) under this name");
    f.add("overwrite", Kind.BOOL, null, null, "replace DIR2 if it exists");
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    super.validate(f, ctx);
    try {
      Path out = new Path(f.string("output"));
      FileSystem fs = out.getFileSystem(ctx.hadoopConf());
      if (fs.exists(out) && !f.bool("overwrite")) {
        throw new CliException(
            "Output "
                + f.string("output")
                + " already exists: choose another --output, or add"
                + " --overwrite");
      }
    } catch (IOException e) {
      throw new CliException("Cannot use --output " + f.string("output") + ": " + e.getMessage());
    }
  }

  @Override
  int run(Flags f, CliContext ctx) throws Exception {
    Input in = load(f, ctx);
    Dataset<Row> predicted;
    try {
      predicted =
          BatchInference.transform(
              in.data(),
              in.model(),
              in.features(),
              f.integer("batch-size"),
              f.string("prediction-col"),
              f.string("probability-col"),
              f.given("raw-prediction-col") ? f.string("raw-prediction-col") : null,
              in.inputMap(),
              in.inputs() == null ? null : in.inputs().shapes());
    } catch (IllegalArgumentException e) {
      throw new CliException(e.getMessage());
    }
    ctx.spark().sparkContext().setJobDescription("spark-trainer: predict " + f.string("model"));
    predicted
        .write()
        .mode(f.bool("overwrite") ? SaveMode.Overwrite : SaveMode.ErrorIfExists)
        .parquet(f.string("output"));
    long n = ctx.spark().read().parquet(f.string("output")).count();
    ctx.out.printf(
        Locale.ROOT,
        "Wrote %d predictions to %s (Parquet; columns %s)%n",
        n,
        f.string("output"),
        String.join(", ", predicted.columns()));
    return 0;
  }
}
