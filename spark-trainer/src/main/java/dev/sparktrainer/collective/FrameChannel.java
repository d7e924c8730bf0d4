package dev.sparktrainer.collective;

import java.io.EOFException;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.function.Consumer;

/**
 * One rank's frames on the ring: it sends frames to the right neighbour (through the {@link Sender}
 * queue) and receives them from the left one, checking each header before the payload is trusted,
 * and waits for either within the running operation's deadline. Every failure is a {@link
 * LinkException} naming the neighbour it concerns (a {@link ProtocolException} for a wrong frame).
 *
 * <p>Like Gloo's transport pair, it knows frames and links, not algorithms: the collectives are
 * built on {@link #send}, {@link #receive} and {@link #flush}. Only the owning communicator's
 * caller thread uses it, one operation at a time; {@link #close(long)} may come from any thread.
 */
final class FrameChannel {
  /**
   * On plain links, operations of up to this many bytes run on the caller's thread alone (no
   * hand-off per frame: latency); larger ones hand the writing to the sender thread, so that copies
   * into and out of the sockets and the reduction run in parallel (throughput).
   */
  static final long CALLER_DRIVEN_MAX_BYTES = 4 << 20;

  /**
   * How long the caller's thread polls for a small frame before it blocks in the selector: a
   * neighbour that is running answers within about the time a blocked thread needs to be woken up.
   * Short, and yielding, because with more ranks than cores a polling rank delays the rank it waits
   * for.
   */
  static final long SPIN_NANOS = 20_000;

  /** Frames up to this size are waited for with {@link #SPIN_NANOS} of polling first. */
  static final int SPIN_MAX_FRAME_BYTES = 64 * 1024;

  private static final Consumer<SelectionKey> IGNORE = key -> {};

  private final Link left;
  private final Link right;
  private final long jobId;
  private final long operationTimeoutNanos;
  private final Sender sender;
  private final ByteBuffer header =
      ByteBuffer.allocateDirect(Wire.HEADER_BYTES).order(ByteOrder.BIG_ENDIAN);
  private final ByteBuffer[] recvPair = new ByteBuffer[2];

  /**
   * Both plain links, for the caller's thread to wait on either (it writes queued frames while it
   * waits to receive); null with TLS or shared memory, where the sender thread writes.
   */
  private final Selector duplex;

  private final SelectionKey duplexLeft;
  private final SelectionKey duplexRight;

  /** Waits in {@link #duplex}; for tests. */
  private long duplexWaits;

  private long recvSeq;

  /** {@code recvSeq} for other threads (tests watch progress with it). */
  private volatile long framesReceived;

  private long deadline;
  private volatile boolean closed;

  /** The links stay open until {@link #close(long)}; {@link #start()} starts the sender thread. */
  FrameChannel(
      int rank, Link left, Link right, long jobId, int chunkBytes, long operationTimeoutNanos) {
    this.left = left;
    this.right = right;
    this.jobId = jobId;
    this.operationTimeoutNanos = operationTimeoutNanos;
    Selector selector = null;
    SelectionKey leftKey = null;
    SelectionKey rightKey = null;
    if (left instanceof ChannelLink && right instanceof ChannelLink) {
      try {
        selector = Selector.open();
        leftKey = left.channel().register(selector, SelectionKey.OP_READ);
        rightKey = right.channel().register(selector, 0);
      } catch (IOException e) {
        // falls back to the sender thread
        Communicator.closeQuietly(selector);
        selector = null;
        leftKey = null;
        rightKey = null;
      }
    }
    this.duplex = selector;
    this.duplexLeft = leftKey;
    this.duplexRight = rightKey;
    // A sender failure wakes the caller's thread (blocked reading the left link) and tells the
    // peers at once.
    this.sender =
        new Sender(
            right, jobId, chunkBytes, Communicator.threadName(rank, "sender"), this::abortLinks);
  }

  /** Starts the sender thread: once, before the first operation. */
  void start() {
    sender.start();
  }

  Link left() {
    return left;
  }

  Link right() {
    return right;
  }

  /**
   * Starts an operation: its deadline, and the caller-driven writer until {@link #chooseWriter}
   * says otherwise.
   */
  void begin(long deadline) {
    this.deadline = deadline;
    sender.setDeadline(deadline);
    chooseWriter(0);
  }

  /** Picks who writes the next frames (see {@link #CALLER_DRIVEN_MAX_BYTES}); only while idle. */
  void chooseWriter(long bytes) {
    sender.setCallerDriven(duplex != null && bytes <= CALLER_DRIVEN_MAX_BYTES);
  }

  /** Makes room for this many queued frames (before an operation's first {@link #send}). */
  void reserve(int frames) {
    sender.ensureCapacity(frames);
  }

