package dev.sparktrainer.model;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.training.loss.L2Loss;
import ai.djl.training.loss.Loss;
import ai.djl.training.loss.SigmoidBinaryCrossEntropyLoss;
import ai.djl.training.loss.SoftmaxCrossEntropyLoss;
import java.util.Locale;

/**
 * The training losses. Each is the mean over the batch, so averaging the replicas' gradients gives
 * the gradient of the mean over the global batch.
 */
public enum LossSpec {
  /** Softmax cross-entropy over logits {@code [B, classes]}, labels {@code [B]} class indices. */
  SOFTMAX_CROSS_ENTROPY,
  /** Sigmoid binary cross-entropy over logits {@code [B, 1]} or {@code [B]}, labels 0/1. */
  SIGMOID_BINARY_CROSS_ENTROPY,
  /** Half squared error, {@code 0.5 (y - p)^2}, predictions {@code [B, 1]} or {@code [B]}. */
  L2;

  /** The DJL loss. */
  public Loss newLoss() {
    switch (this) {
      case SOFTMAX_CROSS_ENTROPY:
        return new SoftmaxCrossEntropyLoss();
      case SIGMOID_BINARY_CROSS_ENTROPY:
        return new SigmoidBinaryCrossEntropyLoss();
      case L2:
        return new L2Loss();
      default:
        throw new AssertionError(this);
    }
  }

  /** Whether {@link #correct} means something (classification). */
  public boolean hasAccuracy() {
    return this != L2;
  }

  /**
   * The batch-mean loss (a scalar), after bringing labels to the form the loss expects (class
   * indices for softmax, float32 in the predictions' shape otherwise).
   */
  public NDArray evaluate(Loss loss, NDArray labels, NDArray predictions) {
    return loss.evaluate(new NDList(prepareLabels(labels, predictions)), new NDList(predictions));
  }

  /** Correct predictions in the batch (0 for {@link #L2}). */
  public long correct(NDArray labels, NDArray predictions) {
    switch (this) {
      case SOFTMAX_CROSS_ENTROPY:
        try (NDArray pred = predictions.argMax(1);
            NDArray lab = labels.toType(DataType.INT64, false);
            NDArray eq = pred.eq(lab);
            NDArray sum = eq.sum()) {
          return sum.toType(DataType.INT64, false).getLong();
        }
      case SIGMOID_BINARY_CROSS_ENTROPY:
        try (NDArray p = predictions.reshape(-1).gt(0f);
            NDArray l = labels.toType(DataType.FLOAT32, false).reshape(-1).gt(0.5f);
            NDArray eq = p.eq(l);
            NDArray sum = eq.sum()) {
          return sum.toType(DataType.INT64, false).getLong();
        }
      default:
        return 0;
    }
  }

  private NDArray prepareLabels(NDArray labels, NDArray predictions) {
    if (this == SOFTMAX_CROSS_ENTROPY) {
      return labels;
    }
    NDArray l =
        labels.getDataType() == DataType.FLOAT32 ? labels : labels.toType(DataType.FLOAT32, false);
    return l.getShape().equals(predictions.getShape()) ? l : l.reshape(predictions.getShape());
  }

  /** Parses a name such as {@code softmax_cross_entropy} or {@code l2} (any case). */
  public static LossSpec parse(String s) {
    try {
      return valueOf(s.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "Invalid loss '"
              + s
              + "': expected softmax_cross_entropy, sigmoid_binary_cross_entropy or l2",
          e);
    }
  }
}
