package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.concurrent.locks.LockSupport;

/**
 * The queue of frames for the right neighbour, and who writes them.
 *
 * <p>A single-producer single-consumer queue of frame descriptors, preallocated and reused: the
 * caller publishes by advancing {@code tail}, the writer by advancing {@code done}. Chosen per
 * operation, while the queue is idle, one of two writers drains it:
 *
 * <ul>
 *   <li>Caller-driven ({@link #setCallerDriven}, plain non-blocking links only): the caller's
 *       thread, whenever it would otherwise wait for its left neighbour or for the queue to drain,
 *       calls {@link #pump} to write as much as the socket takes. No hand-off and no wake-up per
 *       frame, which is what small and medium operations' latency is made of.
 *   <li>Threaded: the sender thread writes while the caller's thread receives and reduces, so a
 *       large operation copies, sends and reduces in parallel; hand-offs use {@link LockSupport}.
 *       TLS links, whose writes block, always use it.
 * </ul>
 *
 * The steady state allocates nothing either way.
 */
final class Sender implements Runnable {
  /**
   * Polls this many times (yielding the core to whoever is runnable) before parking: cheap latency
   * for back-to-back frames. Not {@code Thread.onSpinWait()}: on a virtual machine a PAUSE loop
   * makes the host take the virtual CPU away, which costs more than the wake-up it tries to save.
   */
  private static final int SPINS = 50;

  private final Link link;
  private final long jobId;
  private final Runnable onFailure;
  private final ByteBuffer header =
      ByteBuffer.allocateDirect(Wire.HEADER_BYTES).order(ByteOrder.BIG_ENDIAN);
  private final ByteBuffer encoded;
  private final Thread thread;

  /** Caller-driven: the thread leaves the queue alone. Changed only while the queue is idle. */
  private volatile boolean pumping;

  // The frame the caller is writing: header then payload.
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
   * A threaded sender until {@link #setCallerDriven} says otherwise; {@link #start()} its thread.
   */
  Sender(Link link, long jobId, int maxEncodedBytes, String threadName, Runnable onFailure) {
    this.link = link;
    this.jobId = jobId;
    this.onFailure = onFailure;
    this.encoded =
        ByteBuffer.allocateDirect(Math.max(16, maxEncodedBytes)).order(ByteOrder.LITTLE_ENDIAN);
    this.thread = new Thread(this, threadName);
    thread.setDaemon(true);
    ensureCapacity(64);
  }

  void start() {
    thread.start();
  }

  boolean callerDriven() {
    return pumping;
  }

  /**
   * Chooses the writer of the next frames; only while idle. Caller-driven needs a non-blocking
   * {@link ChannelLink}.
   */
  void setCallerDriven(boolean callerDriven) {
    if (tail != done) {
      throw new IllegalStateException("sender mode changed while busy");
    }
    // Volatile write before the next enqueue's: the thread sees the mode with the frame.
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
   * floats at {@code position}, encoded by the writer when it starts the frame.
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
   * (non-blocking, never waits). Returns whether any byte was written.
   */
  boolean pump() throws IOException {
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
   * Waits until {@code frames} frames are written. Returns false at the deadline; returns true
   * early if the sender failed (the caller checks {@link #failure()}).
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
          Thread.yield();
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

  private void send(int i) throws IOException {
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
