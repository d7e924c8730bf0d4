package dev.sparktrainer.collective;

import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/**
 * One authenticated connection to a neighbour. Exactly one thread reads and one thread writes at a
 * time; {@link #abort()} may be called from any thread and makes blocked calls fail promptly.
 */
abstract class Link implements Closeable {
  final int peerRank;
  final String peerAddress;

  Link(int peerRank, String peerAddress) {
    this.peerRank = peerRank;
    this.peerAddress = peerAddress;
  }

  /**
   * Fills {@code dst}'s remaining bytes or throws (EOF, timeout at {@code deadlineNanos}, closed).
   */
  abstract void readFully(ByteBuffer dst, long deadlineNanos) throws IOException;

  /** Writes the remaining bytes of {@code a} then {@code b} (which may be null). */
  abstract void writeFully(ByteBuffer a, ByteBuffer b, long deadlineNanos) throws IOException;

  /** Closes the connection now and wakes any thread blocked on it. Idempotent, thread-safe. */
  abstract void abort();

  /** The underlying socket's channel, for the loopback benchmark. */
  abstract SocketChannel channel();

  /** How this link carries data. */
  abstract LinkTransport transport();

  /**
   * What the {@link Handshake} proofs are bound to besides the nonces: the same bytes at both ends
   * of this one connection, and different bytes on any other connection a relay could forward the
   * proofs to. Empty on plain TCP (there is no connection secret to bind to; see {@link TlsLink}).
   */
  byte[] channelBinding() {
    return NO_BINDING;
  }

  static final byte[] NO_BINDING = new byte[0];

  @Override
  public void close() {
    abort();
  }

  static long millisLeft(long deadlineNanos) {
    long left = deadlineNanos - System.nanoTime();
    return left <= 0 ? 0 : Math.max(1, (left + 999_999) / 1_000_000);
  }
}
