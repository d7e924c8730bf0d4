package dev.sparktrainer.checkpoint;

import java.io.IOException;

/**
 * A checkpoint written in a format this version cannot read and must not skip: the newest
 * checkpoint was written by an older version of spark-trainer (format 1, one {@code byte[]} of the
 * whole state). Skipping it would silently restart the training from an older checkpoint or from
 * scratch; retrying cannot help either. The training should stop and say so: the user decides
 * between resuming with the version that wrote it and deleting the checkpoints to start afresh.
 */
public final class IncompatibleCheckpointException extends IOException {
  private static final long serialVersionUID = 1L;

  IncompatibleCheckpointException(String message) {
    super(message);
  }
}
