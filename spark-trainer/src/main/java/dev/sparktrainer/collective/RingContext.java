package dev.sparktrainer.collective;

/**
 * What a collective algorithm runs against, as in Gloo's {@code Context}: this rank's place in the
 * ring, the frame size, and the {@link FrameChannel} to the neighbours (null with one rank, where
 * no algorithm sends anything).
 */
final class RingContext {
  final int rank;
  final int size;

  /** Bytes of data per frame: large transfers are pipelined in frames of this size. */
  final int chunkBytes;

  final FrameChannel channel;

  RingContext(int rank, int size, int chunkBytes, FrameChannel channel) {
    this.rank = rank;
    this.size = size;
    this.chunkBytes = chunkBytes;
    this.channel = channel;
  }

  /** The neighbour frames come from: the peer a malformed frame is blamed on. */
  Link left() {
    return channel.left();
  }

  /**
   * Frames of at most {@link #chunkBytes} that {@code bytes} takes (at least one: empty data is one
   * empty frame).
   */
  int frames(long bytes) {
    return (int) Math.max(1, (bytes + chunkBytes - 1) / chunkBytes);
  }
}
