package dev.sparktrainer.train;

import java.io.Serializable;
import java.util.Locale;

/**
 * One start of training from a checkpoint rather than from scratch: a Spark stage retry after a
 * failed task, or the same job submitted again. Recorded by rank 0 in the history (and in every
 * later checkpoint, so a run resumed twice lists both).
 *
 * @param step the global step of the checkpoint training resumed from (steps before it were not redone)
 * @param epoch the 0-based epoch it resumed in
 * @param stepInEpoch steps of that epoch already done
 * @param stageAttempt Spark's stage attempt number of the barrier stage that resumed (0: a new job
 *     that found a checkpoint, e.g. a rerun of the same command; above 0: Spark retried the stage)
 * @param checkpoint the checkpoint's directory
 */
public record Resume(long step, int epoch, long stepInEpoch, int stageAttempt, String checkpoint)
    implements Serializable {

  /** A JSON object: {@code step}, {@code epoch}, {@code step_in_epoch}, {@code stage_attempt}, {@code checkpoint}. */
  public String toJson() {
    return String.format(Locale.ROOT,
        "{\"step\": %d, \"epoch\": %d, \"step_in_epoch\": %d, \"stage_attempt\": %d, \"checkpoint\": \"%s\"}",
        step, epoch, stepInEpoch, stageAttempt, checkpoint.replace("\\", "\\\\").replace("\"", "\\\""));
  }
}
