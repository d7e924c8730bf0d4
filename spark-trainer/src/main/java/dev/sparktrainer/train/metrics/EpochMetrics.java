package dev.sparktrainer.train.metrics;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.Serializable;

/**
 * What one epoch did, reduced over all workers. Times are per worker, averaged over workers; their
 * sum is close to {@code seconds} minus validation and checkpoint time. Validation values are NaN
 * without validation data, accuracies NaN for regression losses.
 *
 * @param epoch 0-based epoch
 * @param steps synchronous steps in the epoch (this attempt's, after a resume mid-epoch: all of
 *     them)
 * @param samples training examples over all workers
 * @param loss mean training loss over the epoch's examples
 * @param accuracy training accuracy
 * @param validationLoss mean validation loss
 * @param validationAccuracy validation accuracy
 * @param seconds wall time of the epoch (slowest worker), validation included
 * @param samplesPerSecond global training throughput: samples / training wall time
 * @param dataWaitSeconds time waiting for the input pipeline
 * @param computeSeconds forward and backward passes
 * @param allReduceSeconds exposed communication: time the training thread waited for the gradient
 *     all-reduce (all of it without overlap; what backward did not hide with it)
 * @param optimizerSeconds optimizer step and writing the parameters back
 * @param backwardSeconds the backward part of {@code computeSeconds}
 * @param communicationSeconds time the gradient all-reduce ran (on the communication thread),
 *     hidden or not: {@code communicationSeconds - allReduceSeconds} is what overlap hid behind
 *     backward
 * @param parameterHash SHA-256 of all parameters after the epoch, identical on every replica
 * @param regression MSE, MAE and R² of a regression loss ({@code l2}); null for classification
 * @param images images/s and decode time per image of a run with image columns; null without
 */
