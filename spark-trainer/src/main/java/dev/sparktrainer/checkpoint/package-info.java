/**
 * BackupAndRestore on any Hadoop FileSystem ({@code file:}, {@code hdfs:}, {@code s3a:}): the chief
 * writes each checkpoint to a temporary name and renames it into place, so a reader only ever sees
 * complete checkpoints; the last M are kept; on start the latest one that verifies is restored.
 *
 * <p>The store deals in opaque, checksummed blobs keyed by the global step; what a blob contains
 * (parameters, optimizer state, epoch, step, data position) is the trainer's business.
 */
package dev.sparktrainer.checkpoint;
