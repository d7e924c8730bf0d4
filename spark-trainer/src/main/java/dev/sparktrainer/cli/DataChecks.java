package dev.sparktrainer.cli;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.min;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.when;

import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.SequenceStatistics;
import dev.sparktrainer.model.SpecStrings;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Checks of the data on the driver, before any training or inference job: paths, format, columns,
 * labels.
 */
final class DataChecks {
  private DataChecks() {}

  /** The files found under some paths, and what they are. */
  record Files(List<String> paths, List<FileStatus> files, long bytes, DatasetSpec.Format format) {}

  /**
   * A feature column as given on the command line: {@code name} or {@code name:SHAPE} (float32),
   * {@code name:int64} or {@code name:SHAPE:int64} (int64 of a fixed shape), {@code name:ids}
   * (int64 ids, any length), {@code name:seq} (floats, any length) or {@code name:image} / {@code
   * name:HxW:image} (encoded image bytes, decoded to {@code --image-size} or {@code HxW}; once the
   * size and channels are settled, the shape is {@code [H, W, C]}).
   */
  record FeatureArg(String name, long[] shape, String kind) {
    static final String IDS = "ids";
    static final String SEQ = "seq";
    static final String INT64 = "int64";
    static final String IMAGE = "image";

    FeatureArg(String name, long[] shape) {
      this(name, shape, null);
    }

    /** Encoded image bytes (PNG, JPEG, ...). */
    boolean image() {
      return IMAGE.equals(kind);
    }

    /** A sequence of any length: ids or seq. */
    boolean sequence() {
      return IDS.equals(kind) || SEQ.equals(kind);
    }

    /** What the command line said: {@code name[:SHAPE][:KIND]}. */
    String text() {
      return name
          + (shape == null || sequence() ? "" : ":" + SpecStrings.shapeString(shape))
          + (kind == null ? "" : ":" + kind);
    }
  }

  static List<String> paths(String value) {
    List<String> out = new ArrayList<>();
    for (String p : value.split(",")) {
      if (!p.isBlank()) {
        out.add(p.trim());
      }
    }
    return out;
  }

  static List<FeatureArg> features(String value, String source) {
    List<FeatureArg> out = new ArrayList<>();
    for (String part : value.split(",")) {
      String p = part.trim();
      if (p.isEmpty()) {
        continue;
      }
      int colon = p.indexOf(':');
      if (colon < 0) {
        out.add(new FeatureArg(p, null));
      } else {
        String name = p.substring(0, colon);
        String rest = p.substring(colon + 1).trim();
        String kind = null;
        for (String k :
            List.of(FeatureArg.IDS, FeatureArg.SEQ, FeatureArg.INT64, FeatureArg.IMAGE)) {
          if (rest.equals(k) || rest.endsWith(":" + k)) {
            kind = k;
            rest = rest.substring(0, rest.length() - k.length());
            rest = rest.endsWith(":") ? rest.substring(0, rest.length() - 1) : rest;
          }
        }
        if (kind != null && rest.isEmpty()) {
          out.add(new FeatureArg(name, null, kind));
          continue;
        }
        if (FeatureArg.IMAGE.equals(kind)) {
          long[] size = null;
          try {
            size = SpecStrings.shape(rest);
          } catch (IllegalArgumentException e) {
            // below
          }
          if (size == null || size.length != 2) {
            throw new CliException(
                "Invalid "
                    + source
                    + " '"
                    + value
                    + "': an image column ("
                    + name
                    + ":"
                    + kind
                    + ") takes the size the model sees as HxW, e.g. "
                    + name
                    + ":224x224:image, not '"
                    + rest
                    + "' (or give --image-size)");
          }
          out.add(new FeatureArg(name, size, kind));
          continue;
        }
        if (kind != null && !kind.equals(FeatureArg.INT64)) {
          throw new CliException(
              "Invalid "
                  + source
                  + " '"
                  + value
                  + "': a sequence column ("
                  + name
                  + ":"
                  + kind
                  + ") has no shape; its longest is --max-length");
        }
        try {
          out.add(new FeatureArg(name, SpecStrings.shape(rest), kind));
        } catch (IllegalArgumentException e) {
          throw new CliException(
              "Invalid "
                  + source
                  + " '"
                  + value
                  + "': "
                  + e.getMessage()
                  + " after the column name (COLUMN, COLUMN:SHAPE, COLUMN[:SHAPE]:int64, COLUMN:ids,"
                  + " COLUMN:seq or COLUMN[:HxW]:image, e.g. pixels, pixels:1x28x28, tokens:ids or"
                  + " photo:image)");
        }
      }
    }
    if (out.isEmpty()) {
      throw new CliException(
          "Invalid " + source + " '" + value + "': expected COLUMN[:SHAPE][,COLUMN[:SHAPE]...]");
    }
    return out;
  }

