package dev.sparktrainer.ml;

import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.metrics.History;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.apache.hadoop.fs.Path;
import org.apache.spark.ml.Model;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.DefaultParamsReader$;
import org.apache.spark.ml.util.DefaultParamsWriter$;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.ml.util.MLWritable;
import org.apache.spark.ml.util.MLWriter;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * The trained model as a Spark ML Transformer: {@code transform} is distributed batch inference
 * ({@link BatchInference}: the model broadcast once, built once per executor, rows run in batches
 * of {@code inferenceBatchSize}), adding {@code predictionCol}, {@code probabilityCol}
 * (classification) and {@code rawPredictionCol} (empty name: left out).
 *
 * <p>{@code write().save(path)} writes Spark ML's metadata (the Params) and the model under {@code
 * path/model} ({@link TrainedModel#save}), so {@code PipelineModel.load} and {@link #load} restore
 * it without user code.
 */
public final class SparkTrainerModel extends Model<SparkTrainerModel>
    implements MLWritable, SharedParams<SparkTrainerModel> {
  private static final long serialVersionUID = 1L;

  private final String uid;
  private final TrainedModel trained;
  private final SharedParams.Holder shared;

  /**
   * A model for {@code trained}, with default column names ({@code features}, {@code prediction},
   * ...).
   */
  public SparkTrainerModel(String uid, TrainedModel trained) {
    this.uid = uid;
    this.trained = trained;
    this.shared = new SharedParams.Holder(this);
  }

  @Override
  public String uid() {
    return uid;
  }

  /** The trained network, its spec and loss. */
  public TrainedModel trainedModel() {
    return trained;
  }

  /** The training history (empty for a model loaded from disk). */
  public History history() {
    return trained.history();
  }

  @Override
  public SharedParams.Holder sharedParams() {
    return shared;
  }

  @Override
  public Dataset<Row> transform(Dataset<?> dataset) {
    return BatchInference.transform(
        dataset.toDF(),
        trained,
        List.of(getOrDefault(featuresCol())),
        intParam(inferenceBatchSize()),
        getOrDefault(predictionCol()),
        emptyToNull(getOrDefault(probabilityCol())),
        emptyToNull(getOrDefault(rawPredictionCol())));
  }

  @Override
  public StructType transformSchema(StructType schema) {
    return BatchInference.outputSchema(
        schema,
        trained,
        List.of(getOrDefault(featuresCol())),
        getOrDefault(predictionCol()),
        emptyToNull(getOrDefault(probabilityCol())),
        emptyToNull(getOrDefault(rawPredictionCol())));
  }

  private static String emptyToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  @Override
  public SparkTrainerModel copy(ParamMap extra) {
    SparkTrainerModel m = copyValues(new SparkTrainerModel(uid, trained), extra);
    return m.setParent(parent());
  }

  @Override
  public MLWriter write() {
    return new Writer(this);
  }

  /** Reads a model saved with {@code write().save(path)}. */
  public static MLReader<SparkTrainerModel> read() {
    return new Reader();
  }

  public static SparkTrainerModel load(String path) {
    return read().load(path);
  }

  private static final class Writer extends MLWriter {
    private final SparkTrainerModel model;

    Writer(SparkTrainerModel model) {
      this.model = model;
    }

    @Override
    public void saveImpl(String path) {
      DefaultParamsWriter$.MODULE$.saveMetadata(
          model, path, sc(), scala.Option.empty(), scala.Option.empty());
      try {
        model.trained.save(new Path(path, "model").toString(), sc().hadoopConfiguration());
      } catch (IOException e) {
        throw new UncheckedIOException(
            "Cannot save the model to " + path + ": " + e.getMessage(), e);
      }
    }
  }

  private static final class Reader extends MLReader<SparkTrainerModel> {
    @Override
    public SparkTrainerModel load(String path) {
      DefaultParamsReader.Metadata metadata =
          DefaultParamsReader$.MODULE$.loadMetadata(path, sc(), SparkTrainerModel.class.getName());
      TrainedModel trained;
      try {
        trained = TrainedModel.load(new Path(path, "model").toString(), sc().hadoopConfiguration());
      } catch (IOException e) {
        throw new UncheckedIOException(
            "Cannot load the model from " + path + ": " + e.getMessage(), e);
      }
      SparkTrainerModel m = new SparkTrainerModel(metadata.uid(), trained);
      metadata.getAndSetParams(m, scala.Option.empty());
      return m;
    }
  }

  private int intParam(IntParam p) {
    Object v = getOrDefault(p);
    return ((Number) v).intValue();
  }
}
