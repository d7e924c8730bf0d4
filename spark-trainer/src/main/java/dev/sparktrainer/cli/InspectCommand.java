package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.FeatureStatistics;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.ml.BatchInference;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructField;
import scala.collection.Seq;
import scala.jdk.javaapi.CollectionConverters;

/** {@code inspect PATH}: a dataset's inferred schema, record count and first records. */
final class InspectCommand extends Command {
  InspectCommand() {
    super(
        "inspect",
        "PATH [options]",
        "Shows a TFRecord (or Parquet) dataset: its files, the schema Spark infers, the number of records,\n"
            + "the first few records (long lists abbreviated) and each numeric feature's mean, std, min and max\n"
            + "(computed as train --normalize does: one distributed pass, the pipeline's own decoding).");
  }

  @Override
  void define(Flags f) {
    f.positional("PATH");
    f.add(
        "format",
        Kind.STRING,
        "FORMAT",
        null,
        "tfrecord or parquet (default: parquet if every file ends in .parquet)");
    f.add("records", Kind.INT, "N", "5", "how many records to show");
    f.add(
        "record-type",
        Kind.STRING,
        "TYPE",
        "Example",
        "TFRecord payload: Example, SequenceExample or ByteArray");
    f.add("no-count", Kind.BOOL, null, null, "do not count the records (a full scan)");
    f.add(
        "features",
        Kind.STRING,
        "COL[,COL...]",
        null,
        "columns to compute statistics of (default: every column of"
            + " numbers, lists of numbers or ml Vectors)");
    f.add("no-stats", Kind.BOOL, null, null, "do not compute feature statistics (a full scan)");
  }

  @Override
  void validate(Flags f, CliContext ctx) {
    if (f.integer("records") < 0) {
      throw new CliException(
          "Invalid " + f.source("records") + " " + f.integer("records") + ": expected >= 0");
    }
    String rt = f.string("record-type");
    if (!List.of("example", "sequenceexample", "bytearray").contains(rt.toLowerCase(Locale.ROOT))) {
      throw new CliException(
          "Invalid "
              + f.source("record-type")
              + " '"
              + rt
              + "': expected Example, SequenceExample or ByteArray");
    }
    DataChecks.list(
        DataChecks.paths(f.positional(0)),
        "PATH",
        f.given("format") ? f.string("format") : null,
        ctx.hadoopConf());
  }

  @Override
  int run(Flags f, CliContext ctx) {
    String path = f.positional(0);
    DataChecks.Files files =
        DataChecks.list(
            DataChecks.paths(path),
            "PATH",
            f.given("format") ? f.string("format") : null,
            ctx.spark().sparkContext().hadoopConfiguration());
    Dataset<Row> df;
    try {
      df =
          files.format() == DatasetSpec.Format.PARQUET
              ? ctx.spark().read().parquet(DataChecks.paths(path).toArray(new String[0]))
              : ctx.spark()
                  .read()
                  .format("tfrecord")
                  .option("recordType", f.string("record-type"))
                  .load(DataChecks.paths(path).toArray(new String[0]));
    } catch (RuntimeException e) {
      throw new CliException(
          "Cannot read "
              + path
              + " as "
              + files.format().name().toLowerCase(Locale.ROOT)
              + ": "
              + DataChecks.firstLine(e));
    }
    ctx.out.printf(
        Locale.ROOT,
        "Path:    %s (%d %s file%s, %s)%n",
        path,
        files.files().size(),
        files.format().name().toLowerCase(Locale.ROOT),
        files.files().size() == 1 ? "" : "s",
        bytes(files.bytes()));
    if (!f.bool("no-count")) {
      ctx.spark().sparkContext().setJobDescription("spark-trainer: inspect " + path);
      ctx.out.printf(Locale.ROOT, "Records: %d%n", df.count());
    }
    ctx.out.println("Schema:");
    ctx.out.print(df.schema().treeString());
    if (!f.bool("no-stats")) {
      statistics(f, ctx, files, df, path);
    }
    int n = f.integer("records");
    if (n > 0) {
      List<Row> rows = df.limit(n).collectAsList();
      ctx.out.println("First " + rows.size() + " record" + (rows.size() == 1 ? "" : "s") + ":");
      for (Row r : rows) {
        StringBuilder sb = new StringBuilder("  {");
        StructField[] fields = df.schema().fields();
        for (int i = 0; i < fields.length; i++) {
          sb.append(i == 0 ? "" : ", ")
              .append(fields[i].name())
              .append(": ")
              .append(show(r.get(i)));
        }
        ctx.out.println(sb.append('}'));
      }
    }
    return 0;
  }

  /** Values of a wide column shown one by one; the rest are summarized in one line. */
  private static final int STATS_PER_COLUMN = 8;