  /** {@code --format images}: a folder of image files, one subfolder per class. */
  static final String IMAGES = "images";

  /**
   * Whether {@code --format} says {@code images} (a folder of image files); any other value must be
   * tfrecord or parquet, refused here for the commands that read image folders.
   */
  static boolean imageFolder(Flags f) {
    if (!f.given("format")) {
      return false;
    }
    String v = f.string("format").trim().toLowerCase(Locale.ROOT);
    if (v.equals(IMAGES)) {
      return true;
    }
    if (!v.equals("tfrecord") && !v.equals("parquet") && !v.equals("csv")) {
      throw new CliException(
          "Invalid "
              + f.source("format")
              + " '"
              + f.string("format")
              + "': expected tfrecord, parquet or images (a folder of image files, one subfolder"
              + " per class)");
    }
    return false;
  }

  /**
   * The image folder at {@code dir} ({@code --format images}; {@link ImageFolder}): class folders
   * listed on the driver, files read by Spark's binaryFile source.
   */
  static dev.sparktrainer.data.ImageFolder images(SparkSession spark, String dir, String flag) {
    return images(spark, dir, flag, true);
  }

  /**
   * As {@link #images(SparkSession, String, String)}; with {@code requireClasses} false (predict) a
   * folder without class folders is read as unlabelled photos.
   */
  static dev.sparktrainer.data.ImageFolder images(
      SparkSession spark, String dir, String flag, boolean requireClasses) {
    if (dir.contains(",")) {
      throw new CliException(
          "Invalid "
              + flag
              + " '"
              + dir
              + "': --format images reads one folder (one subfolder per class)");
    }
    try {
      return dev.sparktrainer.data.ImageFolder.read(spark, dir, requireClasses);
    } catch (FileNotFoundException e) {
      throw new CliException("No data at " + dir + " (" + flag + "): the path does not exist");
    } catch (IOException e) {
      throw new CliException(e.getMessage() + " (" + flag + ")");
    }
  }

  /** {@code --format images}: each path is one existing folder (its classes are read later). */
  static void folderExists(List<String> paths, String flag, Configuration conf) {
    if (paths.size() != 1) {
      throw new CliException(
          "Invalid "
              + flag
              + " '"
              + String.join(",", paths)
              + "': --format images reads one folder (one subfolder per class)");
    }
    String p = paths.get(0);
    try {
      Path path = new Path(p);
      FileSystem fs = path.getFileSystem(conf);
      if (!fs.exists(path)) {
        throw new CliException("No data at " + p + " (" + flag + "): the path does not exist");
      }
      if (!fs.getFileStatus(path).isDirectory()) {
        throw new CliException(
            "Invalid "
                + flag
                + " "
                + p
                + " with --format images: it is a file, expected a folder with one subfolder per"
                + " class");
      }
    } catch (IOException e) {
      throw new CliException("Cannot read " + p + " (" + flag + "): " + e.getMessage());
    }
  }

