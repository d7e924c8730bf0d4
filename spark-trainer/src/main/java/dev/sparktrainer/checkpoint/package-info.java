/**
 * BackupAndRestore on any Hadoop FileSystem ({@code file:}, {@code hdfs:}, {@code s3a:}): the chief
 * writes each checkpoint to a temporary name and renames it into place, so a reader only ever sees
 * complete checkpoints; the last M are kept; on start the latest one that verifies is restored.
 *
 * <p>A checkpoint ({@link dev.sparktrainer.checkpoint.CheckpointState}) is a step, small opaque
 * metadata bytes (epoch, data position, history: the trainer's business) and named float arrays
 * (parameters, optimizer slots: {@link dev.sparktrainer.checkpoint.StateArray}). The store streams
 * them to one file per checkpoint through a bounded buffer, so a checkpoint may exceed 2 GiB; every
 * section has a CRC-32C and a manifest at the end lists the arrays (the format is described in
 * {@link dev.sparktrainer.checkpoint.CheckpointStore}).
 *
 * <p>The rules on reading: a checkpoint that is provably bad (CRC mismatch, truncated, no footer,
 * inconsistent manifest) is skipped with a warning for the previous one, and reported to the caller
 * ({@link dev.sparktrainer.checkpoint.SkippedCheckpoint}: the trainer records it in the run's
 * history); any other failure (the store unreachable for a while, a timeout) is retried, then
 * thrown — never a silent restart from an older checkpoint; a checkpoint written by an older
 * version is an error ({@link dev.sparktrainer.checkpoint.IncompatibleCheckpointException}).
 *
 * <p>{@link dev.sparktrainer.checkpoint.AsyncCheckpointWriter} writes snapshots on a background
 * thread, one at a time, newest wins, so that the training loop never waits for the store; a failed
 * write is reported by its next call.
 */
package dev.sparktrainer.checkpoint;
