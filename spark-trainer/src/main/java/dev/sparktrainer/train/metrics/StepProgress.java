package dev.sparktrainer.train.metrics;

import java.io.Serializable;

/**
 * Where training is, as rank 0 sees it after a step.
 *
 * @param epoch 0-based epoch
 * @param epochs the job's epochs
 * @param step steps done in this epoch (1 after its first step)
 * @param stepsPerEpoch steps per epoch
 * @param globalStep global steps done since the job started (resumed attempts included)
 * @param loss rank 0's loss on the last batch
 * @param epochLoss rank 0's mean loss over the epoch so far
 * @param samplesPerSecond global training throughput of this epoch so far (rank 0's batches x N)
 * @param learningRate the learning rate of the last update
 * @param epochSeconds wall time since the epoch started (or resumed)
 * @param numWorkers N
 * @param imagesPerSecond global images/s of this epoch so far ({@code samplesPerSecond} times the
 *     image columns); NaN without image columns
 * @param decodeMillisPerImage rank 0's input pipeline: wall time a decoding thread spent per image
 *     in this epoch so far; NaN without image columns or decoded images
 */
public record StepProgress(
    int epoch,
    int epochs,
    long step,
    long stepsPerEpoch,
    long globalStep,
    double loss,
    double epochLoss,
    double samplesPerSecond,
    double learningRate,
    double epochSeconds,
    int numWorkers,
    double imagesPerSecond,
    double decodeMillisPerImage)
    implements Serializable {

  /** Progress of a run without image columns. */
  public StepProgress(
      int epoch,
      int epochs,
      long step,
      long stepsPerEpoch,
      long globalStep,
      double loss,
      double epochLoss,
      double samplesPerSecond,
      double learningRate,
      double epochSeconds,
      int numWorkers) {
    this(
        epoch,
        epochs,
        step,
        stepsPerEpoch,
        globalStep,
        loss,
        epochLoss,
        samplesPerSecond,
        learningRate,
        epochSeconds,
        numWorkers,
        Double.NaN,
        Double.NaN);
  }
}
