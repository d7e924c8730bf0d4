package dev.sparktrainer.data;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Turns a DataFrame into files the pipeline streams, without collecting anything to the driver: a
 * plain scan of TFRecord or Parquet files (optionally selecting columns) is read from its own
 * files; anything else (joins, filters, SQL, feature engineering) is written once, with only the
 * needed columns, to Parquet shards in a staging directory, which {@link #close()} deletes.
 */
public final class DataFrameInput implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DataFrameInput.class);

  private final DatasetSpec spec;
  private final Path staging;
  private final Configuration conf;

  private DataFrameInput(DatasetSpec spec, Path staging, Configuration conf) {
    this.spec = spec;
    this.staging = staging;
    this.conf = conf;
  }

  /**
   * @param df the data
   * @param columns the feature columns, shapes and label (its paths and format are ignored)
   * @param stagingDir where a DataFrame that is not a plain file scan is written (any Hadoop path)
   * @throws IllegalArgumentException naming a missing column or a column of the wrong type
   */
  public static DataFrameInput of(Dataset<Row> df, DatasetSpec columns, String stagingDir)
      throws IOException {
    checkColumns(df.schema(), columns);
    DatasetSpec.Format format = plainScanFormat(df.queryExecution().analyzed(), columns);
    if (format != null) {
      List<String> files = Arrays.asList(df.inputFiles());
      if (!files.isEmpty()) {
        LOG.info("Reading the DataFrame's {} {} files directly", files.size(), format);
        return new DataFrameInput(
            columns.toBuilder().setPaths(files).optFormat(format).build(), null, null);
      }
    }
    List<Column> needed = new ArrayList<>();
    for (DatasetSpec.Feature f : columns.features()) {
      needed.add(df.col(f.name()));
    }
    if (columns.label() != null) {
      needed.add(df.col(columns.label()));
    }
    Path dir = new Path(stagingDir, "staging-" + UUID.randomUUID());
    Configuration conf = df.sparkSession().sessionState().newHadoopConf();
    LOG.info("Staging the DataFrame to Parquet at {}", dir);
    try {
      df.select(needed.toArray(new Column[0]))
          .write()
          .mode(SaveMode.ErrorIfExists)
          .parquet(dir.toString());
    } catch (Exception e) { // Spark's write throws SparkException, a checked one, undeclared
      // A failed write (a bad row, a lost executor) leaves its directory: never read, so removed.
      try {
        dir.getFileSystem(conf).delete(dir, true);
      } catch (IOException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
    return new DataFrameInput(
        columns.toBuilder()
            .setPaths(List.of(dir.toString()))
            .optFormat(DatasetSpec.Format.PARQUET)
            .build(),
        dir,
        conf);
  }

  /**
   * Whether {@link #of} would stage {@code df} (it is not a plain scan of TFRecord or Parquet
   * files), decided from its plan without running anything.
   */
  public static boolean needsStaging(Dataset<Row> df, DatasetSpec columns) {
    return plainScanFormat(df.queryExecution().analyzed(), columns) == null
        || df.inputFiles().length == 0;
  }

  /** The spec to plan: the DataFrame's own files, or the staged Parquet shards. */
  public DatasetSpec spec() {
    return spec;
  }

  /** Whether the data was staged (and {@link #close()} deletes it). */
  public boolean staged() {
    return staging != null;
  }

  @Override
  public void close() throws IOException {
    if (staging != null) {
      FileSystem fs = staging.getFileSystem(conf);
      if (!fs.delete(staging, true) && fs.exists(staging)) {
        LOG.warn("Could not delete the staging directory {}", staging);
      }
    }
  }

  private static void checkColumns(StructType schema, DatasetSpec spec) {
    List<String> names = Arrays.asList(schema.fieldNames());
    for (DatasetSpec.Feature f : spec.features()) {
      StructField field = field(schema, names, f.name(), "feature");
      DataType t = field.dataType();
      if (f.type() == DatasetSpec.ValueType.INT64) {
        DataType e = t instanceof ArrayType ? ((ArrayType) t).elementType() : t;
        if (!integral(e)) {
          throw new IllegalArgumentException(
              "Feature column '"
                  + f.name()
                  + "' has type "
                  + t.simpleString()
                  + ": declared "
                  + (f.sequence() ? "a sequence of int64 ids" : "int64")
                  + ", expected int or bigint"
                  + (f.sequence() ? ", or an array of them" : " (or an array of them)"));
        }
        continue;
      }
      boolean ok =
          f.encoding() == DatasetSpec.Encoding.IMAGE
              ? t.typeName().equals("binary")
              : t instanceof NumericType
                  || t instanceof BooleanType
                  || (t instanceof ArrayType
                      && ((ArrayType) t).elementType() instanceof NumericType)
                  || t.getClass().getName().equals("org.apache.spark.ml.linalg.VectorUDT");
      if (!ok) {
        throw new IllegalArgumentException(
            "Feature column '"
                + f.name()
                + "' has type "
                + t.simpleString()
                + (f.encoding() == DatasetSpec.Encoding.IMAGE
                    ? ": expected binary (encoded images)"
                    : ": expected a number, an array of numbers or an ml Vector"));
      }
    }
    if (spec.label() != null) {
      DataType t = field(schema, names, spec.label(), "label").dataType();
      if (!(t instanceof NumericType) && !(t instanceof BooleanType)) {
        throw new IllegalArgumentException(
            "Label column '"
                + spec.label()
                + "' has type "
                + t.simpleString()
                + ": expected a number");
      }
    }
  }

  /** Whether {@code t} is an integer type (tinyint, smallint, int, bigint): int64 features. */
  private static boolean integral(DataType t) {
    return t instanceof IntegerType
        || t instanceof LongType
        || t instanceof ShortType
        || t instanceof ByteType;
  }

  private static StructField field(
      StructType schema, List<String> names, String name, String what) {
    if (!names.contains(name)) {
      throw new IllegalArgumentException(
          "No "
              + what
              + " column '"
              + name
              + "' in the DataFrame (columns: "
              + String.join(", ", names)
              + ")");
    }
    return schema.apply(name);
  }

  /** TFRECORD or PARQUET if the plan only reads files (and picks columns), else null. */
  static DatasetSpec.Format plainScanFormat(LogicalPlan plan, DatasetSpec columns) {
    LogicalPlan p = plan;
    while (true) {
      if (p instanceof SubqueryAlias) {
        p = ((SubqueryAlias) p).child();
      } else if (p instanceof Project) {
        for (NamedExpression e : CollectionConverters.asJava(((Project) p).projectList())) {
          if (!(e instanceof AttributeReference)) {
            return null;
          }
        }
        p = ((Project) p).child();
      } else {
        break;
      }
    }
    if (p instanceof LogicalRelation
        && ((LogicalRelation) p).relation() instanceof HadoopFsRelation) {
      HadoopFsRelation r = (HadoopFsRelation) ((LogicalRelation) p).relation();
      if (r.partitionSchema().nonEmpty()) {
        return null; // partition values live in paths, not in the files
      }
      String format = r.fileFormat().getClass().getSimpleName();
      if (format.equals("ParquetFileFormat")) {
        return DatasetSpec.Format.PARQUET;
      }
      if (format.equals("TFRecordFileFormat")
          && plainTfRecordOptions(CollectionConverters.asJava(r.options()))) {
        return DatasetSpec.Format.TFRECORD;
      }
      return null;
    }
    if (p instanceof DataSourceV2Relation) {
      DataSourceV2Relation r = (DataSourceV2Relation) p;
      String table = r.table().getClass().getSimpleName();
      if (r.table().partitioning().length > 0) {
        return null;
      }
      if (table.equals("ParquetTable")) {
        return DatasetSpec.Format.PARQUET;
      }
      if (table.equals("TFRecordTable") && plainTfRecordOptions(r.options().asCaseSensitiveMap())) {
        return DatasetSpec.Format.TFRECORD;
      }
    }
    return null;
  }

  private static boolean plainTfRecordOptions(Map<String, String> options) {
    for (String k : options.keySet()) {
      String key = k.toLowerCase(Locale.ROOT);
      if (key.equals("recordtype") && !options.get(k).equalsIgnoreCase("Example")) {
        return false;
      }
      if (key.equals("compression") || key.equals("codec")) {
        return false;
      }
    }
    return true;
  }
}
