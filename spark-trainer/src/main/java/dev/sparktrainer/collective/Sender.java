package dev.sparktrainer.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;

/**
 * The thread that writes frames to the right neighbour while the caller's thread receives from the
 * left and reduces, so both directions of the rank's links are busy at once.
 *
 * <p>A single-producer single-consumer queue of frame descriptors, preallocated and reused: the
 * caller publishes by advancing {@code tail}, the sender by advancing {@code done}; hand-offs use
 * {@link LockSupport}, so the steady state allocates nothing.
 */
final class Sender implements Runnable {
  /** Busy-wait this many times before parking: cheap latency for back-to-back frames. */
  private static final int SPINS = 200;

  private final Link link;
  private final long jobId;
  private final Runnable onFailure;
  private final ByteBuffer header =
      ByteBuffer.allocateDirect(Wire.HEADER_BYTES).order(ByteOrder.BIG_ENDIAN);
  private final ByteBuffer encoded;
  private final Thread thread;

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

  Sender(Link link, long jobId, int maxEncodedBytes, String threadName, Runnable onFailure) {
    this.link = link;
    this.jobId = jobId;
    this.onFailure = onFailure;
    this.encoded = ByteBuffer.allocateDirect(Math.max(16, maxEncodedBytes)).order(ByteOrder.LITTLE_ENDIAN);
    this.thread = new Thread(this, threadName);
    thread.setDaemon(true);
    ensureCapacity(64);
  }

  void start() {
    thread.start();
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
    LockSupport.unpark(thread);
  }

  /**
   * Hands out the next frame sequence number to a caller that writes a frame itself. Only while the
   * sender is idle (after {@link #awaitSent}): the volatile queue indices order the accesses.
   */
  long takeSequenceNumber() {
    return seq++;
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
      if (d == tail) {
        if (++idle < SPINS) {
          Thread.onSpinWait();
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
    Wire.putHeader(header, jobId, seq++, tags[i], payload.remaining());
    link.writeFully(header, payload, deadline);
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
