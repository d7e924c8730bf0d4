package dev.sparktrainer.checkpoint;

import java.util.List;
import java.util.Objects;

/**
 * A checkpoint: its global step, small metadata bytes and the arrays of the state.
 *
 * <p>The metadata (epoch, position in the data, history, ...) is opaque to the store, which only
 * checksums it; it is held in one {@code byte[]}, so keep it small (the arrays are where the bulk
 * goes). The arrays are written and read one by one through a bounded buffer, in list order.
 *
 * <p>A state handed to {@link AsyncCheckpointWriter#submit} is a snapshot: it is written later, on
 * another thread, so its arrays must not be modified after the call (give it copies).
 *
 * @param step the global step it was taken after, {@code >= 0}
 * @param metadata the metadata bytes, not null (may be empty); not copied
 * @param arrays the arrays, in order; copied into an immutable list (the arrays themselves are not
 *     copied)
 */
public record CheckpointState(long step, byte[] metadata, List<StateArray> arrays) {
  /** Validates and copies the list. */
  public CheckpointState {
    if (step < 0) {
      throw new IllegalArgumentException("Invalid checkpoint step " + step + ": expected >= 0");
    }
    Objects.requireNonNull(metadata, "metadata");
    arrays = List.copyOf(arrays);
  }

  /** The number of bytes the arrays' values take (4 per float). */
  public long arrayBytes() {
    long bytes = 0;
    for (StateArray a : arrays) {
      bytes += 4L * a.values().length;
    }
    return bytes;
  }

  @Override
  public String toString() {
    return "CheckpointState[step "
        + step
        + ", "
        + metadata.length
        + " metadata bytes, "
        + arrays.size()
        + " arrays, "
        + arrayBytes()
        + " array bytes]";
  }
}
