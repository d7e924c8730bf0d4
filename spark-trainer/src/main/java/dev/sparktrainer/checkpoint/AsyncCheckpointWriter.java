package dev.sparktrainer.checkpoint;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Writes snapshots to a {@link CheckpointStore} on a background thread, off the training loop's
 * critical path: one write in flight at a time.
 *
 * <p>At most one snapshot waits behind the write in flight: a newer one replaces it (newest wins),
 * and the older one is logged as superseded — the store is slower than the checkpoint interval, and
 * writing every snapshot would only make the queue, and the memory it holds, grow. So the writer
 * holds at most two snapshots (in flight and waiting), and {@link #submit} never waits for the
 * store.
 *
 * <p>No failure vanishes: a write that fails is logged when it happens and reported, once, by the
 * next call of {@link #submit}, {@link #awaitIdle} or {@link #close} (whichever comes first), as an
 * {@link IOException} naming the step and the directory, with the store's error as its cause
 * (further failures before that call are attached to it as suppressed). After reporting, the writer
 * goes on: whether a failed checkpoint stops the training is the caller's decision.
 *
 * <p>Meant to be called from the training thread; every method is also safe to call concurrently.
 */
public final class AsyncCheckpointWriter implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(AsyncCheckpointWriter.class.getName());

  /** How often {@link #awaitIdle} says it is still waiting. */
  private static final long PROGRESS_LOG_NANOS = TimeUnit.SECONDS.toNanos(60);

  /** How long {@link #close} waits for the idle thread to end. */
  private static final long JOIN_MILLIS = 10_000;

  private final CheckpointStore store;
  private final Thread thread;
  private final ReentrantLock lock = new ReentrantLock();

  /** Signalled whenever the fields below change. */
  private final Condition changed = lock.newCondition();

  // Guarded by lock.
  private CheckpointState waiting;
  private CheckpointState inFlight;
  private IOException unreported;
  private boolean closed;

  /**
   * Set by {@link #abort}: the write in flight stops before its rename, nothing more is written.
   */
  private volatile boolean aborted;

  private long written;
  private long superseded;
  private long failed;

  /** Starts the writer's daemon thread, {@code checkpoint-writer}. */
  public AsyncCheckpointWriter(CheckpointStore store) {
    this.store = Objects.requireNonNull(store, "store");
    thread = new Thread(this::run, "checkpoint-writer");
    thread.setDaemon(true);
    thread.start();
  }

  /**
   * Queues a snapshot and returns at once (never waits for the store). If a snapshot is already
   * waiting behind the write in flight, the new one replaces it (the older one is logged as
   * superseded: the store is slower than the checkpoint interval).
   *
   * <p>The snapshot is written later, on another thread: its arrays must not be modified after this
   * call.
   *
   * @throws IOException naming the step and the directory, the store's error attached, if an
   *     earlier write failed (reported once); {@code snapshot} is not queued then
   * @throws IllegalStateException if the writer is closed
   */
  public void submit(CheckpointState snapshot) throws IOException {
    Objects.requireNonNull(snapshot, "snapshot");
    lock.lock();
    try {
      if (closed) {
        throw new IllegalStateException(
            "The checkpoint writer for " + store.directory() + " is closed");
      }
      throwUnreported();
      if (waiting != null) {
        superseded++;
        LOG.log(
            System.Logger.Level.WARNING,
            "Checkpoint of step "
                + waiting.step()
                + " superseded by step "
                + snapshot.step()
                + " before it was written: the store "
                + store.directory()
                + " is slower than the checkpoint interval"
                + (inFlight != null
                    ? " (step " + inFlight.step() + " is still being written)"
                    : ""));
      }
      waiting = snapshot;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Waits until every submitted snapshot is written (or superseded); rethrows a failed write's
   * error. Says in the log every minute what it is still waiting for (a store that hangs is bounded
   * by its own timeouts).
   *
   * @throws IOException naming the step and the directory, the store's error attached, if a write
   *     failed (reported once)
   * @throws InterruptedIOException if interrupted while waiting (the interrupt flag is kept)
   */
  public void awaitIdle() throws IOException {
    lock.lock();
    try {
      long start = System.nanoTime();
      long nextLog = start + PROGRESS_LOG_NANOS;
      while (waiting != null || inFlight != null) {
        if (!thread.isAlive()) {
          // Cannot happen (the thread catches everything), but a dead thread must not mean a hang.
          throw new IOException(
              "The checkpoint writer thread for "
                  + store.directory()
                  + " has stopped with "
                  + describePending()
                  + " unwritten");
        }
        try {
          changed.await(1, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new InterruptedIOException(
              "Interrupted while waiting for "
                  + describePending()
                  + " to be written to "
                  + store.directory());
        }
        long now = System.nanoTime();
        if (now - nextLog >= 0 && (waiting != null || inFlight != null)) {
          LOG.log(
              System.Logger.Level.WARNING,
              "Still waiting for "
                  + describePending()
                  + " to be written to "
                  + store.directory()
                  + " ("
                  + TimeUnit.NANOSECONDS.toSeconds(now - start)
                  + " s)");
          nextLog = now + PROGRESS_LOG_NANOS;
        }
      }
      throwUnreported();
    } finally {
      lock.unlock();
    }
  }

  /** Checkpoints written so far. */
  public long written() {
    lock.lock();
    try {
      return written;
    } finally {
      lock.unlock();
    }
  }

  /** Snapshots replaced by a newer one before they were written. */
  public long superseded() {
    lock.lock();
    try {
      return superseded;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Writes that failed (each is reported by {@link #submit}, {@link #awaitIdle} or {@link #close}).
   */
  public long failed() {
    lock.lock();
    try {
      return failed;
    } finally {
      lock.unlock();
    }
  }

  /**
   * {@link #awaitIdle}, then stops the thread. Returns at once after a failure that was already
   * reported; throws one that was not. Closing twice is allowed.
   */
  @Override
  public void close() throws IOException {
    try {
      awaitIdle();
    } catch (InterruptedIOException e) {
      // The task is being killed (Spark interrupts it when the stage fails): it will not wait for
      // the
      // write in flight, so that write must not complete, or prune the directory, behind the retry.
      abort();
      throw e;
    } finally {
      lock.lock();
      try {
        closed = true;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
      // Interrupted: do not wait; the daemon thread ends after the write it is doing.
      if (Thread.currentThread() != thread && !Thread.currentThread().isInterrupted()) {
        try {
          thread.join(JOIN_MILLIS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
          LOG.log(
              System.Logger.Level.WARNING,
              "The checkpoint writer thread for "
                  + store.directory()
                  + " did not end within "
                  + JOIN_MILLIS
                  + " ms of close; leaving it (a daemon)");
        }
      }
    }
  }

  /**
   * The training attempt failed: drop the snapshot waiting, and stop the one in flight before its
   * rename (its temporary file is deleted). A failed attempt's checkpoint must not complete, or
   * prune the directory, while the next attempt (Spark's stage retry) resumes from and writes into
   * it. Then {@link #close} returns as soon as the write in flight has stopped; failures are not
   * reported.
   */
  public void abort() {
    lock.lock();
    try {
      aborted = true;
      waiting = null;
      unreported = null;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  private void run() {
    while (true) {
      CheckpointState next;
      lock.lock();
      try {
        while (waiting == null && !closed) {
          // Nobody but close() has a reason to interrupt this thread, and close() does not.
          changed.awaitUninterruptibly();
        }
        if (waiting == null) {
          return;
        }
        next = waiting;
        waiting = null;
        inFlight = next;
      } finally {
        lock.unlock();
      }
      Throwable error = null;
      try {
        store.write(next, () -> aborted);
      } catch (CancellationException c) {
        LOG.log(System.Logger.Level.INFO, c.getMessage());
      } catch (Throwable t) { // an Error too: the caller must hear of it, and the thread must go on
        error = t;
      }
      lock.lock();
      try {
        inFlight = null;
        if (error == null) {
          written++;
        } else {
          failed++;
          IOException e =
              new IOException(
                  "Checkpoint of step "
                      + next.step()
                      + " to "
                      + store.directory()
                      + " failed: "
                      + error,
                  error);
          LOG.log(
              System.Logger.Level.WARNING,
              e.getMessage() + " (reported to the training loop on its next call)",
              error);
          if (unreported == null) {
            unreported = e;
          } else {
            unreported.addSuppressed(e);
          }
        }
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  /** Throws the unreported failure, if any, and forgets it. Called with the lock held. */
  private void throwUnreported() throws IOException {
    IOException e = unreported;
    if (e != null) {
      unreported = null;
      // A new exception, so that the stack shows the caller; the writer's is the cause.
      IOException reported = new IOException(e.getMessage(), e.getCause());
      for (Throwable s : e.getSuppressed()) {
        reported.addSuppressed(s);
      }
      throw reported;
    }
  }

  /** What is waiting or in flight, for messages. Called with the lock held. */
  private String describePending() {
    if (inFlight != null && waiting != null) {
      return "the checkpoints of steps " + inFlight.step() + " and " + waiting.step();
    }
    CheckpointState s = inFlight != null ? inFlight : waiting;
    return s == null ? "no checkpoint" : "the checkpoint of step " + s.step();
  }
}
