package dev.sparktrainer.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.concurrent.locks.LockSupport;

/**
 * The queue of frames for the right neighbour, and who writes them.
 *
 * <p>A single-producer single-consumer queue of frame descriptors, preallocated and reused: the
 * caller publishes by advancing {@code tail}, the writer by advancing {@code done}. Two ways to drain
 * it:
 *
 * <ul>
 *   <li>Caller-driven (plain TCP links): no thread. The caller's thread, whenever it would otherwise
 *       wait for its left neighbour or for the queue to drain, calls {@link #pump} to write as much
 *       as the non-blocking socket takes. Fewer threads than cores matters on a shared host: there is
 *       no hand-off (no wake-up) per frame, and a rank that is scheduled makes progress on both links.
 *   <li>Threaded (TLS links, whose writes block): a sender thread writes while the caller's thread
 *       receives and reduces; hand-offs use {@link LockSupport}.
 * </ul>
 *
 * The steady state allocates nothing either way.
 */
final class Sender implements Runnable {
  /** Busy-wait this many times before parking: cheap latency for back-to-back frames. */
  private static final int SPINS = Integer.getInteger("collective.senderSpins", 50);
  private static final int SPIN_MODE = Integer.getInteger("collective.senderSpinMode", 1);

  private final Link link;
  private final long jobId;
  private final Runnable onFailure;
  private final ByteBuffer header =
      ByteBuffer.allocateDirect(Wire.HEADER_BYTES).order(ByteOrder.BIG_ENDIAN);
  private final ByteBuffer encoded;
  private final Thread thread;
  /** Caller-driven now: the thread (if any) leaves the queue alone. Changed only while idle. */
  private volatile boolean pumping;
  // The caller-driven frame being written: header then payload.
  private final ByteBuffer[] writing = new ByteBuffer[2];
  private boolean inFrame;

  private ByteBuffer[] src = new ByteBuffer[0];
  private int[] pos = new int[0];
  private int[] len = new int[0];
  private int[] tags = new int[0];
  private WirePrecision[] wire = new WirePrecision[0];
  private int mask = -1;

  private volatile long tail;
  private volatile long done;
  private long seq;
  private volatile long deadline;
  private volatile Throwable failure;
  private volatile boolean stopping;
  private volatile Thread waiter;

  /**
   * A threaded sender when {@code threadName} is not null (start it with {@link #start()}), else a
   * caller-driven one, whose link must be a non-blocking {@link ChannelLink}.
   */
  Sender(Link link, long jobId, int maxEncodedBytes, String threadName, Runnable onFailure) {
    this.link = link;
    this.jobId = jobId;
    this.onFailure = onFailure;
    this.encoded = ByteBuffer.allocateDirect(Math.max(16, maxEncodedBytes)).order(ByteOrder.LITTLE_ENDIAN);
    this.thread = new Thread(this, threadName);
    thread.setDaemon(true);
    this.pumping = false;
    ensureCapacity(64);
  }

  void start() {
    thread.start();
  }

  boolean callerDriven() {
    return pumping;
  }

  void setCallerDriven(boolean callerDriven) {
    if (tail != done) {
      throw new IllegalStateException("sender mode changed while busy");
    }
    pumping = callerDriven;
  }

  /** Grows the queue; call only while idle (between operations). */
  void ensureCapacity(int frames) {
    if (frames <= src.length) {
      return;
    }
    if (tail != done) {
      throw new IllegalStateException("sender queue resized while busy");
    }
    int cap = Integer.highestOneBit(Math.max(1, frames - 1)) << 1;
    src = new ByteBuffer[cap];
    pos = new int[cap];
    len = new int[cap];
    tags = new int[cap];
    wire = new WirePrecision[cap];
    mask = cap - 1;
    // The volatile write of tail below publishes the new arrays to the sender thread.
    tail = tail;
  }

  void setDeadline(long deadlineNanos) {
    this.deadline = deadlineNanos;
  }

