package dev.sparktrainer.ml;

import dev.sparktrainer.train.TrainerOption;
import java.io.Serializable;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.param.Params;

/**
 * The Params that {@link SparkTrainerEstimator} and {@link SparkTrainerModel} share, each defined
 * once (name, doc, validator, default): the features column and what {@code transform} writes and
 * reads in batches of. Spark ML's shared-Params traits ({@code HasFeaturesCol}, ...) as a Java
 * interface: the Param objects live in a {@link Holder} each stage makes in its constructor, and
 * Spark ML finds them through the accessors below (public methods returning a Param). The Estimator
 * copies their values to the Model it fits.
 *
 * @param <T> the stage, which the setters return
 */
public interface SharedParams<T extends SharedParams<T>> extends Params {
  /** This stage's shared Param objects, made once in its constructor ({@code new Holder(this)}). */
  Holder sharedParams();

  /** Features column: an ml Vector, an array of numbers or a number. Default {@code features}. */
  default Param<String> featuresCol() {
    return sharedParams().featuresCol;
  }

  /** Prediction column written by {@code transform}. Default {@code prediction}. */
  default Param<String> predictionCol() {
    return sharedParams().predictionCol;
  }

  /** Class probabilities column (empty: left out). Default {@code probability}. */
  default Param<String> probabilityCol() {
    return sharedParams().probabilityCol;
  }

  /** Raw model outputs (logits) column (empty: left out). Default {@code rawPrediction}. */
  default Param<String> rawPredictionCol() {
    return sharedParams().rawPredictionCol;
  }

  /** Rows per batch in {@code transform}. Default 256. */
  default IntParam inferenceBatchSize() {
    return sharedParams().inferenceBatchSize;
  }

  default T setFeaturesCol(String v) {
    return self(set(featuresCol(), v));
  }

  default T setPredictionCol(String v) {
    return self(set(predictionCol(), v));
  }

  default T setProbabilityCol(String v) {
    return self(set(probabilityCol(), v));
  }

  default T setRawPredictionCol(String v) {
    return self(set(rawPredictionCol(), v));
  }

  default T setInferenceBatchSize(int v) {
    return self(set(inferenceBatchSize(), v));
  }

  @SuppressWarnings("unchecked")
  private T self(Params p) {
    return (T) p;
  }

  /** The shared Param objects of one stage, owned by it (their parent is its uid). */
  final class Holder implements Serializable {
    private static final long serialVersionUID = 1L;

    final Param<String> featuresCol;
    final Param<String> predictionCol;
    final Param<String> probabilityCol;
    final Param<String> rawPredictionCol;
    final IntParam inferenceBatchSize;

    /** Defines the Params for {@code owner} (whose uid is set) and sets their defaults there. */
    Holder(SharedParams<?> owner) {
      featuresCol =
          new Param<>(
              owner,
              "featuresCol",
              "features column: an ml Vector, an array of numbers or a number");
      predictionCol = new Param<>(owner, "predictionCol", "prediction column name");
      probabilityCol =
          new Param<>(owner, "probabilityCol", "class probabilities column name (empty: none)");
      rawPredictionCol =
          new Param<>(
              owner, "rawPredictionCol", "raw model outputs (logits) column name (empty: none)");
      inferenceBatchSize =
          new IntParam(
              owner, "inferenceBatchSize", "rows per batch in transform", ParamValidators.gtEq(1));
      owner.setDefault(featuresCol, TrainerOption.FEATURES.stringDefault());
      owner.setDefault(predictionCol, "prediction");
      owner.setDefault(probabilityCol, "probability");
      owner.setDefault(rawPredictionCol, "rawPrediction");
      owner.setDefault(inferenceBatchSize, 256);
    }
  }
}
