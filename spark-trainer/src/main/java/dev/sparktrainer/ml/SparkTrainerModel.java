package dev.sparktrainer.ml;

import dev.sparktrainer.train.History;
import dev.sparktrainer.train.TrainedModel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.apache.hadoop.fs.Path;
import org.apache.spark.ml.Model;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.param.ParamValidators;
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
public final class SparkTrainerModel extends Model<SparkTrainerModel> implements MLWritable {
  private static final long serialVersionUID = 1L;

  private final String uid;
  private final TrainedModel trained;
  final Param<String> featuresCol;
  final Param<String> predictionCol;
  final Param<String> probabilityCol;
  final Param<String> rawPredictionCol;
  final IntParam inferenceBatchSize;

  /**
   * A model for {@code trained}, with default column names ({@code features}, {@code prediction},
   * ...).
   */
  public SparkTrainerModel(String uid, TrainedModel trained) {
    this.uid = uid;
    this.trained = trained;
    featuresCol =
        new Param<>(
            this, "featuresCol", "features column: an ml Vector, an array of numbers or a number");
    predictionCol = new Param<>(this, "predictionCol", "prediction column name");
    probabilityCol =
        new Param<>(this, "probabilityCol", "class probabilities column name (empty: none)");
    rawPredictionCol =
        new Param<>(this, "rawPredictionCol", "raw model outputs column name (empty: none)");
    inferenceBatchSize =
        new IntParam(
            this, "inferenceBatchSize", "rows per batch in transform", ParamValidators.gtEq(1));
    setDefault(featuresCol, "features");
    setDefault(predictionCol, "prediction");
    setDefault(probabilityCol, "probability");
    setDefault(rawPredictionCol, "rawPrediction");
    setDefault(inferenceBatchSize, 256);
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

  public Param<String> featuresCol() {
    return featuresCol;
  }

  public Param<String> predictionCol() {
    return predictionCol;
  }

  public Param<String> probabilityCol() {
    return probabilityCol;
  }

  public Param<String> rawPredictionCol() {
    return rawPredictionCol;
  }

  public IntParam inferenceBatchSize() {
    return inferenceBatchSize;
  }

  public SparkTrainerModel setFeaturesCol(String v) {
    set(featuresCol, v);
    return this;
  }

  public SparkTrainerModel setPredictionCol(String v) {
    set(predictionCol, v);
    return this;
  }

  public SparkTrainerModel setProbabilityCol(String v) {
    set(probabilityCol, v);
    return this;
  }

  public SparkTrainerModel setRawPredictionCol(String v) {
    set(rawPredictionCol, v);
    return this;
  }

  public SparkTrainerModel setInferenceBatchSize(int v) {
    set(inferenceBatchSize, v);
    return this;
  }

  @Override
  public Dataset<Row> transform(Dataset<?> dataset) {
    return BatchInference.transform(
        dataset.toDF(),
        trained,
        List.of(getOrDefault(featuresCol)),
        intParam(inferenceBatchSize),
        getOrDefault(predictionCol),
        emptyToNull(getOrDefault(probabilityCol)),
        emptyToNull(getOrDefault(rawPredictionCol)));
  }

  @Override
  public StructType transformSchema(StructType schema) {
    return BatchInference.outputSchema(
        schema,
        trained,
        List.of(getOrDefault(featuresCol)),
        getOrDefault(predictionCol),
        emptyToNull(getOrDefault(probabilityCol)),
        emptyToNull(getOrDefault(rawPredictionCol)));
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
