package dev.sparktrainer.cli;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;

import dev.sparktrainer.cli.Flags.Kind;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StructType;

/**
 * {@code convert}: CSV or Parquet to sharded TFRecord files, optionally split into train/ and
 * test/.
 */
final class ConvertCommand extends Command {
  ConvertCommand() {
    super(
        "convert",
        "--input PATH --output DIR [options]",
        "Converts CSV or Parquet data to sharded TFRecord files of tf.train.Example records: the feature columns\n"
            + "become one float list (--feature-column), the label an int64 (or float) feature (--label-column).\n"
            + "With --test-fraction, writes DIR/train and DIR/test (a seeded random split).");
  }

  @Override
  void define(Flags f) {
    f.required(
        "input",
        Kind.STRING,
        "PATH",
        "CSV or Parquet files, directories or globs, comma-separated (.csv.gz too)");
    f.required("output", Kind.STRING, "DIR", "output directory");
    f.add(
        "input-format",
        Kind.STRING,
        "FORMAT",
        null,
        "csv or parquet (default: from the file names)");
    f.add(
        "header",
        Kind.BOOL,
        null,
        null,
        "CSV: the first line names the columns (otherwise _c0, _c1, ...)");
    f.add("delimiter", Kind.STRING, "CHAR", ",", "CSV: the field separator");
    f.add(
        "label",
        Kind.STRING,
        "COL",
        null,
        "the label column (name, or _cN for CSV without header; default: none)");
    f.add(
        "features",
        Kind.STRING,
        "COL[,COL...]",
        null,
        "feature columns (default: every column but the label)");
    f.add(
        "feature-column",
        Kind.STRING,
        "NAME",
        "features",
        "name of the feature list in the output");
    f.add("label-column", Kind.STRING, "NAME", "label", "name of the label in the output");
    f.add(
        "feature-scale",
        Kind.DOUBLE,
        "X",
        "1",
        "multiply every feature value by X (e.g. 0.0625 for 0..16 pixels)");
    f.add("shards", Kind.INT, "N", "4", "number of TFRecord files (per split)");
    f.add("compression", Kind.STRING, "CODEC", "none", "none, gzip or zlib");
    f.add(
        "test-fraction",
        Kind.DOUBLE,
        "F",
        "0",
        "fraction of records held out to DIR/test (0: no split)");
    f.add("seed", Kind.LONG, "SEED", "42", "seed of the split");
    f.add("overwrite", Kind.BOOL, null, null, "replace DIR if it exists");
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    if (f.integer("shards") < 1) {
      throw new CliException(
          "Invalid " + f.source("shards") + " " + f.integer("shards") + ": expected at least 1");
    }
    double t = f.number("test-fraction");
    if (t < 0 || t >= 1) {
      throw new CliException(
          "Invalid " + f.source("test-fraction") + " " + t + ": expected 0 <= F < 1");
    }
    if (!List.of("none", "gzip", "zlib")
        .contains(f.string("compression").toLowerCase(Locale.ROOT))) {
      throw new CliException(
          "Invalid "
              + f.source("compression")
              + " '"
              + f.string("compression")
              + "': expected none, gzip or zlib");
    }
    inputFormat(f, ctx);
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

  private static String inputFormat(Flags f, CliContext ctx) {
    if (f.given("input-format")) {
      String v = f.string("input-format").toLowerCase(Locale.ROOT);
      if (!v.equals("csv") && !v.equals("parquet")) {
        throw new CliException(
            "Invalid "
                + f.source("input-format")
                + " '"
                + f.string("input-format")
                + "': expected csv or parquet");
      }
    }
    DataChecks.Files files;
    try {
      files =
          DataChecks.list(
              DataChecks.paths(f.string("input")), f.source("input"), "tfrecord", ctx.hadoopConf());
    } catch (CliException e) {
      throw e;
    }
    if (f.given("input-format")) {
      return f.string("input-format").toLowerCase(Locale.ROOT);
    }
    int csv = 0;
    int parquet = 0;
    for (var s : files.files()) {
      String n = s.getPath().getName().toLowerCase(Locale.ROOT);
      csv += n.matches(".*\\.(csv|tsv)(\\.gz|\\.bz2)?$") ? 1 : 0;
      parquet += n.endsWith(".parquet") ? 1 : 0;
    }
    if (csv == files.files().size()) {
      return "csv";
    }
    if (parquet == files.files().size()) {
      return "parquet";
    }
    throw new CliException(
        "Cannot tell the format of "
            + f.string("input")
            + " ("
            + f.source("input")
            + "): expected .csv or .parquet files, or give --input-format csv|parquet");
  }

  @Override
  int run(Flags f, CliContext ctx) throws Exception {
    String format = inputFormat(f, ctx);
    String[] paths = DataChecks.paths(f.string("input")).toArray(new String[0]);
    Dataset<Row> in;
    try {
      in =
          format.equals("csv")
              ? ctx.spark()
                  .read()
                  .option("header", f.bool("header"))
                  .option("inferSchema", true)
                  .option("sep", f.string("delimiter"))
                  .csv(paths)
              : ctx.spark().read().parquet(paths);
    } catch (RuntimeException e) {
      throw new CliException(
          "Cannot read " + f.string("input") + " as " + format + ": " + DataChecks.firstLine(e));
    }
    StructType schema = in.schema();
    String where = f.string("input");
    String label = f.given("label") ? f.string("label") : null;
    if (label != null) {
      DataType t = DataChecks.column(schema, label, "label", where).dataType();
      if (!(t instanceof NumericType)) {
        throw new CliException(
            "Label column '"
                + label
                + "' in "
                + where
                + " has type "
                + t.simpleString()
                + ": expected numbers");
      }
    }
    List<String> features = new ArrayList<>();
    if (f.given("features")) {
      for (String c : f.string("features").split(",")) {
        if (!c.isBlank()) {
          DataChecks.column(schema, c.trim(), "feature", where);
          features.add(c.trim());
        }
      }
    } else {
      for (String c : schema.fieldNames()) {
        if (!c.equals(label)) {
          features.add(c);
        }
      }
    }
    if (features.isEmpty()) {
      throw new CliException(
          "No feature columns in " + where + ": expected columns besides the label");
    }
    double scale = f.number("feature-scale");
    Column featureCol;
    if (features.size() == 1
        && !(schema.apply(features.get(0)).dataType() instanceof NumericType)) {
      DataType t = schema.apply(features.get(0)).dataType();
      Column c = col(features.get(0));
      if (t.sameType(SQLDataTypes.VectorType())) {
        c = org.apache.spark.ml.functions.vector_to_array(c, "float32");
      } else if (!(t instanceof ArrayType
          && ((ArrayType) t).elementType() instanceof NumericType)) {
        throw new CliException(
            "Feature column '"
                + features.get(0)
                + "' in "
                + where
                + " has type "
                + t.simpleString()
                + ": expected numbers, an array of numbers or an ml Vector");
      }
      featureCol =
          scale == 1
              ? c.cast("array<float>")
              : org.apache
                  .spark
                  .sql
                  .functions
                  .transform(c, x -> x.multiply(lit(scale)))
                  .cast("array<float>");
    } else {
      List<Column> cols = new ArrayList<>();
      List<String> bad = new ArrayList<>();
      for (String c : features) {
        DataType t = schema.apply(c).dataType();
        if (!(t instanceof NumericType)) {
          bad.add(c + " (" + t.simpleString() + ")");
        }
        cols.add((scale == 1 ? col(c) : col(c).multiply(lit(scale))).cast(DataTypes.FloatType));
      }
      if (!bad.isEmpty()) {
        throw new CliException(
            "Feature columns of "
                + where
                + " must be numbers: "
                + String.join(", ", bad)
                + " are not (choose columns with --features)");
      }
      featureCol = array(cols.toArray(new Column[0]));
    }
    List<Column> out = new ArrayList<>();
    out.add(featureCol.as(f.string("feature-column")));
    if (label != null) {
      DataType t = schema.apply(label).dataType();
      boolean fractional =
          t instanceof FloatType || t instanceof DoubleType || t instanceof DecimalType;
      out.add(
          col(label)
              .cast(fractional ? DataTypes.FloatType : DataTypes.LongType)
              .as(f.string("label-column")));
    }
    Dataset<Row> records = in.select(out.toArray(new Column[0]));
    String dir = f.string("output");
    int shards = f.integer("shards");
    SaveMode mode = f.bool("overwrite") ? SaveMode.Overwrite : SaveMode.ErrorIfExists;
    ctx.spark().sparkContext().setJobDescription("spark-trainer: convert " + where);
    double test = f.number("test-fraction");
    if (test > 0) {
      Dataset<Row>[] split =
          records.randomSplit(new double[] {1 - test, test}, f.longValue("seed"));
      String trainDir = new Path(dir, "train").toString();
      String testDir = new Path(dir, "test").toString();
      write(split[0], trainDir, shards, mode, f);
      write(split[1], testDir, Math.max(1, (int) Math.round(shards * test / (1 - test))), mode, f);
      long nTrain = ctx.spark().read().format("tfrecord").load(trainDir).count();
      long nTest = ctx.spark().read().format("tfrecord").load(testDir).count();
      ctx.out.printf(
          Locale.ROOT,
          "Wrote %d records to %s (%d shards) and %d to %s: %s%n",
          nTrain,
          trainDir,
          shards,
          nTest,
          testDir,
          describe(records));
    } else {
      write(records, dir, shards, mode, f);
      long n = ctx.spark().read().format("tfrecord").load(dir).count();
      ctx.out.printf(
          Locale.ROOT,
          "Wrote %d records to %s (%d shards): %s%n",
          n,
          dir,
          shards,
          describe(records));
    }
    return 0;
  }

  private static void write(Dataset<Row> d, String dir, int shards, SaveMode mode, Flags f) {
    d.repartition(shards)
        .write()
        .mode(mode)
        .format("tfrecord")
        .option("compression", f.string("compression").toLowerCase(Locale.ROOT))
        .save(dir);
  }

  private static String describe(Dataset<Row> records) {
    return Arrays.stream(records.schema().fields())
        .map(x -> x.name() + " " + x.dataType().simpleString())
        .reduce((a, b) -> a + ", " + b)
        .orElse("");
  }
}
