package dev.sparktrainer.cli;

import static org.apache.spark.sql.functions.col;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.ml.BatchInference;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.functions;

/** {@code predict}: distributed batch inference, written as Parquet next to the input's columns. */
final class PredictCommand extends ModelCommand {
  PredictCommand() {
    super(
        "predict",
        "--model DIR/model --data PATH --output DIR2 [options]",
        "Runs a trained model over data with distributed batch inference (each executor loads the model once\n"
            + "and runs batches of rows) and writes Parquet to DIR2: the input's columns, then 'prediction'\n"
            + "(the class index, or the value for l2) and 'probability' (class probabilities). A model trained on\n"
            + "a folder of images (--format images) also writes 'class' (the class folder's name); encoded-image\n"
            + "columns are decoded as validation saw them (the recorded resize, then the centre crop) and left\n"
            + "out of the output (a folder's rows keep 'path' and 'label'; a folder without class folders is\n"
            + "read as unlabelled photos, every image file under it, with a null 'label').");
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
    f.add(
        "class-col",
        Kind.STRING,
        "NAME",
        "class",
        "name of the class-name column (models that keep their class names: --format images)");
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
    if (!in.imageColumns().isEmpty()) {
      // The decoded pixels are the model's input, not an output worth writing.
      predicted = predicted.drop(in.imageColumns().toArray(new String[0]));
    }
    if (in.classes() != null && !in.classes().isEmpty()) {
      predicted = withClassNames(predicted, f, in.classes());
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

  /** The predicted class's name, right after the prediction column. */
  private static Dataset<Row> withClassNames(Dataset<Row> df, Flags f, List<String> classes) {
    String prediction = f.string("prediction-col");
    String name = f.string("class-col");
    if (Arrays.asList(df.columns()).contains(name)) {
      throw new CliException(
          "Invalid "
              + f.source("class-col")
              + " '"
              + name
              + "': the data already has a column of that name; choose another");
    }
    Column[] names = classes.stream().map(functions::lit).toArray(Column[]::new);
    Column cls =
        functions.element_at(functions.array(names), col(prediction).cast("int").plus(1)).as(name);
    List<Column> out = new ArrayList<>();
    for (String c : df.columns()) {
      out.add(col(c));
      if (c.equals(prediction)) {
        out.add(cls);
      }
    }
    return df.select(out.toArray(new Column[0]));
  }
}
