package dev.sparktrainer.data;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.array_position;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.element_at;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.split;
import static org.apache.spark.sql.functions.substring;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;

/**
 * A folder of image files, one subfolder per class (Keras's {@code image_dataset_from_directory},
 * torchvision's {@code ImageFolder}), as a DataFrame of {@code image} (the file's bytes), {@code
 * label} (the index of its class folder's name among the class folders sorted by name) and {@code
 * path} (the file's qualified path, for messages and predictions), read by Spark's {@code
 * binaryFile} source on the executors: nothing but the listing of the class folders happens on the
 * driver. Files are taken from any depth under a class folder; only image files (JPEG, PNG, BMP,
 * GIF by their extension, any case) and no names starting with {@code .} or {@code _}; files
 * directly in the root folder belong to no class and are left out, and Spark's file sources list no
 * empty (0-byte) file. An unreadable image file is not skipped: decoding it fails, naming it. The
 * DataFrame goes to training like any other ({@link DataFrameInput#of} stages it to Parquet once).
 */
public final class ImageFolder {
  /** The extensions read, lower case. */
  public static final List<String> EXTENSIONS = List.of("jpg", "jpeg", "png", "bmp", "gif");

  private final Dataset<Row> frame;
  private final List<String> classes;

  private ImageFolder(Dataset<Row> frame, List<String> classes) {
    this.frame = frame;
    this.classes = List.copyOf(classes);
  }

  /**
   * Reads {@code dir} (any Hadoop path).
   *
   * @throws IOException if {@code dir} is not a folder or has no class folder
   */
  public static ImageFolder read(SparkSession spark, String dir) throws IOException {
    return read(spark, dir, true);
  }

  /**
   * Reads {@code dir}; with {@code requireClasses} false a folder without class folders is read as
   * unlabelled photos (prediction): every image file under it, at any depth, with a null {@code
   * label} and no classes.
   *
   * @throws IOException if {@code dir} is not a folder, or has no class folders when they are
   *     required (or no image files at all)
   */
  public static ImageFolder read(SparkSession spark, String dir, boolean requireClasses)
      throws IOException {
    Configuration conf = spark.sessionState().newHadoopConf();
    Path root = new Path(dir);
    FileSystem fs = root.getFileSystem(conf);
    FileStatus[] entries;
    try {
      entries = fs.listStatus(root);
    } catch (FileNotFoundException e) {
      throw new FileNotFoundException("Image folder " + dir + " does not exist");
    }
    List<String> classes = new ArrayList<>();
    for (FileStatus s : entries) {
      String name = s.getPath().getName();
      if (s.isDirectory() && !name.startsWith(".") && !name.startsWith("_")) {
        classes.add(name);
      }
    }
    if (classes.isEmpty() && !requireClasses) {
      return unlabelled(spark, fs, root, entries, dir);
    }
    if (classes.isEmpty()) {
      throw new IOException(
          "Image folder "
              + dir
              + " has no class folders: expected one subfolder per class holding its images");
    }
    classes.sort(null);
    String qualified = fs.makeQualified(root).toString();
    String prefix = qualified.endsWith("/") ? qualified : qualified + "/";
    Column[] names = new Column[classes.size()];
    for (int i = 0; i < names.length; i++) {
      names[i] = lit(classes.get(i));
    }
    // the class: the first folder of the path under the root
    Column relative = substring(col("path"), prefix.length() + 1, Integer.MAX_VALUE);
    Column cls = element_at(split(relative, "/"), 1);
    Dataset<Row> files = files(spark, qualified);
    Dataset<Row> frame =
        files
            .filter(col("path").startsWith(prefix))
            .select(
                col("content").as("image"),
                array_position(array(names), cls).minus(1).cast(DataTypes.LongType).as("label"),
                col("path"))
            // Files directly in the root belong to no class (left out, as Keras and torchvision
            // do).
            .filter(col("label").geq(0));
    return new ImageFolder(frame, classes);
  }

  /** Every image file under {@code qualified}, at any depth, by Spark's binaryFile source. */
  private static Dataset<Row> files(SparkSession spark, String qualified) {
    StringBuilder glob = new StringBuilder("*.{");
    for (String e : EXTENSIONS) {
      glob.append(e).append(',').append(e.toUpperCase(Locale.ROOT)).append(',');
    }
    glob.setCharAt(glob.length() - 1, '}');
    return spark
        .read()
        .format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", glob.toString())
        .load(qualified);
  }

  /** A folder of photos without class folders: each file's bytes, a null label, its path. */
  private static ImageFolder unlabelled(
      SparkSession spark, FileSystem fs, Path root, FileStatus[] entries, String dir)
      throws IOException {
    boolean any = false;
    for (FileStatus s : entries) {
      String name = s.getPath().getName();
      int dot = name.lastIndexOf('.');
      any |=
          s.isFile()
              && dot > 0
              && EXTENSIONS.contains(name.substring(dot + 1).toLowerCase(Locale.ROOT));
    }
    if (!any) {
      throw new IOException(
          "Image folder " + dir + " has no image files (" + String.join(", ", EXTENSIONS) + ")");
    }
    Dataset<Row> frame =
        files(spark, fs.makeQualified(root).toString())
            .select(
                col("content").as("image"),
                lit(null).cast(DataTypes.LongType).as("label"),
                col("path"));
    return new ImageFolder(frame, List.of());
  }

  /** {@code image} (binary), {@code label} (long) and {@code path} (string): one row per file. */
  public Dataset<Row> frame() {
    return frame;
  }

  /** The class names, sorted: label {@code i} is {@code classes().get(i)}; empty if unlabelled. */
  public List<String> classes() {
    return classes;
  }
}