  /**
   * Queues a frame of {@code view[pos, pos + bytes)} for the right neighbour ({@code bytes} counts
   * elements instead with a half-precision {@code wire}, which encodes them). The bytes must stay
   * untouched until {@link #awaitSent} has passed the frame's mark ({@link #queued()} after this).
   */
  void send(ByteBuffer view, int pos, int bytes, int tag, WirePrecision wire) {
    sender.enqueue(view, pos, bytes, tag, wire);
  }

  /** Frames queued so far: a mark for {@link #awaitSent}. */
  long queued() {
    return sender.queued();
  }

  /** Waits until every frame queued so far is written. */
  void flush() throws IOException {
    awaitSent(sender.queued());
  }

  /**
   * Reads one frame from the left neighbour into {@code dst[pos, pos + length)} after checking its
   * header: magic, version, job, sequence number, operation and exact length. With plain links the
   * caller's thread writes queued frames to the right neighbour while it waits.
   *
   * @param scratch {@code dst} is the communicator's own buffer (a stage or the gather buffer): the
   *     header and the payload may then arrive in one read, because nothing of the payload is used
   *     unless the header, checked as soon as it is complete, matches. A caller's buffer only
   *     receives bytes after its frame's header was checked.
   */
  void receive(int tag, int length, ByteBuffer dst, int pos, boolean scratch) throws IOException {
    header.clear();
    dst.clear();
    dst.position(pos).limit(pos + length);
    try {
      if (sender.callerDriven()) {
        pumpUntilReceived(tag, length, dst, scratch);
        return;
      }
      readLeft(header);
      header.flip();
      checkHeader(tag, length);
      readLeft(dst);
    } finally {
      dst.clear(); // absolute accesses check the limit
    }
  }

  /** {@link #receive} on plain links: one thread drives both non-blocking sockets. */
  private void pumpUntilReceived(int tag, int length, ByteBuffer dst, boolean scratch)
      throws IOException {
    SocketChannel in = left.channel();
    recvPair[0] = header;
    recvPair[1] = dst;
    boolean headerChecked = false;
    // Small frames poll a little before blocking: the neighbour's frame usually arrives within the
    // time a blocked thread needs to be woken up and rescheduled. Large ones block at once, to
    // leave
    // the cores to the ranks that copy.
    long spinUntil = length <= SPIN_MAX_FRAME_BYTES ? 0 : Long.MIN_VALUE;
    try {
      while (true) {
        boolean progress = pumpSends();
        long n;
        try {
          n = headerChecked ? in.read(dst) : scratch ? in.read(recvPair) : in.read(header);
        } catch (IOException e) {
          throw new LinkException(left, "connection lost (" + e + ") while receiving from", e);
        }
        if (n < 0) {
          throw new LinkException(left, "connection closed by", new EOFException());
        }
        if (!headerChecked && !header.hasRemaining()) {
          header.flip();
          checkHeader(tag, length);
          headerChecked = true;
        }
        if (headerChecked && !dst.hasRemaining()) {
          return;
        }
        if (n > 0 || progress) {
          if (spinUntil != Long.MIN_VALUE) {
            spinUntil = 0;
          }
          continue;
        }
        if (spinUntil != Long.MIN_VALUE) {
          long now = System.nanoTime();
          if (spinUntil == 0) {
            spinUntil = now + SPIN_NANOS;
          }
          if (now - spinUntil < 0) {
            // yield, not onSpinWait: a PAUSE loop makes a virtual CPU give up its core to the host
            Thread.yield();
            continue;
          }
        }
        waitForLinks(true);
      }
    } finally {
      recvPair[1] = null;
    }
  }

  /** Caller-driven: writes what the right socket takes now; whether any byte moved. */
  private boolean pumpSends() throws LinkException {
    try {
      return sender.pump();
    } catch (IOException e) {
      throw new LinkException(right, "connection lost (" + e + ") while sending to", e);
    }
  }

  /**
   * Blocks until the left socket is readable ({@code receiving}) or the right one writable (frames
   * pending), or fails at the operation's deadline naming the link it waited for.
   */
  private void waitForLinks(boolean receiving) throws IOException {
    long ms = Link.millisLeft(deadline);
    if (ms == 0) {
      throw receiving
          ? new LinkException(
              left,
              "timed out after " + timeoutMillis() + " ms waiting for data from",
              new SocketTimeoutException())
          : new LinkException(
              right,
              "timed out after "
                  + timeoutMillis()
                  + " ms sending ("
                  + unsent()
                  + " frames unsent; is it reading?) to",
              new SocketTimeoutException());
    }
    if (closed) {
      throw new ClosedChannelException();
    }
    try {
      duplexLeft.interestOps(receiving ? SelectionKey.OP_READ : 0);
      duplexRight.interestOps(sender.hasPending() ? SelectionKey.OP_WRITE : 0);
      duplexWaits++;
      duplex.select(IGNORE, ms);
    } catch (ClosedSelectorException | CancelledKeyException e) {
      throw new LinkException(left, "communicator closed while exchanging with", e);
    }
  }

