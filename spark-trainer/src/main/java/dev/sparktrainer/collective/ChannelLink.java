package dev.sparktrainer.collective;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.function.Consumer;

/**
 * A plain TCP link: a non-blocking channel with one selector per direction, so reads and writes
 * from different threads each wait with their own deadline. The data path allocates nothing.
 */
final class ChannelLink extends Link {
  private static final Consumer<SelectionKey> IGNORE = key -> {};

  private final SocketChannel ch;
  private final Selector readSelector;
  private final Selector writeSelector;
  private final ByteBuffer[] pair = new ByteBuffer[2];
  private volatile boolean aborted;

  /** Selector waits, per direction (each counted by its one thread); for tests. */
  long readWaits;

  long writeWaits;

  ChannelLink(SocketChannel ch, int peerRank, String peerAddress) throws IOException {
    super(peerRank, peerAddress);
    this.ch = ch;
    Selector r = null;
    Selector w = null;
    try {
      ch.configureBlocking(false);
      r = Selector.open();
      w = Selector.open();
      ch.register(r, SelectionKey.OP_READ);
      ch.register(w, SelectionKey.OP_WRITE);
    } catch (IOException | RuntimeException e) {
      closeQuietly(r, e);
      closeQuietly(w, e);
      throw e;
    }
    this.readSelector = r;
    this.writeSelector = w;
  }

  @Override
  void readFully(ByteBuffer dst, long deadlineNanos) throws IOException {
    try {
      while (dst.hasRemaining()) {
        int n = ch.read(dst);
        if (n > 0) {
          continue;
        }
        if (n < 0) {
          throw new EOFException("connection closed by the peer");
        }
        checkOpen();
        long ms = millisLeft(deadlineNanos);
        if (ms == 0) {
          throw new SocketTimeoutException("timed out waiting for data");
        }
        readWaits++;
        readSelector.select(IGNORE, ms);
      }
    } catch (ClosedSelectorException e) {
      throw closed(e);
    }
  }

  @Override
  void writeFully(ByteBuffer a, ByteBuffer b, long deadlineNanos) throws IOException {
    pair[0] = a;
    pair[1] = b;
    int count = b == null ? 1 : 2;
    try {
      while (a.hasRemaining() || (b != null && b.hasRemaining())) {
        long n = ch.write(pair, 0, count);
        if (n > 0) {
          continue;
        }
        checkOpen();
        long ms = millisLeft(deadlineNanos);
        if (ms == 0) {
          throw new SocketTimeoutException("timed out sending: the peer is not reading");
        }
        writeWaits++;
        writeSelector.select(IGNORE, ms);
      }
    } catch (ClosedSelectorException e) {
      throw closed(e);
    } finally {
      pair[0] = null;
      pair[1] = null;
    }
  }

  private void checkOpen() throws IOException {
    if (aborted) {
      throw new AsynchronousCloseException();
    }
  }

  private static IOException closed(Exception cause) {
    IOException e = new AsynchronousCloseException();
    e.initCause(cause);
    return e;
  }

  @Override
  LinkTransport transport() {
    return LinkTransport.TCP;
  }

  @Override
  SocketChannel channel() {
    return ch;
  }

  @Override
  void abort() {
    aborted = true;
    readSelector.wakeup();
    writeSelector.wakeup();
    closeQuietly(ch, null);
    closeQuietly(readSelector, null);
    closeQuietly(writeSelector, null);
  }

  private static void closeQuietly(Closeable c, Exception primary) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (IOException e) {
      if (primary != null) {
        primary.addSuppressed(e);
      }
    }
  }
}
