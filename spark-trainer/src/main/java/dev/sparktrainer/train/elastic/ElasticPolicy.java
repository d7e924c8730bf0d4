package dev.sparktrainer.train.elastic;

import java.util.ArrayList;
import java.util.List;

/**
 * The elastic layout policy, pure: which worker counts a job can run on, and how a state written by
 * one layout (workers x batch x accumulation) continues on another worker count. No communicator,
 * no logging: it returns a {@link Decision} whose explanation the caller logs, or whose refusal it
 * throws. It holds the single copy of the divisibility rule ({@link #keepsGlobalBatch}).
 *
 * @param batchSize the configured per-worker batch (0: the data does not tell it)
 * @param accumulateSteps the configured micro-batches per optimizer step
 * @param plannedWorkers the job's worker count as configured
 * @param minWorkers the fewest workers to go on with
 * @param scaleLearningRate {@code optRescale(LEARNING_RATE)}: keep the configured batch and scale
 *     the learning rate; false ({@code GLOBAL_BATCH}): keep the global batch
 * @param checkpointDir the checkpoint directory, named in explanations
 * @param data how this job's training data can continue an interrupted epoch
 */
public record ElasticPolicy(
    int batchSize,
    int accumulateSteps,
    int plannedWorkers,
    int minWorkers,
    boolean scaleLearningRate,
    String checkpointDir,
    DataOrder data) {

  /**
   * What the training data says about its order (see {@code BatchSourceFactory}).
   *
   * @param globalOrder the records not yet consumed can be dealt to another layout
   * @param replaysEpochs an epoch's order can be replayed to find the records a layout consumed
   * @param orderKey identifies the order (recorded in checkpoints)
   */
  public record DataOrder(boolean globalOrder, boolean replaysEpochs, String orderKey) {}

  /**
   * The layout a state was written with (or, for a fresh start on fewer workers, planned).
   *
   * @param workers its workers; 0 for a checkpoint of a version that did not record the layout
   * @param batchSize its per-worker batch
   * @param accumulateSteps its accumulation
   * @param learningRateScale its factor on the learning rate
   * @param epoch the epoch it stopped in
   * @param stepInEpoch the optimizer steps of that epoch done
   * @param orderKey the data order it was read in
   * @param fromCheckpoint written by a checkpoint (false: a fresh start's planned layout)
   */
  public record SavedLayout(
      int workers,
      int batchSize,
      int accumulateSteps,
      double learningRateScale,
      int epoch,
      long stepInEpoch,
      String orderKey,
      boolean fromCheckpoint) {}

  /** How the interrupted epoch goes on after a decision. */
  public enum Continuation {
    /** The state was not inside an epoch, or is continued as it is on the same layout. */
    AS_IS,
    /** A checkpoint without a layout: adopted as this job's layout, at its position. */
    OLDER_CHECKPOINT,
    /** The epoch continues with the records not yet consumed (data with a global order). */
    BY_RECORDS,
    /** The part the saved layout consumed becomes an earlier segment of the epoch (replays). */
    BY_SEGMENTS,
    /** The interrupted epoch starts over; the optimizer steps done are kept. */
    RESTART
  }

  /**
   * A decision.
   *
   * @param batchSize the per-worker batch to continue with
   * @param accumulateSteps the accumulation to continue with
   * @param learningRateScale the factor on the learning rate to continue with
   * @param continuation how the interrupted epoch goes on
   * @param changed the layout changed (a {@code WorkerCountChange} to record)
   * @param orderWarning why the epoch restarts because the data's order changed; null if it did not
   * @param explanation the change, in words (null when nothing changed); or, when {@code refused},
   *     why and what would work
   * @param refused no layout keeps this state on the new worker count
   */
  public record Decision(
      int batchSize,
      int accumulateSteps,
      double learningRateScale,
      Continuation continuation,
      boolean changed,
      String orderWarning,
      String explanation,
      boolean refused) {

    static Decision refusal(String orderWarning, String why) {
      return new Decision(0, 0, 0, Continuation.AS_IS, false, orderWarning, why, true);
    }
  }

  /**
   * The divisibility rule: {@code workers} keep the global batch {@code global} (batch x
   * accumulation x workers) when they divide it.
   */
  public static boolean keepsGlobalBatch(long global, int workers) {
    return global > 0 && global % workers == 0;
  }

  /**
   * The largest worker count up to {@code cap} (and at least {@code minWorkers}) the job can resume
   * on: with the global batch kept, one that divides it; 0 if none.
   */
  public int workersFor(int cap) {
    long global = (long) batchSize * accumulateSteps * plannedWorkers;
    for (int n = cap; n >= Math.max(1, minWorkers); n--) {
      if (n == plannedWorkers || scaleLearningRate || keepsGlobalBatch(global, n)) {
        return n;
      }
    }
    return 0;
  }

  /**
   * The layout to continue {@code saved} with on {@code size} workers. The saved one when it
   * matches this job (or is of a version that did not record it); on another worker count, the
   * per-worker batch and the accumulation that keep the global batch (the largest batch up to the
   * configured one that divides it) or the configured ones with the learning rate scaled. The
   * interrupted epoch continues with the records not yet consumed when the data has a global order,
   * by segments when it replays epochs in an unchanged order, and restarts otherwise.
   */
  public Decision decide(SavedLayout saved, int size) {
    int batch = batchSize;
    int k = accumulateSteps;
    if (saved.workers() == 0) { // an older checkpoint: written by this layout, as before
      return new Decision(batch, k, 1, Continuation.OLDER_CHECKPOINT, false, null, null, false);
    }
    boolean orderChanged = saved.stepInEpoch() > 0 && !data.orderKey().equals(saved.orderKey());
    String orderWarning = null;
    long stepInEpoch = saved.stepInEpoch();
    if (orderChanged) {
      // The rest of the epoch depends on the order it was read in so far, which this data's plan
      // or options no longer give: start the epoch over rather than guess. On the same layout too:
      // skipping the new order's first batches would train some records twice and others never,
      // and later checkpoints would record the new key for a plan they did not follow.
      orderWarning =
          "the interrupted epoch "
              + saved.epoch()
              + " restarts: its earlier part was read in an order this data no longer gives ("
              + saved.orderKey()
              + " then, "
              + data.orderKey()
              + " now)";
      stepInEpoch = 0;
    }
    if (saved.workers() == size && saved.batchSize() == batch && saved.accumulateSteps() == k) {
      return new Decision(
          batch,
          k,
          saved.learningRateScale(),
          orderChanged ? Continuation.RESTART : Continuation.AS_IS,
          false,
          orderWarning,
          null,
          false);
    }
    long global = (long) saved.batchSize() * saved.accumulateSteps() * saved.workers();
    // (A fresh start on fewer workers than planned has no parameters in its state yet.)
    String written =
        (!saved.fromCheckpoint()
                ? "The job is planned for "
                : "The checkpoint in " + checkpointDir + " was written by ")
            + saved.workers()
            + " workers x batch "
            + saved.batchSize()
            + " x "
            + saved.accumulateSteps()
            + " accumulated (global batch "
            + global
            + ")";
    double scale = saved.learningRateScale();
    if (saved.workers() != size && batch <= 0) {
      return Decision.refusal(
          orderWarning,
          written
              + "; resuming it on "
              + size
              + " workers needs the training"
              + " data's batch size, which its BatchSourceFactory does not tell (batchSize(), withBatchSize())");
    }
    if (saved.workers() != size && scaleLearningRate) {
      scale = saved.learningRateScale() * ((double) batch * k * size / global);
    } else if (saved.workers() != size) {
      if (!keepsGlobalBatch(global, size)) {
        List<Long> counts = new ArrayList<>();
        for (long n = 1; n <= global && counts.size() < 16; n++) {
          if (keepsGlobalBatch(global, (int) n)) {
            counts.add(n);
          }
        }
        return Decision.refusal(
            orderWarning,
            written
                + ": it cannot be kept on "
                + size
                + " workers ("
                + global
                + " is not a multiple of "
                + size
                + "). Options: resume on a worker count that divides "
                + global
                + " "
                + counts
                + (counts.size() == 16 ? "..." : "")
                + ", or keep the per-worker batch and scale the learning"
                + " rate instead (--rescale lr, optRescale(Rescale.LEARNING_RATE): batch "
                + batch
                + " x "
                + k
                + " on "
                + size
                + " workers, global "
                + (long) batch * k * size
                + ")");
      }
      long perWorker = global / size;
      int b = (int) Math.min(batch, perWorker);
      while (perWorker % b != 0) {
        b--;
      }
      batch = b;
      k = (int) (perWorker / b);
    }
    boolean restart = orderChanged;
    Continuation continuation = orderChanged ? Continuation.RESTART : Continuation.AS_IS;
    if (stepInEpoch > 0) {
      if (data.globalOrder()) {
        continuation = Continuation.BY_RECORDS;
      } else if (data.replaysEpochs() && data.orderKey().equals(saved.orderKey())) {
        // The part of the epoch the saved layout consumed becomes an earlier segment: the new
        // layout's workers work out which records it held and share the rest.
        continuation = Continuation.BY_SEGMENTS;
      } else {
        // Which records each worker consumed depends on its shard and its shuffle: not recoverable
        // for another layout. The epoch starts over; the optimizer steps done are kept.
        restart = true;
        continuation = Continuation.RESTART;
      }
    }
    String explanation =
        written
            + "; resuming on "
            + size
            + " workers with batch "
            + batch
            + " x "
            + k
            + " accumulated (global batch "
            + (long) batch * k * size
            + ")"
            + (scale != saved.learningRateScale()
                ? ", the learning rate scaled by " + scale + " (linear scaling rule)"
                : "")
            + (restart
                ? "; the interrupted epoch "
                    + saved.epoch()
                    + (orderChanged || data.replaysEpochs()
                        ? " restarts: it was read in an order this data no longer gives ("
                            + saved.orderKey()
                            + " then, "
                            + data.orderKey()
                            + " now)"
                        : " restarts: this data has no reproducible order (deterministic=false"
                            + " without a shuffle buffer) to continue it from on another layout")
                : stepInEpoch > 0
                    ? "; the interrupted epoch "
                        + saved.epoch()
                        + " continues with the records not yet consumed, dealt to "
                        + size
                        + " workers"
                    : "");
    return new Decision(batch, k, scale, continuation, true, orderWarning, explanation, false);
  }
}