  /**
   * An image folder's frame whose {@code image} column checks each file's header (no pixel decoded)
   * as the frame is read — while it is staged to Parquet, the one pass training makes over the
   * files before streaming them, so the check costs no extra read: a file that is not an image
   * ImageIO can read fails the staging with a {@link BadImageFile} naming its path ({@link
   * #badImage} finds it in the failure). A file cut short after its header is named by the pipeline
   * when it decodes it.
   */
  static Dataset<Row> checkedImages(Dataset<Row> frame, String flag) {
    org.apache.spark.sql.expressions.UserDefinedFunction check =
        org.apache.spark.sql.functions.udf(
            (org.apache.spark.sql.api.java.UDF2<byte[], String, byte[]>)
                (bytes, path) -> {
                  String why = dev.sparktrainer.data.ImageDecoder.problem(bytes);
                  if (why != null) {
                    throw new BadImageFile(
                        "Cannot read the image "
                            + path
                            + " ("
                            + flag
                            + "): "
                            + why
                            + "; expected a JPEG, PNG, BMP or GIF file");
                  }
                  return bytes;
                },
            org.apache.spark.sql.types.DataTypes.BinaryType);
    return frame.withColumn("image", check.apply(col("image"), col("path")));
  }

  /** An image file that is no image: its message names the file. */
  static final class BadImageFile extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    BadImageFile(String message) {
      super(message);
    }
  }

  /** The {@link BadImageFile} behind a failure (a Spark job's, however wrapped); null if none. */
  static BadImageFile badImage(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof BadImageFile b) {
        return b;
      }
    }
    return null;
  }

  /**
   * Lists the data files under {@code paths} (files, directories read recursively, globs; names
   * starting with {@code _} or {@code .} skipped) and settles the format: {@code explicit} if
   * given, Parquet if every file ends in {@code .parquet}, TFRecord otherwise.
   */
  static Files list(List<String> paths, String flag, String explicit, Configuration conf) {
    List<FileStatus> files = new ArrayList<>();
    long bytes = 0;
    for (String p : paths) {
      int before = files.size();
      try {
        Path path = new Path(p);
        FileSystem fs = path.getFileSystem(conf);
        FileStatus[] matches = fs.globStatus(path);
        if (matches == null || matches.length == 0) {
          throw new CliException("No data at " + p + " (" + flag + "): the path does not exist");
        }
        for (FileStatus m : matches) {
          if (m.isFile()) {
            files.add(m);
          } else {
            RemoteIterator<LocatedFileStatus> it = fs.listFiles(m.getPath(), true);
            while (it.hasNext()) {
              LocatedFileStatus f = it.next();
              if (!hidden(m.getPath(), f.getPath())) {
                files.add(f);
              }
            }
          }
        }
      } catch (FileNotFoundException e) {
        throw new CliException("No data at " + p + " (" + flag + "): the path does not exist");
      } catch (IOException e) {
        throw new CliException("Cannot read " + p + " (" + flag + "): " + e.getMessage());
      }
      if (files.size() == before) {
        throw new CliException(
            "No data at "
                + p
                + " ("
                + flag
                + "): it holds no data files (expected TFRecord or"
                + " Parquet files; names starting with _ or . are skipped)");
      }
    }
    for (FileStatus f : files) {
      bytes += f.getLen();
    }
    return new Files(paths, files, bytes, format(files, paths, flag, explicit));
  }

  private static boolean hidden(Path root, Path file) {
    String rel =
        file.toUri()
            .getPath()
            .substring(Math.min(file.toUri().getPath().length(), root.toUri().getPath().length()));
    for (String part : rel.split("/")) {
      if (part.startsWith("_") || part.startsWith(".")) {
        return true;
      }
    }
    return false;
  }

  private static DatasetSpec.Format format(
      List<FileStatus> files, List<String> paths, String flag, String explicit) {
    if (explicit != null) {
      try {
        return DatasetSpec.Format.parse(explicit);
      } catch (IllegalArgumentException e) {
        throw new CliException("Invalid --format '" + explicit + "': expected tfrecord or parquet");
      }
    }
    int parquet = 0;
    for (FileStatus f : files) {
      String name = f.getPath().getName().toLowerCase(Locale.ROOT);
      if (name.endsWith(".parquet")) {
        parquet++;
      } else if (name.endsWith(".csv") || name.endsWith(".csv.gz") || name.endsWith(".json")) {
        throw new CliException(
            "The data at "
                + String.join(",", paths)
                + " ("
                + flag
                + ") holds "
                + name
                + ": expected TFRecord or Parquet files (convert CSV with: spark-trainer convert --input ...)");
      }
    }
    if (parquet > 0 && parquet < files.size()) {
      throw new CliException(
          "The data at "
              + String.join(",", paths)
              + " ("
              + flag
              + ") mixes Parquet and other"
              + " files: give --format tfrecord or parquet, or separate them");
    }
    return parquet > 0 ? DatasetSpec.Format.PARQUET : DatasetSpec.Format.TFRECORD;
  }

  /**
   * The data as a DataFrame (schema inferred on the driver: TFRecord samples the first records).
   */
  static Dataset<Row> read(SparkSession spark, Files data, String flag) {
    try {
      String[] p = data.paths().toArray(new String[0]);
      return data.format() == DatasetSpec.Format.PARQUET
          ? spark.read().parquet(p)
          : spark.read().format("tfrecord").load(p);
    } catch (RuntimeException e) {
      throw new CliException(
          "Cannot read the data at "
              + String.join(",", data.paths())
              + " ("
              + flag
              + ") as "
              + data.format().name().toLowerCase(Locale.ROOT)
              + ": "
              + firstLine(e));
    }
  }

  /**
   * One pass over the sequence and int64 columns of {@code features} ({@link SequenceStatistics}):
   * each one's lengths (median, 95th percentile, longest; how many exceed {@code maxLength} when it
   * is positive) and, for ids, the smallest and largest value. TFRecord data is read with these
   * columns' types given (an ids column is {@code array<bigint>} whatever the first records
   * suggest).
   */
  static Map<String, SequenceStatistics.Stats> sequences(
      SparkSession spark, Files data, Dataset<Row> df, List<FeatureArg> features, int maxLength) {
    List<FeatureArg> cols = features.stream().filter(a -> a.kind() != null && !a.image()).toList();
    if (cols.isEmpty()) {
      return new java.util.LinkedHashMap<>();
    }
    Dataset<Row> d = df;
    if (data.format() == DatasetSpec.Format.TFRECORD) {
      List<StructField> fields = new ArrayList<>();
      for (FeatureArg a : cols) {
        fields.add(
            new StructField(
                a.name(),
                org.apache.spark.sql.types.DataTypes.createArrayType(
                    a.kind().equals(FeatureArg.SEQ)
                        ? org.apache.spark.sql.types.DataTypes.FloatType
                        : org.apache.spark.sql.types.DataTypes.LongType),
                true,
                org.apache.spark.sql.types.Metadata.empty()));
      }
      d =
          spark
              .read()
              .format("tfrecord")
              .schema(new StructType(fields.toArray(new StructField[0])))
              .load(data.paths().toArray(new String[0]));
    }
    return SequenceStatistics.of(
        d,
        cols.stream().map(FeatureArg::name).toList(),
        cols.stream().map(a -> !a.kind().equals(FeatureArg.SEQ)).toList(),
        maxLength);
  }

  /**
   * The fewest and most values per record of each array column of {@code columns} (one pass over
   * the data; null values ignored), as {@code {min, max}}; other columns are left out.
   */
  static java.util.Map<String, long[]> listLengths(Dataset<Row> df, List<String> columns) {
    List<String> arrays = new ArrayList<>();
    List<org.apache.spark.sql.Column> aggs = new ArrayList<>();
    for (String c : columns) {
      if (df.schema().apply(c).dataType() instanceof ArrayType) {
        arrays.add(c);
        var n = when(col(c).isNotNull(), org.apache.spark.sql.functions.size(col(c)));
        aggs.add(min(n));
        aggs.add(max(n));
      }
    }
    java.util.Map<String, long[]> out = new java.util.LinkedHashMap<>();
    if (arrays.isEmpty()) {
      return out;
    }
    Row r =
        df.agg(
                aggs.get(0),
                aggs.subList(1, aggs.size()).toArray(new org.apache.spark.sql.Column[0]))
            .first();
    for (int i = 0; i < arrays.size(); i++) {
      if (!r.isNullAt(2 * i)) {
        out.put(
            arrays.get(i),
            new long[] {
              ((Number) r.get(2 * i)).longValue(), ((Number) r.get(2 * i + 1)).longValue()
            });
      }
    }
    return out;
  }

  /**
   * What to say of feature column {@code name}, whose records hold {@code min..max} values: its
   * shape varies, which is valid data that training cannot take as it is today.
   */
  static String varyingLength(String name, String where, long min, long max) {
    return "Feature column '"
        + name
        + "' in "
        + where
        + " varies in length: "
        + min
        + ".."
        + max
        + " values per record, where a feature column has one shape in every record. The data is"
        + " valid, but such a column cannot be trained on as it is: pad or truncate it to a fixed"
        + " length when making the data (e.g. in the DataFrame before convert or before writing the"
        + " TFRecords), or leave it out of --features";
  }

  /**
   * Checks the feature columns and returns each one's per-example shape: as given, else its size in
   * the first record that has it.
   */
  static long[][] featureShapes(Dataset<Row> df, List<FeatureArg> features, String where) {
    StructType schema = df.schema();
    long[][] shapes = new long[features.size()][];
    for (int i = 0; i < features.size(); i++) {
      FeatureArg f = features.get(i);
      DataType t = column(schema, f.name(), "feature", where).dataType();
      if (f.image()) {
        if (!t.typeName().equals("binary") && !t.typeName().equals("string")) {
          throw new CliException(
              "Feature column '"
                  + f.name()
                  + "' in "
                  + where
                  + " has type "
                  + t.simpleString()
                  + ": --features "
                  + f.name()
                  + ":image expects encoded images (a bytes feature in TFRecord, binary in"
                  + " Parquet)");
        }
        shapes[i] = f.shape(); // [H, W, C], settled by the command
        continue;
      }
      if (f.kind() != null) {
        DataType element = t instanceof ArrayType a ? a.elementType() : t;
        boolean integral =
            element instanceof org.apache.spark.sql.types.LongType
                || element instanceof org.apache.spark.sql.types.IntegerType
                || element instanceof org.apache.spark.sql.types.ShortType
                || element instanceof org.apache.spark.sql.types.ByteType;
        boolean ok =
            f.kind().equals(FeatureArg.SEQ)
                ? element instanceof NumericType
                : integral || (t instanceof ArrayType && element.typeName().equals("string"));
        if (!ok) {
          throw new CliException(
              "Feature column '"
                  + f.name()
                  + "' in "
                  + where
                  + " has type "
                  + t.simpleString()
                  + ": --features "
                  + f.text()
                  + " expects "
                  + (f.kind().equals(FeatureArg.SEQ)
                      ? "numbers (a float list in TFRecord, an array of numbers in Parquet)"
                      : "integers (an int64 list in TFRecord; int or bigint, or an array of them, in"
                          + " Parquet)"));
        }
        if (f.sequence()) {
          shapes[i] = new long[] {0}; // the caller's: --max-length or the longest in the data
          continue;
        }
        if (f.shape() != null) {
          shapes[i] = f.shape();
          continue;
        }
        if (!(t instanceof ArrayType)) {
          shapes[i] = new long[] {1};
          continue;
        }
      }
      boolean scalar = t instanceof NumericType || t.typeName().equals("boolean");
      boolean list =
          t instanceof ArrayType
              && (((ArrayType) t).elementType() instanceof NumericType
                  || (f.kind() != null
                      && ((ArrayType) t).elementType().typeName().equals("string")));
      boolean vector = t.sameType(SQLDataTypes.VectorType());
      if (!scalar && !list && !vector) {
        throw new CliException(
            "Feature column '"
                + f.name()
                + "' in "
                + where
                + " has type "
                + t.simpleString()
                + ": expected numbers (a float or int64 list in TFRecord; a number, array of numbers or ml Vector in"
                + " Parquet)");
      }
      if (f.shape() != null) {
        shapes[i] = f.shape();
      } else if (scalar) {
        shapes[i] = new long[] {1};
      } else {
        List<Row> first =
            df.select(col(f.name())).where(col(f.name()).isNotNull()).limit(1).collectAsList();
        if (first.isEmpty()) {
          throw new CliException(
              "Feature column '" + f.name() + "' in " + where + " has no values");
        }
        Object v = first.get(0).get(0);
        int size = v instanceof Vector ? ((Vector) v).size() : first.get(0).getList(0).size();
        if (size == 0) {
          throw new CliException(
              "Feature column '"
                  + f.name()
                  + "' in "
                  + where
                  + " is empty in its first record: expected values (or give its shape: --features "
                  + f.name()
                  + ":SHAPE)");
        }
        shapes[i] = new long[] {size};
      }
    }
    return shapes;
  }

  /**
   * Checks the label column's type; {@code classes} > 0: values must be class indices 0..classes-1.
   */
  static void label(
      Dataset<Row> df,
      String label,
      int classes,
      boolean binary,
      String where,
      boolean scan,
      PrintStream notes) {
    DataType t = column(df.schema(), label, "label", where).dataType();
    if (!(t instanceof NumericType) && !t.typeName().equals("boolean")) {
      throw new CliException(
          "Label column '"
              + label
              + "' in "
              + where
              + " has type "
              + t.simpleString()
              + ": expected one number per record"
              + (classes > 0 ? " (a class index 0.." + (classes - 1) + ")" : ""));
    }
    if (!scan || (classes <= 0 && !binary)) {
      return;
    }
    boolean fractional =
        t instanceof FloatType || t instanceof DoubleType || t instanceof DecimalType;
    var c = col(label);
    Row r =
        df.agg(
                min(c),
                max(c),
                count(when(c.isNull(), 1)),
                fractional
                    ? sum(when(c.notEqual(org.apache.spark.sql.functions.round(c, 0)), 1))
                    : count(when(c.isNull(), 1)))
            .head();
    if (r.getLong(2) > 0) {
      throw new CliException(
          "Label column '"
              + label
              + "' in "
              + where
              + " is missing in "
              + r.getLong(2)
              + " records: expected a label in every record");
    }
    if (r.isNullAt(0)) {
      throw new CliException("No records in " + where);
    }
    if (fractional && !r.isNullAt(3) && ((Number) r.get(3)).longValue() > 0) {
      throw new CliException(
          "Label column '"
              + label
              + "' in "
              + where
              + " has non-integer values: expected class"
              + " indices 0.."
              + (classes - 1));
    }
    double lo = ((Number) r.get(0)).doubleValue();
    double hi = ((Number) r.get(1)).doubleValue();
    if (binary) {
      if (lo < 0 || hi > 1) {
        throw new CliException(
            "Label column '"
                + label
                + "' in "
                + where
                + " has values "
                + fmt(lo)
                + ".."
                + fmt(hi)
                + ": expected 0 or 1 for the sigmoid_binary_cross_entropy loss");
      }
      return;
    }
    if (lo < 0 || hi >= classes) {
      throw new CliException(
          "--num-classes "
              + classes
              + " does not match the labels: '"
              + label
              + "' in "
              + where
              + " has values "
              + fmt(lo)
              + ".."
              + fmt(hi)
              + ": expected --num-classes "
              + Math.max(classes, (long) hi + 1)
              + (lo < 0 ? " and labels from 0" : "")
              + " (labels are class indices 0..K-1)");
    }
    if (hi + 1 < classes && notes != null) {
      notes.println(
          "note: '"
              + label
              + "' in "
              + where
              + " only uses classes "
              + fmt(lo)
              + ".."
              + fmt(hi)
              + " of "
              + classes);
    }
  }

  static StructField column(StructType schema, String name, String what, String where) {
    if (!Arrays.asList(schema.fieldNames()).contains(name)) {
      throw new CliException(
          "No "
              + what
              + " column '"
              + name
              + "' in "
              + where
              + ": its columns are "
              + String.join(", ", schema.fieldNames()));
    }
    return schema.apply(name);
  }

  private static String fmt(double v) {
    return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
  }

  /** The first line of an exception's message (Spark's analysis errors span several lines). */
  static String firstLine(Throwable e) {
    String m = e.getMessage() == null ? e.toString() : e.getMessage();
    int nl = m.indexOf('\n');
    return nl < 0 ? m : m.substring(0, nl);
  }
}
