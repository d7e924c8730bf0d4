package dev.sparktrainer.train.elastic;

import java.util.Locale;

/**
 * What a resume on another number of workers keeps (the trainer's {@code optRescale}, the command
 * line's {@code --rescale}).
 */
public enum Rescale {
  /**
   * The global batch (batch x accumulation x workers): the per-worker batch and the accumulation
   * are chosen so that their product times the new worker count matches; the training is the same
   * sequence of optimizer steps. Refused, naming the options, when no choice matches.
   */
  GLOBAL_BATCH,
  /**
   * The per-worker batch and accumulation as configured; the learning rate is multiplied by the
   * ratio of the new global batch to the checkpoint's (the linear scaling rule).
   */
  LEARNING_RATE;

  /** {@code batch} or {@code lr} (the command line's values), or the constant's name. */
  public static Rescale parse(String option, String value) {
    String v = value.trim().toLowerCase(Locale.ROOT);
    if (v.equals("batch") || v.equals("global_batch")) {
      return GLOBAL_BATCH;
    }
    if (v.equals("lr") || v.equals("learning_rate")) {
      return LEARNING_RATE;
    }
    throw new IllegalArgumentException(
        "Invalid " + option + " '" + value + "': expected batch or lr");
  }
}
