package dev.sparktrainer.collective;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A {@link Communicator}'s bookkeeping around its operations: one at a time, each with its deadline
 * and its name and size for error messages; every failure inside one turned into the one {@link
 * CollectiveException} the caller sees, which breaks the ring; and the release of the ring's
 * resources, once, whether an operation failed or {@link #close()} was called (from any thread).
 */
final class OperationGuard {
  /** The communicator's logger: its messages are the communicator's. */
  private static final System.Logger LOG = System.getLogger(Communicator.class.getName());

  private final int rank;
  private final int size;
  private final long operationTimeoutNanos;
  private final Link left;
  private final Link right;

  /** Null with one rank. */
  private final FrameChannel channel;

  private final AtomicBoolean busy = new AtomicBoolean();
  private final Object closeLock = new Object();
  private volatile boolean closed;
  private boolean resourcesReleased;
  private volatile CollectiveException failure;

  // The running operation, for error messages (strings are built only on failure).
  private String opName = "connect";
  private long opIndex;
  private ElementType opType;
  private ReduceOp opReduce;
  private long opCount;

  /** With one rank {@code channel}, {@code left} and {@code right} are null. */
  OperationGuard(
      int rank, int size, long operationTimeoutNanos, FrameChannel channel, Link left, Link right) {
    this.rank = rank;
    this.size = size;
    this.operationTimeoutNanos = operationTimeoutNanos;
    this.channel = channel;
    this.left = left;
    this.right = right;
  }

  /**
   * Starts operation {@code name} on {@code count} elements of {@code type} (bytes when null), or
   * throws if another is running or the communicator is broken or closed.
   */
  void begin(String name, ElementType type, ReduceOp op, long count) {
    if (!busy.compareAndSet(false, true)) {
      throw new IllegalStateException(
          "rank "
              + rank
              + ": "
              + name
              + " called while "
              + opName
              + " is running: a Communicator"
              + " runs one operation at a time");
    }
    CollectiveException f = failure;
    if (f != null) {
      busy.set(false);
      throw new CollectiveException(
          "rank "
              + rank
              + " of "
              + size
              + ": "
              + name
              + " on a communicator broken by an earlier"
              + " failure: "
              + f.getMessage(),
          rank,
          f.peerRank(),
          f.peerAddress(),
          name,
          f);
    }
    if (closed) {
      busy.set(false);
      throw new IllegalStateException("rank " + rank + ": " + name + " on a closed communicator");
    }
    opName = name;
    opIndex++;
    opType = type;
    opReduce = op;
    opCount = count;
    if (channel != null) {
      channel.begin(System.nanoTime() + operationTimeoutNanos);
    }
  }

  void end() {
    busy.set(false);
  }

  /** Operations begun so far (the running one included). */
  long operationsBegun() {
    return opIndex;
  }

  private String describeOperation() {
    StringBuilder sb = new StringBuilder().append(opName).append(" #").append(opIndex).append(" (");
    if (opType != null) {
      sb.append(opType).append(' ');
    }
    if (opReduce != null) {
      sb.append(opReduce).append(", ");
    }
    sb.append(opCount).append(opType != null ? " elements)" : " bytes)");
    return sb.toString();
  }

  /**
   * Turns any failure inside an operation into the exception the caller sees, and breaks the ring.
   */
  RuntimeException fail(Exception e) {
    if (e instanceof IllegalArgumentException
        || e instanceof NullPointerException
        || e instanceof IndexOutOfBoundsException) {
      return (RuntimeException) e; // bad arguments: nothing was sent, the ring is intact
    }
    if (e instanceof CollectiveException) {
      return (CollectiveException) e;
    }
    LinkException senderFailure = channel == null ? null : channel.senderFailure();
    Link peer = null;
    String detail;
    Throwable cause = e;
    if (closed && failure == null) {
      detail = "the communicator was closed during the operation";
    } else if (senderFailure != null && !(e instanceof ProtocolException)) {
      peer = right;
      detail = senderFailure.getMessage();
      cause = senderFailure;
      senderFailure.addSuppressed(e);
    } else if (e instanceof LinkException) {
      peer = ((LinkException) e).link;
      detail = e.getMessage();
      long unsent = channel == null ? 0 : channel.unsent();
      if (peer == left && unsent > 0) {
        detail +=
            "; meanwhile "
                + unsent
                + " frame(s) to rank "
                + right.peerRank
                + " at "
                + right.peerAddress
                + " were not accepted (is it reading?)";
      }
    } else {
      detail = e.toString();
    }
    CollectiveException ce =
        new CollectiveException(
            "rank " + rank + " of " + size + ", " + describeOperation() + ": " + detail,
            rank,
            peer == null ? -1 : peer.peerRank,
            peer == null ? null : peer.peerAddress,
            opName,
            cause);
    if (failure == null) {
      failure = ce;
    }
    LOG.log(System.Logger.Level.DEBUG, ce.getMessage(), ce);
    releaseResources();
    return ce;
  }

  /** Closes the sockets and stops the sender thread. Idempotent; safe from any thread. */
  void close() {
    closed = true;
    releaseResources();
  }

  private void releaseResources() {
    synchronized (closeLock) {
      if (resourcesReleased) {
        return;
      }
      resourcesReleased = true;
    }
    if (channel == null) {
      return;
    }
    try {
      if (!channel.close(10_000)) {
        LOG.log(
            System.Logger.Level.WARNING,
            "rank " + rank + ": the sender thread did not stop within 10 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      LOG.log(
          System.Logger.Level.WARNING,
          "rank " + rank + ": interrupted while stopping the sender thread");
    }
  }

  /** True once {@link #close()} was called or an operation failed. */
  boolean isClosed() {
    return closed || failure != null;
  }

  /** Whether an operation is running. */
  boolean inOperation() {
    return busy.get();
  }
}