  /** Checks a received header against the expected frame; advances the receive sequence. */
  private void checkHeader(int tag, int length) throws IOException {
    int magic = header.getInt(0);
    if (magic != Wire.MAGIC) {
      throw new ProtocolException(
          left,
          String.format(
              "received a frame with bad magic 0x%08x during %s (not a ring frame, or the stream is"
                  + " out of sync)",
              magic, Wire.describe(tag)));
    }
    short version = header.getShort(4);
    if (version != Wire.VERSION) {
      throw new ProtocolException(
          left, "frame of protocol version " + version + ", this rank speaks " + Wire.VERSION);
    }
    long frameJob = header.getLong(8);
    if (frameJob != jobId) {
      throw new ProtocolException(
          left,
          "frame of foreign job "
              + Long.toHexString(frameJob)
              + ", expected job "
              + Long.toHexString(jobId));
    }
    long seq = header.getLong(16);
    if (seq != recvSeq) {
      throw new ProtocolException(left, "out-of-sequence frame #" + seq + ", expected #" + recvSeq);
    }
    int frameTag = header.getInt(24);
    if (frameTag != tag) {
      throw new ProtocolException(
          left,
          "expected a "
              + Wire.describe(tag)
              + " frame, got "
              + Wire.describe(frameTag)
              + " (do all ranks call the same collectives in the same order?)");
    }
    int frameLength = header.getInt(28);
    if (frameLength != length) {
      throw new ProtocolException(
          left,
          "frame payload of "
              + frameLength
              + " bytes, expected "
              + length
              + " for "
              + Wire.describe(tag)
              + " (do all ranks pass buffers of the same size?)");
    }
    recvSeq++;
    framesReceived = recvSeq;
  }

  private void readLeft(ByteBuffer dst) throws IOException {
    try {
      left.readFully(dst, deadline);
    } catch (SocketTimeoutException e) {
      throw new LinkException(
          left, "timed out after " + timeoutMillis() + " ms waiting for data from", e);
    } catch (EOFException e) {
      throw new LinkException(left, "connection closed by", e);
    } catch (IOException e) {
      throw new LinkException(left, "connection lost (" + e + ") while receiving from", e);
    }
  }

  /**
   * Waits until the first {@code frames} frames queued are written (a mark from {@link #queued()}).
   */
  void awaitSent(long frames) throws IOException {
    if (sender.callerDriven()) {
      while (sender.sent() < frames) {
        if (!pumpSends()) {
          waitForLinks(false);
        }
      }
      return;
    }
    if (!sender.awaitSent(frames, deadline)) {
      throw new LinkException(
          right,
          "timed out after "
              + timeoutMillis()
              + " ms sending ("
              + unsent()
              + " frames unsent; is it reading?) to",
          null);
    }
    Throwable f = sender.failure();
    if (f != null) {
      throw senderFailure(f);
    }
  }

  /** The sender thread's failure as a link exception; null while it has none. */
  LinkException senderFailure() {
    Throwable f = sender.failure();
    return f == null ? null : senderFailure(f);
  }

  private LinkException senderFailure(Throwable f) {
    if (f instanceof SocketTimeoutException) {
      return new LinkException(
          right,
          "timed out after " + timeoutMillis() + " ms sending (the peer is not reading) to",
          f);
    }
    if (f instanceof IOException) {
      return new LinkException(right, "connection lost (" + f + ") while sending to", f);
    }
    return new LinkException(right, "internal error (" + f + ") while sending to", f);
  }

  /** Frames queued for the right neighbour and not yet written. */
  long unsent() {
    return sender.queued() - sender.sent();
  }

  private long timeoutMillis() {
    return operationTimeoutNanos / 1_000_000;
  }

  private void abortLinks() {
    left.abort();
    right.abort();
  }

  /**
   * Aborts both links (waking the caller's thread and telling the peers) and stops the sender
   * thread; whether it stopped within {@code millis}. Call once.
   */
  boolean close(long millis) throws InterruptedException {
    closed = true;
    if (duplex != null) {
      duplex.wakeup();
    }
    abortLinks();
    Communicator.closeQuietly(duplex);
    return sender.stop(millis);
  }

  /**
   * Times this rank's threads have blocked in a selector; for tests (see {@link
   * Communicator#selectorWaits()}).
   */
  long selectorWaits() {
    long waits = duplexWaits;
    for (Link l : new Link[] {left, right}) {
      if (l instanceof ChannelLink) {
        waits += ((ChannelLink) l).readWaits + ((ChannelLink) l).writeWaits;
      } else if (l instanceof ShmLink) {
        waits += ((ShmLink) l).readSleeps + ((ShmLink) l).writeSleeps;
      }
    }
    return waits;
  }

  long framesReceived() {
    return framesReceived;
  }

  Thread senderThread() {
    return sender.thread();
  }
}