  /**
   * Queues a frame. FP32 (raw): {@code length} bytes at {@code position}. BF16/FP16: {@code length}
   * floats at {@code position}, encoded by the sender thread.
   */
  void enqueue(ByteBuffer source, int position, int length, int tag, WirePrecision precision) {
    long t = tail;
    if (t - done > mask) {
      throw new IllegalStateException("sender queue overflow: " + (t - done) + " frames pending");
    }
    int i = (int) (t & mask);
    src[i] = source;
    pos[i] = position;
    len[i] = length;
    tags[i] = tag;
    wire[i] = precision;
    tail = t + 1;
    if (!pumping) {
      LockSupport.unpark(thread);
    }
  }

  /** True while frames are queued or partly written. */
  boolean hasPending() {
    return done != tail;
  }

  /**
   * Caller-driven: writes queued frames until the queue is empty or the socket takes no more
   * (non-blocking: never waits). Returns whether any byte was written.
   */
  boolean pump() throws java.io.IOException {
    SocketChannel ch = link.channel();
    boolean progress = false;
    while (true) {
      long d = done;
      int i = (int) (d & mask);
      if (!inFrame) {
        if (d == tail) {
          return progress;
        }
        writing[0] = header;
        writing[1] = payload(i);
        Wire.putHeader(header, jobId, seq++, tags[i], writing[1].remaining());
        inFrame = true;
      }
      if (ch.write(writing) > 0) {
        progress = true;
      }
      if (header.hasRemaining() || writing[1].hasRemaining()) {
        return progress;
      }
      inFrame = false;
      writing[1] = null;
      src[i] = null;
      done = d + 1;
    }
  }

  /** Frames queued so far (monotonic). */
  long queued() {
    return tail;
  }

  /** Frames written so far (monotonic). */
  long sent() {
    return done;
  }

  Throwable failure() {
    return failure;
  }

  /**
   * Waits until {@code frames} frames are written. Returns false at the deadline; returns true early
   * if the sender failed (the caller checks {@link #failure()}).
   */
  boolean awaitSent(long frames, long deadlineNanos) {
    while (done < frames) {
      if (failure != null || stopping) {
        return true;
      }
      long left = deadlineNanos - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      waiter = Thread.currentThread();
      if (done < frames && failure == null) {
        LockSupport.parkNanos(this, left);
      }
      waiter = null;
    }
    return true;
  }

  @Override
  public void run() {
    int idle = 0;
    while (!stopping) {
      long d = done;
      if (d == tail || pumping) {
        if (++idle < SPINS) {
          if (SPIN_MODE == 0) {
            Thread.onSpinWait();
          } else if (SPIN_MODE == 1) {
            Thread.yield();
          } else {
            idle = SPINS;
          }
        } else {
          idle = 0;
          LockSupport.park(this);
        }
        continue;
      }
      idle = 0;
      int i = (int) (d & mask);
      try {
        send(i);
      } catch (Throwable t) {
        failure = t;
        Thread w = waiter;
        if (w != null) {
          LockSupport.unpark(w);
        }
        if (!stopping) {
          onFailure.run();
        }
        return;
      }
      src[i] = null;
      done = d + 1;
      Thread w = waiter;
      if (w != null) {
        LockSupport.unpark(w);
      }
    }
  }

  private void send(int i) throws java.io.IOException {
    ByteBuffer payload = payload(i);
    Wire.putHeader(header, jobId, seq++, tags[i], payload.remaining());
    link.writeFully(header, payload, deadline);
  }

  /** Frame {@code i}'s payload, positioned; 16-bit wire formats are encoded here. */
  private ByteBuffer payload(int i) {
    ByteBuffer payload;
    if (wire[i] == WirePrecision.FP32) {
      payload = src[i];
      payload.clear();
      payload.position(pos[i]).limit(pos[i] + len[i]);
    } else {
      src[i].clear(); // absolute accesses check the limit a previous frame set
      encoded.clear();
      HalfFloats.encode(src[i], pos[i], encoded, 0, len[i], wire[i]);
      payload = encoded;
      payload.limit(2 * len[i]);
    }
    return payload;
  }

  /** Stops the thread (pending frames are dropped) and waits for it up to {@code timeoutMillis}. */
  boolean stop(long timeoutMillis) throws InterruptedException {
    stopping = true;
    LockSupport.unpark(thread);
    if (thread.isAlive() && thread != Thread.currentThread()) {
      thread.join(timeoutMillis);
    }
    return !thread.isAlive();
  }

  Thread thread() {
    return thread;
  }
}
