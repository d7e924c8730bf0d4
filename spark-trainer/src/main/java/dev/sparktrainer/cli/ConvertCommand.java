package dev.sparktrainer.cli;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.coalesce;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.filter;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.size;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.udf;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.data.text.TextEncoding;
import dev.sparktrainer.data.text.Tokenizer;
import dev.sparktrainer.data.text.Vocabulary;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
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
            + "With --test-fraction, writes DIR/train and DIR/test (a seeded random split).\n"
            + "With --tokenize COL, the text column COL becomes an int64 list of token ids (also named COL), by a\n"
            + "vocabulary counted on the training split and written to DIR/vocab.txt; records go to DIR/train\n"
            + "(and DIR/test).");
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
    f.add(
        "tokenize",
        Kind.STRING,
        "COL",
        null,
        "a text column to turn into token ids (an int64 list named COL; vocabulary in DIR/vocab.txt)");
    f.add(
        "vocab-size",
        Kind.INT,
        "N",
        "20000",
        "--tokenize: entries in the vocabulary, <pad> and <unk> included (the N-2 most frequent tokens)");
    f.add("lowercase", Kind.BOOL, null, null, "--tokenize: lower-case the tokens");
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
    if (f.given("tokenize") && f.string("tokenize").isBlank()) {
      throw new CliException("Invalid " + f.source("tokenize") + " '': expected a column name");
    }
    if (!f.given("tokenize")) {
      for (String flag : List.of("vocab-size", "lowercase")) {
        if (f.given(flag)) {
          throw new CliException(
              "Invalid " + f.source(flag) + ": it applies to --tokenize COL, which is not given");
        }
      }
    }
    if (f.integer("vocab-size") < 3) {
      throw new CliException(
          "Invalid "
              + f.source("vocab-size")
              + " "
              + f.integer("vocab-size")
              + ": expected at least 3 (<pad>, <unk> and one token)");
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
    String text = f.given("tokenize") ? f.string("tokenize").trim() : null;
    if (text != null) {
      DataType t = DataChecks.column(schema, text, "--tokenize", where).dataType();
      if (!(t instanceof StringType)) {
        throw new CliException(
            "The --tokenize column '"
                + text
                + "' in "
                + where
                + " has type "
                + t.simpleString()
                + ": expected text (string)");
      }
      if (label != null && text.equals(f.string("label-column"))) {
        throw new CliException(
            "The --tokenize column '"
                + text
                + "' keeps its name in the output, which is also the --label-column's: choose"
                + " another --label-column");
      }
    }
    List<String> features = new ArrayList<>();
    if (f.given("features")) {
      for (String c : f.string("features").split(",")) {
        if (!c.isBlank()) {
          DataChecks.column(schema, c.trim(), "feature", where);
          if (c.trim().equals(text)) {
            throw new CliException(
                "Column '"
                    + text
                    + "' is both in --features and the --tokenize column: leave it out of"
                    + " --features");
          }
          features.add(c.trim());
        }
      }
    } else if (text != null) {
      // With --tokenize the token ids are the features: other columns only when named.
    } else {
      for (String c : schema.fieldNames()) {
        if (!c.equals(label)) {
          features.add(c);
        }
      }
    }
    if (features.isEmpty() && text == null) {
      throw new CliException(
          "No feature columns in " + where + ": expected columns besides the label");
    }
    double scale = f.number("feature-scale");
    Column featureCol;
    if (features.isEmpty()) {
      featureCol = null;
    } else if (features.size() == 1
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
    if (featureCol != null) {
      if (f.string("feature-column").equals(text)) {
        throw new CliException(
            "The --tokenize column '"
                + text
                + "' keeps its name in the output, which is also the --feature-column's: choose"
                + " another --feature-column");
      }
      out.add(featureCol.as(f.string("feature-column")));
    }
    if (text != null) {
      out.add(col(text));
    }
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
    if (text != null) {
      convertText(ctx, f, records, text, where, dir, shards, mode, test);
      return 0;
    }
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

  /**
   * {@code --tokenize}: the vocabulary is counted on the training split only (a Spark job; only the
   * top counts reach the driver), then applied to both splits the same way; records go to DIR/train
   * (and DIR/test) and the vocabulary to DIR/vocab.txt, so that DIR holds no file a reader of the
   * splits would take for data.
   */
  private static void convertText(
      CliContext ctx,
      Flags f,
      Dataset<Row> records,
      String text,
      String where,
      String dir,
      int shards,
      SaveMode mode,
      double test)
      throws IOException {
    SparkSession spark = ctx.spark();
    Dataset<Row> train;
    Dataset<Row> held = null;
    if (test > 0) {
      Dataset<Row>[] split =
          records.randomSplit(new double[] {1 - test, test}, f.longValue("seed"));
      train = split[0];
      held = split[1];
    } else {
      train = records;
    }
    Tokenizer tokenizer = new Tokenizer(f.bool("lowercase"));
    spark.sparkContext().setJobDescription("spark-trainer: convert " + where + ": vocabulary");
    Vocabulary.Counted counted =
        Vocabulary.count(
            train.select(col(text)).as(Encoders.STRING()).javaRDD(),
            tokenizer,
            f.integer("vocab-size"));
    Vocabulary vocabulary = counted.vocabulary();
    Broadcast<Vocabulary> shared =
        JavaSparkContext.fromSparkContext(spark.sparkContext()).broadcast(vocabulary);
    UserDefinedFunction ids =
        udf(
            (UDF1<String, long[]>) s -> shared.value().ids(s, tokenizer),
            DataTypes.createArrayType(DataTypes.LongType, false));
    spark.sparkContext().setJobDescription("spark-trainer: convert " + where);
    String trainDir = new Path(dir, "train").toString();
    Dataset<Row> trainIds = train.withColumn(text, ids.apply(col(text)));
    String testDir = null;
    int testShards = 0;
    try {
      write(trainIds, trainDir, shards, mode, f);
      if (held != null) {
        testDir = new Path(dir, "test").toString();
        testShards = Math.max(1, (int) Math.round(shards * test / (1 - test)));
        write(held.withColumn(text, ids.apply(col(text))), testDir, testShards, mode, f);
      }
    } finally {
      shared.destroy(); // the session may outlive the command (a notebook, a test)
    }
    Path vocabFile = new Path(dir, Vocabulary.FILE_NAME);
    vocabulary.write(vocabFile.getFileSystem(ctx.hadoopConf()), vocabFile);
    // How the tokens were cut, beside them: train keeps both with the model, predict reuses them.
    TextEncoding.writeSettings(vocabFile.getFileSystem(ctx.hadoopConf()), new Path(dir), tokenizer);
    long[] trainStats = tokenStats(spark, trainDir, text);
    ctx.out.printf(
        Locale.ROOT,
        "Vocabulary: %d entries (<pad>, <unk> and %s %d distinct tokens in %d tokens of the"
            + " training split%s) in %s%n",
        vocabulary.size(),
        vocabulary.size() - 2 < counted.distinctTokens()
            ? "the " + (vocabulary.size() - 2) + " most frequent of"
            : "all",
        counted.distinctTokens(),
        counted.tokens(),
        tokenizer.lowercase() ? ", lower-cased" : "",
        vocabFile);
    if (held != null) {
      long[] testStats = tokenStats(spark, testDir, text);
      ctx.out.printf(
          Locale.ROOT,
          "Wrote %d records to %s (%d shards) and %d to %s (%d shards): %s%n",
          trainStats[0],
          trainDir,
          shards,
          testStats[0],
          testDir,
          testShards,
          describe(trainIds));
      ctx.out.printf(
          Locale.ROOT,
          "Tokens: train %d (%s unknown), test %d (%s unknown)%n",
          trainStats[1],
          percent(trainStats[2], trainStats[1]),
          testStats[1],
          percent(testStats[2], testStats[1]));
    } else {
      ctx.out.printf(
          Locale.ROOT,
          "Wrote %d records to %s (%d shards): %s%n",
          trainStats[0],
          trainDir,
          shards,
          describe(trainIds));
      ctx.out.printf(
          Locale.ROOT,
          "Tokens: %d (%s unknown)%n",
          trainStats[1],
          percent(trainStats[2], trainStats[1]));
    }
  }

  /** Records, tokens and unknown tokens ({@code <unk>} ids) of the written split, read back. */
  private static long[] tokenStats(SparkSession spark, String dir, String column) {
    Column ids = col(column);
    Row r =
        spark
            .read()
            .format("tfrecord")
            .schema(
                new StructType()
                    .add(column, DataTypes.createArrayType(DataTypes.LongType, false), true))
            .load(dir)
            .agg(
                count(lit(1)),
                sum(coalesce(size(ids), lit(0))),
                sum(coalesce(size(filter(ids, x -> x.equalTo(lit(Vocabulary.UNK_ID)))), lit(0))))
            .first();
    return new long[] {
      r.getLong(0), r.isNullAt(1) ? 0 : r.getLong(1), r.isNullAt(2) ? 0 : r.getLong(2)
    };
  }

  private static String percent(long part, long whole) {
    return whole == 0 ? "0%" : String.format(Locale.ROOT, "%.2f%%", 100.0 * part / whole);
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
