package dev.sparktrainer.train.metrics;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import java.io.Serializable;
import java.util.List;

/**
 * One start of training that found checkpoints: from the newest one that verified — a Spark stage
 * retry after a failed task, or the same job submitted again — or, when every one was skipped as
 * corrupt, from scratch ({@link #fromScratch()}). Recorded by rank 0 in the history (and in every
 * later checkpoint, so a run resumed twice lists both).
 *
 * @param step the global step of the checkpoint training resumed from (steps before it were not
 *     redone); 0 when it started from scratch (checkpoints are only written after a step)
 * @param epoch the 0-based epoch it resumed in
 * @param stepInEpoch steps of that epoch already done
 * @param stageAttempt Spark's stage attempt number of the barrier stage that resumed (0: a new job
 *     that found a checkpoint, e.g. a rerun of the same command; above 0: Spark retried the stage)
 * @param checkpoint the checkpoint's directory
 * @param skipped the newer checkpoints passed over, newest first, each with the reason (provably
 *     corrupt, or deleted while being read); empty when the newest one verified
 * @param workers how the resume adapted a checkpoint of another worker count; null when the count
 *     did not change
 */
public record Resume(
    long step,
    int epoch,
    long stepInEpoch,
    int stageAttempt,
    String checkpoint,
    List<SkippedCheckpoint> skipped,
    WorkerCountChange workers)
    implements Serializable {

  /** Copies {@code skipped}. */
  public Resume {
    skipped = List.copyOf(skipped);
  }

  /** A resume on the checkpoint's worker count. */
  public Resume(
      long step,
      int epoch,
      long stepInEpoch,
      int stageAttempt,
      String checkpoint,
      List<SkippedCheckpoint> skipped) {
    this(step, epoch, stepInEpoch, stageAttempt, checkpoint, skipped, null);
  }

  /** A resume from the newest checkpoint, none skipped. */
  public Resume(long step, int epoch, long stepInEpoch, int stageAttempt, String checkpoint) {
    this(step, epoch, stepInEpoch, stageAttempt, checkpoint, List.of());
  }

  /** Whether every checkpoint in the directory was skipped and training started from step 0. */
  public boolean fromScratch() {
    return step == 0 && !skipped.isEmpty();
  }

  /**
   * A JSON object: {@code step}, {@code epoch}, {@code step_in_epoch}, {@code stage_attempt},
   * {@code checkpoint}, {@code from_scratch}, {@code skipped} (an array of {@code {"file",
   * "reason"}}), and {@code workers} ({@link WorkerCountChange#toJson}) when the worker count
   * changed.
   */
  public String toJson() {
    ObjectNode o = JsonText.MAPPER.createObjectNode();
    o.put("step", step);
    o.put("epoch", epoch);
    o.put("step_in_epoch", stepInEpoch);
    o.put("stage_attempt", stageAttempt);
    o.put("checkpoint", checkpoint);
    o.put("from_scratch", fromScratch());
    ArrayNode s = o.putArray("skipped");
    for (SkippedCheckpoint k : skipped) {
      s.addObject().put("file", k.file()).put("reason", k.reason());
    }
    if (workers != null) {
      ObjectNode w = o.putObject("workers");
      w.put("from_workers", workers.fromWorkers());
      w.put("to_workers", workers.toWorkers());
      w.put("batch_size", workers.batchSize());
      w.put("accumulate_steps", workers.accumulateSteps());
      w.put("global_batch", workers.globalBatch());
      JsonText.put(w, "lr_scale", workers.learningRateScale());
      w.put("epoch_restarted", workers.epochRestarted());
    }
    return JsonText.write(o);
  }
}
