package dev.sparktrainer.train.input;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.DataFrameInput;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.device.BatchSource;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Data given as files or a DataFrame, resolved into a {@link DatasetSource} when training starts.
 */
public final class DataInput {
  /** Placeholder until {@link #resolve}: never reaches a task. */
  public static final BatchSourceFactory PENDING =
      new BatchSourceFactory() {
        private static final long serialVersionUID = 1L;

        @Override
        public BatchSource create(int rank, int numWorkers, NDManager manager) {
          throw new IllegalStateException("data not resolved");
        }
      };

  private final DatasetSpec spec;
  private final Dataset<Row> frame;
  private final PipelineOptions options;

  public DataInput(DatasetSpec spec, Dataset<Row> frame, PipelineOptions options) {
    this.spec = spec;
    this.frame = frame;
    this.options = options;
  }

  /** The same data read with {@code transform} as its per-example map. */
  /** The feature columns (with their shapes) and the label. */
  public DatasetSpec spec() {
    return spec;
  }

  public DataInput withTransform(ExampleTransform transform) {
    return new DataInput(spec, frame, options.toBuilder().optTransform(transform).build());
  }

  /** Whether it is a DataFrame that {@link #resolve} writes to the staging directory. */
  public boolean needsStaging() {
    return frame != null && DataFrameInput.needsStaging(frame, spec);
  }

  /**
   * Plans the data on the driver (staging a DataFrame if needed; {@code staged} collects what to
   * delete).
   */
  public DatasetSource resolve(
      SparkSession spark, String stagingDir, List<DataFrameInput> staged, boolean training) {
    try {
      DatasetSpec files = spec;
      if (frame != null) {
        DataFrameInput in = DataFrameInput.of(frame, spec, stagingDir);
        staged.add(in);
        files = in.spec();
      }
      var plan = DatasetPlanner.plan(files, options, spark);
      return training
          ? DatasetSource.training(plan, options)
          : DatasetSource.evaluation(plan, options);
    } catch (IOException e) {
      throw new UncheckedIOException(
          "Cannot read the "
              + (training ? "training" : "validation")
              + " data "
              + spec.paths()
              + ": "
              + e.getMessage(),
          e);
    }
  }
}