  /**
   * Each numeric feature value's mean, std, min and max, with {@link FeatureStatistics} over the
   * data planned as training plans it.
   */
  private static void statistics(
      Flags f, CliContext ctx, DataChecks.Files files, Dataset<Row> df, String path) {
    List<DataChecks.FeatureArg> features = new ArrayList<>();
    if (f.given("features")) {
      features.addAll(DataChecks.features(f.string("features"), f.source("features")));
    } else {
      for (StructField c : df.schema().fields()) {
        if (BatchInference.isFeatureType(c.dataType())) {
          features.add(new DataChecks.FeatureArg(c.name(), null));
        }
      }
    }
    if (features.isEmpty()) {
      ctx.out.println("Feature statistics: no column of numbers");
      return;
    }
    FeatureStatistics st;
    try {
      // A list column whose length varies is valid data the pipeline cannot decode into one shape:
      // say so (the lengths seen, what to do) rather than let decoding call the file corrupt.
      List<String> lists = new ArrayList<>();
      for (DataChecks.FeatureArg a : features) {
        if (a.shape() == null) {
          lists.add(a.name());
        }
      }
      java.util.Map<String, long[]> lengths = DataChecks.listLengths(df, lists);
      List<DataChecks.FeatureArg> fixed = new ArrayList<>();
      for (DataChecks.FeatureArg a : features) {
        long[] mm = lengths.get(a.name());
        if (mm != null && mm[0] != mm[1]) {
          String why = DataChecks.varyingLength(a.name(), path, mm[0], mm[1]);
          if (f.given("features")) {
            throw new CliException(why);
          }
          ctx.err.println("note: " + why + " (no statistics for it)");
        } else {
          fixed.add(a);
        }
      }
      if (fixed.isEmpty()) {
        ctx.out.println("Feature statistics: no column of one shape");
        return;
      }
      features = fixed;
      long[][] shapes = DataChecks.featureShapes(df, features, path);
      DatasetSpec.Builder spec =
          DatasetSpec.builder().optFormat(files.format()).setPaths(files.paths()).noLabel();
      for (int i = 0; i < shapes.length; i++) {
        spec.addFeature(features.get(i).name(), shapes[i]);
      }
      ctx.spark()
          .sparkContext()
          .setJobDescription("spark-trainer: inspect " + path + " (feature statistics)");
      DatasetPlan plan =
          DatasetPlanner.plan(
              spec.build(), PipelineOptions.builder().optBatchSize(1).build(), ctx.spark());
      st = FeatureStatistics.compute(plan, ctx.spark());
    } catch (
        Exception
            e) { // a CliException from the column checks, or a failed job (SparkException, thrown
      // unchecked)
      String why =
          "Cannot compute the feature statistics of " + path + ": " + DataChecks.firstLine(e);
      if (f.given("features")) {
        throw new CliException(why);
      }
      // Not asked for by name: the rest of what inspect shows still stands.
      ctx.err.println("note: " + why + " (choose columns with --features, or add --no-stats)");
      return;
    }
    ctx.out.printf(Locale.ROOT, "Feature statistics (%d records):%n", st.count());
    ctx.out.printf(
        Locale.ROOT, "  %-24s %14s %14s %14s %14s%n", "feature", "mean", "std", "min", "max");
    int at = 0;
    int[] widths = st.widths();
    for (int c = 0; c < widths.length; c++) {
      int shown = widths[c] <= STATS_PER_COLUMN + 1 ? widths[c] : STATS_PER_COLUMN;
      for (int j = 0; j < shown; j++) {
        row(
            ctx,
            st.describe(at + j).replace("'", ""),
            st.mean(at + j),
            st.std(at + j),
            st.min(at + j),
            st.max(at + j));
      }
      if (shown < widths[c]) { // the rest as one: their values pooled
        double mean = 0;
        double square = 0;
        double lo = Double.POSITIVE_INFINITY;
        double hi = Double.NEGATIVE_INFINITY;
        int n = widths[c] - shown;
        for (int j = at + shown; j < at + widths[c]; j++) {
          mean += st.mean(j) / n;
          square += (st.std(j) * st.std(j) + st.mean(j) * st.mean(j)) / n;
          lo = Math.min(lo, st.min(j));
          hi = Math.max(hi, st.max(j));
        }
        row(
            ctx,
            st.names().get(c) + "[" + shown + ".." + (widths[c] - 1) + "]",
            mean,
            Math.sqrt(Math.max(0, square - mean * mean)),
            lo,
            hi);
      }
      at += widths[c];
    }
  }

  private static void row(
      CliContext ctx, String name, double mean, double std, double min, double max) {
    ctx.out.printf(Locale.ROOT, "  %-24s %14.6g %14.6g %14.6g %14.6g%n", name, mean, std, min, max);
  }

  /** A value, long lists abbreviated: {@code [0.0, 0.1, 0.5, ... (64 values)]}. */
  static String show(Object v) {
    if (v instanceof Vector) {
      v = ((Vector) v).toArray();
    }
    List<?> list = null;
    if (v instanceof Seq) {
      list = CollectionConverters.asJava((Seq<?>) v);
    } else if (v instanceof double[]) {
      list = Arrays.stream((double[]) v).boxed().toList();
    } else if (v instanceof byte[]) {
      return "<" + ((byte[]) v).length + " bytes>";
    }
    if (list == null) {
      String s = String.valueOf(v);
      return s.length() > 60 ? s.substring(0, 57) + "..." : s;
    }
    StringBuilder sb = new StringBuilder("[");
    int shown = Math.min(list.size(), 8);
    for (int i = 0; i < shown; i++) {
      sb.append(i == 0 ? "" : ", ").append(show(list.get(i)));
    }
    if (list.size() > shown) {
      sb.append(", ... (").append(list.size()).append(" values)");
    }
    return sb.append(']').toString();
  }

  static String bytes(long b) {
    if (b < 1024) {
      return b + " B";
    }
    String[] units = {"KiB", "MiB", "GiB", "TiB"};
    double v = b;
    int u = -1;
    while (v >= 1024 && u < units.length - 1) {
      v /= 1024;
      u++;
    }
    return String.format(Locale.ROOT, "%.1f %s", v, units[u]);
  }
}
