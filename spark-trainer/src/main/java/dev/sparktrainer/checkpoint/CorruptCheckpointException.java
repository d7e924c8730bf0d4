package dev.sparktrainer.checkpoint;

import java.io.IOException;

/**
 * A checkpoint file that is provably bad: bad magic, unsupported version, a CRC mismatch,
 * truncation, or a manifest inconsistent with the records. Reading it again cannot help, so {@link
 * CheckpointStore#latest()} skips it for the previous checkpoint; any other {@link IOException} is
 * not proof of anything (the store may be unreachable for a while) and is retried instead.
 */
final class CorruptCheckpointException extends IOException {
  private static final long serialVersionUID = 1L;

  private final long offset;
  private final String reason;

  /**
   * @param file the checkpoint file
   * @param offset the byte offset where the problem is, or -1 when it is not at one place
   * @param reason what is wrong
   */
  CorruptCheckpointException(String file, long offset, String reason) {
    this(file, offset, reason, null);
  }

  CorruptCheckpointException(String file, long offset, String reason, Throwable cause) {
    super(
        "Corrupt checkpoint " + file + (offset >= 0 ? " at byte " + offset : "") + ": " + reason,
        cause);
    this.offset = offset;
    this.reason = reason;
  }

  /**
   * What is wrong and where, without the file: {@code corrupt at byte N: reason} or {@code corrupt:
   * reason}.
   */
  String summary() {
    return "corrupt" + (offset >= 0 ? " at byte " + offset : "") + ": " + reason;
  }
}
