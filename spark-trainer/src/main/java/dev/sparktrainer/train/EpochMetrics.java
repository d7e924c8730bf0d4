package dev.sparktrainer.train;

import java.io.Serializable;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * What one epoch did, reduced over all workers. Times are per worker, averaged over workers; their
 * sum is close to {@code seconds} minus validation and checkpoint time. Validation values are NaN
 * without validation data, accuracies NaN for regression losses.
 *
 * @param epoch 0-based epoch
 * @param steps synchronous steps in the epoch (this attempt's, after a resume mid-epoch: all of them)
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
 * @param communicationSeconds time the gradient all-reduce ran (on the communication thread), hidden
 *     or not: {@code communicationSeconds - allReduceSeconds} is what overlap hid behind backward
 * @param parameterHash SHA-256 of all parameters after the epoch, identical on every replica
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
    String parameterHash)
    implements Serializable {

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
    return JsonText.write(o);
  }
}
