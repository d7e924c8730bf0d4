package dev.sparktrainer.checkpoint;

import java.io.Serializable;
import java.util.Objects;

/**
 * A checkpoint that {@link CheckpointStore#latest(java.util.function.Consumer)} passed over for an
 * older one (or for none): it was provably bad, or it was deleted between the listing and its
 * reading.
 *
 * @param file the checkpoint file, as a URI of its FileSystem
 * @param reason why, e.g. {@code corrupt at byte 1234: array 0 ('param/w'): data CRC-32C mismatch
 *     (...)} (at most {@value #MAX_REASON} characters)
 */
public record SkippedCheckpoint(String file, String reason) implements Serializable {
  /** Reasons are cut to this length: they travel in every later checkpoint's metadata. */
  public static final int MAX_REASON = 1000;

  /** Checks for nulls and cuts the reason to {@link #MAX_REASON} characters. */
  public SkippedCheckpoint {
    Objects.requireNonNull(file, "file");
    Objects.requireNonNull(reason, "reason");
    if (reason.length() > MAX_REASON) {
      reason = reason.substring(0, MAX_REASON - 3) + "...";
    }
  }

  /** {@code file: reason}. */
  @Override
  public String toString() {
    return file + ": " + reason;
  }
}
