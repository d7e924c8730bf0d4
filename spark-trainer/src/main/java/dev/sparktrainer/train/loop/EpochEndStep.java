package dev.sparktrainer.train.loop;

/**
 * The steps that end every epoch, in the order every rank runs them (the declaration order). Each
 * that communicates does so in the same order on every rank, so the order is part of the protocol:
 * {@code EpochEndOrderTest} checks it on every rank of a real ring.
 */
public enum EpochEndStep {
  /** The epoch's training sums and step times, summed over the ranks ({@link EpochSums}). */
  METRICS,
  /** Every rank's step times gathered at rank 0, which names the slowest rank, if any. */
  STRAGGLERS,
  /** A pass over each rank's validation shard, its sums summed over the ranks. */
  VALIDATION,
  /** The slowest rank's training and whole-epoch seconds. */
  EPOCH_TIME,
  /** A SHA-256 of every replica's parameters compared across the ranks; any difference fails. */
  REPLICA_CHECK,
  /** The epoch's metrics recorded in the history, reported to the callback and the log. */
  HISTORY,
  /** Rank 0 hands a snapshot of the whole state to the background checkpoint writer. */
  CHECKPOINT,
  /**
   * Whether the driver asked the job to stop and relaunch on more workers, agreed by every rank.
   */
  GROW_CHECK
}
