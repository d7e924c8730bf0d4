package dev.sparktrainer.train.job;

import dev.sparktrainer.data.DataFrameInput;
import dev.sparktrainer.data.FeatureStatistics;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.input.DataInput;
import dev.sparktrainer.train.input.DatasetSource;
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;

/**
 * The driver's work on the input before any task starts: data given as files or a DataFrame is
 * resolved into planned splits (a DataFrame that is not a plain file scan is staged as Parquet
 * first), and the normalization is fitted on the training data. Closing it deletes what it staged;
 * a leftover staging directory is logged, never allowed to replace the training's own outcome.
 */
public final class InputStaging implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(InputStaging.class.getName());

  private final List<DataFrameInput> staged = new ArrayList<>();

  /**
   * {@code cfg} with its training and validation data resolved; either input may be null (the
   * configuration already holds a ready {@code BatchSourceFactory}).
   *
   * @param stagingDir where DataFrames are staged; null: {@link #defaultStagingDir}
   * @param outputDir the model's output directory, or null
   */
  public TrainingConfig resolve(
      SparkSession spark,
      TrainingConfig cfg,
      DataInput train,
      DataInput validation,
      String stagingDir,
      String outputDir) {
    Configuration hadoopConf = spark.sparkContext().hadoopConfiguration();
    String dir =
        stagingDir != null
            ? stagingDir
            : defaultStagingDir(cfg.checkpoints().dir(), outputDir, hadoopConf);
    if ((train != null && train.needsStaging())
        || (validation != null && validation.needsStaging())) {
      Preflight.checkStaging(spark.sparkContext().master(), dir, stagingDir != null, hadoopConf);
    }
    TrainingConfig.Data data = cfg.data();
    if (train != null) {
      data = data.withTrain(train.resolve(spark, dir, staged, true));
    }
    if (validation != null) {
      data = data.withValidation(validation.resolve(spark, dir, staged, false));
    }
    return cfg.withData(data);
  }

  /**
   * Where DataFrames are staged when no staging directory was given: under the checkpoint
   * directory, or next to the output directory (the model replaces that directory as a whole), when
   * it is on a shared file system every executor reads; otherwise the local temp directory, which
   * only a local master can use (pre-flight refuses it on a cluster).
   */
  public static String defaultStagingDir(
      String checkpointDir, String outputDir, Configuration conf) {
    if (checkpointDir != null && Preflight.onSharedFileSystem(checkpointDir, conf)) {
      return new Path(checkpointDir, "_staging").toString();
    }
    if (outputDir != null && Preflight.onSharedFileSystem(outputDir, conf)) {
      Path out = new Path(outputDir);
      if (out.getParent() != null) {
        return new Path(out.getParent(), "_staging-" + out.getName()).toString();
      }
    }
    return new File(System.getProperty("java.io.tmpdir"), "spark-trainer-staging")
        .toURI()
        .toString();
  }

  /** A configuration whose data is normalized, and the normalization (null: none). */
  public record Normalized(TrainingConfig config, Normalization normalization) {}

  /**
   * Fits the normalization on the training data only (one distributed pass over its planned splits)
   * and applies it to the training and validation batches alike.
   */
  public static Normalized normalize(
      SparkSession spark, TrainingConfig cfg, Normalization.Mode mode) {
    if (mode == Normalization.Mode.NONE) {
      return new Normalized(cfg, null);
    }
    DatasetSource trainData = (DatasetSource) cfg.data().train();
    Normalization n = Normalization.of(mode, FeatureStatistics.compute(trainData.plan(), spark));
    TrainingConfig.Data data = cfg.data().withTrain(trainData.withNormalization(n));
    if (data.validation() instanceof DatasetSource v) {
      data = data.withValidation(v.withNormalization(n));
    }
    return new Normalized(cfg.withData(data), n);
  }

  @Override
  public void close() {
    for (DataFrameInput in : staged) {
      try {
        in.close();
      } catch (IOException e) {
        // Keep the training result (or its failure); a leftover staging directory is only logged.
        LOG.log(
            System.Logger.Level.WARNING,
            "Could not delete the staging directory: " + e.getMessage());
      }
    }
    staged.clear();
  }
}