public record EpochMetrics(
    int epoch,
    long steps,
    long samples,
    double loss,
    double accuracy,
    double validationLoss,
    double validationAccuracy,
    double seconds,
    double samplesPerSecond,
    double dataWaitSeconds,
    double computeSeconds,
    double allReduceSeconds,
    double optimizerSeconds,
    double backwardSeconds,
    double communicationSeconds,
    String parameterHash,
    Regression regression,
    Images images)
    implements Serializable {

  /** The metrics of a run without image columns (no {@link Images}). */
  public EpochMetrics(
      int epoch,
      long steps,
      long samples,
      double loss,
      double accuracy,
      double validationLoss,
      double validationAccuracy,
      double seconds,
      double samplesPerSecond,
      double dataWaitSeconds,
      double computeSeconds,
      double allReduceSeconds,
      double optimizerSeconds,
      double backwardSeconds,
      double communicationSeconds,
      String parameterHash,
      Regression regression) {
    this(
        epoch,
        steps,
        samples,
        loss,
        accuracy,
        validationLoss,
        validationAccuracy,
        seconds,
        samplesPerSecond,
        dataWaitSeconds,
        computeSeconds,
        allReduceSeconds,
        optimizerSeconds,
        backwardSeconds,
        communicationSeconds,
        parameterHash,
        regression,
        null);
  }

  /** The metrics of a classification loss (no {@link Regression}). */
  public EpochMetrics(
      int epoch,
      long steps,
      long samples,
      double loss,
      double accuracy,
      double validationLoss,
      double validationAccuracy,
      double seconds,
      double samplesPerSecond,
      double dataWaitSeconds,
      double computeSeconds,
      double allReduceSeconds,
      double optimizerSeconds,
      double backwardSeconds,
      double communicationSeconds,
      String parameterHash) {
    this(
        epoch,
        steps,
        samples,
        loss,
        accuracy,
        validationLoss,
        validationAccuracy,
        seconds,
        samplesPerSecond,
        dataWaitSeconds,
        computeSeconds,
        allReduceSeconds,
        optimizerSeconds,
        backwardSeconds,
        communicationSeconds,
        parameterHash,
        null,
        null);
  }

  /**
   * The input pipeline's images of an epoch with image columns (encoded images decoded on the fly),
   * reduced over all workers.
   *
   * @param imagesPerSecond global images trained on per second ({@code samplesPerSecond} times the
   *     image columns)
   * @param decodeMillisPerImage wall time a decoding thread spent per image (decode, crop and
   *     resize, the copy), over every worker's decoded images; NaN when none was decoded (Parquet
   *     data, or all from the cache)
   */
  public record Images(double imagesPerSecond, double decodeMillisPerImage)
      implements Serializable {}

  /** Global images/s (NaN without image columns). */
  public double imagesPerSecond() {
    return images == null ? Double.NaN : images.imagesPerSecond();
  }

  /** Decode time per image in ms (NaN without image columns or decoded images). */
  public double decodeMillisPerImage() {
    return images == null ? Double.NaN : images.decodeMillisPerImage();
  }

  /**
   * Regression metrics over an epoch's examples, reduced over all workers: mean squared error
   * {@code mean((y - p)^2)} (twice the {@code l2} loss, which is half the squared error), mean
   * absolute error, and R² {@code 1 - SSE / SST}; validation values NaN without validation data, R²
   * NaN where every label is the same.
   */
  public record Regression(
      double mse,
      double mae,
      double r2,
      double validationMse,
      double validationMae,
      double validationR2)
      implements Serializable {
    /** Slots of the regression sums after (loss x samples, correct, samples) in the metric sums. */
    public static final int SUMS = 4;

    /**
     * Adds the sums of a batch — squared error, absolute error, label, label squared — to {@code
     * sums[at .. at + 3]}, in double precision on the host.
     */
    public static void addSums(float[] labels, float[] predictions, double[] sums, int at) {
      if (labels.length != predictions.length) {
        throw new IllegalArgumentException(
            labels.length + " labels but " + predictions.length + " predictions");
      }
      for (int i = 0; i < labels.length; i++) {
        double y = labels[i];
        double e = y - predictions[i];
        sums[at] += e * e;
        sums[at + 1] += Math.abs(e);
        sums[at + 2] += y;
        sums[at + 3] += y * y;
      }
    }

    /** {@code {mse, mae, r2}} of {@code n} examples from the sums at {@code at}; NaNs for none. */
    public static double[] of(double[] sums, int at, double n) {
      if (!(n > 0)) {
        return new double[] {Double.NaN, Double.NaN, Double.NaN};
      }
      double sst = sums[at + 3] - sums[at + 2] * sums[at + 2] / n;
      return new double[] {
        sums[at] / n, sums[at + 1] / n, sst > 0 ? 1 - sums[at] / sst : Double.NaN
      };
    }
  }

  /** Training mean squared error (NaN for classification). */
  public double mse() {
    return regression == null ? Double.NaN : regression.mse();
  }

  /** Training mean absolute error (NaN for classification). */
  public double mae() {
    return regression == null ? Double.NaN : regression.mae();
  }

  /** Training R² (NaN for classification). */
  public double r2() {
    return regression == null ? Double.NaN : regression.r2();
  }

  public double validationMse() {
    return regression == null ? Double.NaN : regression.validationMse();
  }

  public double validationMae() {
    return regression == null ? Double.NaN : regression.validationMae();
  }

  public double validationR2() {
    return regression == null ? Double.NaN : regression.validationR2();
  }

  /** Step time (wait + compute + all-reduce + optimizer), summed over the epoch. */
  public double stepSeconds() {
    return dataWaitSeconds + computeSeconds + allReduceSeconds + optimizerSeconds;
  }

  /**
   * Communication hidden behind backward, over what could have been hidden: {@code (communication -
   * exposed) / min(communication, backward)}; NaN when there was no communication.
   */
  public double overlapRatio() {
    double hidden = Math.max(0, communicationSeconds - allReduceSeconds);
    double limit = Math.min(communicationSeconds, backwardSeconds);
    return limit > 0 ? Math.min(1, hidden / limit) : Double.NaN;
  }

  /** One JSON object, on one line (Jackson; non-finite values are {@code null}). */
  public String toJson() {
    ObjectNode o = JsonText.MAPPER.createObjectNode();
    o.put("epoch", epoch);
    o.put("steps", steps);
    o.put("samples", samples);
    JsonText.put(o, "loss", loss);
    JsonText.put(o, "accuracy", accuracy);
    JsonText.put(o, "validation_loss", validationLoss);
    JsonText.put(o, "validation_accuracy", validationAccuracy);
    JsonText.put(o, "seconds", seconds);
    JsonText.put(o, "samples_per_s", samplesPerSecond);
    JsonText.put(o, "data_wait_s", dataWaitSeconds);
    JsonText.put(o, "compute_s", computeSeconds);
    JsonText.put(o, "allreduce_s", allReduceSeconds);
    JsonText.put(o, "optimizer_s", optimizerSeconds);
    JsonText.put(o, "backward_s", backwardSeconds);
    JsonText.put(o, "communication_s", communicationSeconds);
    o.put("parameter_hash", parameterHash);
    if (regression != null) {
      JsonText.put(o, "mse", mse());
      JsonText.put(o, "mae", mae());
      JsonText.put(o, "r2", r2());
      JsonText.put(o, "validation_mse", validationMse());
      JsonText.put(o, "validation_mae", validationMae());
      JsonText.put(o, "validation_r2", validationR2());
    }
    if (images != null) {
      JsonText.put(o, "images_per_s", imagesPerSecond());
      JsonText.put(o, "decode_ms_per_image", decodeMillisPerImage());
    }
    return JsonText.write(o);
  }
}
