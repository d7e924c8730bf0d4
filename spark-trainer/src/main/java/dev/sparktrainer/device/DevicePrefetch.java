package dev.sparktrainer.device;

import java.time.Duration;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * A prefetch-to-device slot: batch N+1 is taken from the source (for the input pipeline that is its
 * upload from the pipeline's direct buffers, {@link BatchUpload}) on a thread of its own while step
 * N runs, so the training thread finds the next batch on the device when it asks. One batch ahead:
 * the slot holds at most one batch beyond the one being trained on.
 *
 * <p>The source is only ever called from the slot's thread, one call at a time. A failure of the
 * source (a corrupt record, a reader error) is rethrown to the training thread as it was thrown.
 * {@link #close} stops the thread and closes every batch made but not taken; it returns only once
 * the thread is out of the source, so the caller may close the source after it.
 */
public final class DevicePrefetch implements Iterator<Batch>, AutoCloseable {
  private static final Batch END = new Batch(null, null, null, 0);

  /** How long {@link #close} waits for the slot's thread to leave the source. */
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

  private final Iterator<Batch> source;
  private final String name;
  private final Duration closeTimeout;
  private final ExecutorService thread;
  private Future<?> pending;
  private Batch ready;

  /**
   * Guards {@link #made} and {@link #closed}: the slot hands a batch over and close() takes the
   * slot's content under it, so each batch is either handed over (and close() finds it) or made
   * after close() began (and the slot's thread closes it). Nothing travels as a Future's result,
   * which a cancel would drop.
   */
  private final Object lock = new Object();

  private Batch made;
  private boolean closed;

  /** A slot over {@code source} whose thread is called {@code name}. */
  public DevicePrefetch(Iterator<Batch> source, String name) {
    this(source, name, CLOSE_TIMEOUT);
  }

  DevicePrefetch(Iterator<Batch> source, String name, Duration closeTimeout) {
    this.source = source;
    this.name = name;
    this.closeTimeout = closeTimeout;
    this.thread =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, name);
              t.setDaemon(true);
              return t;
            });
    fetch();
  }

  private void fetch() {
    pending = thread.submit(this::make);
  }

  /** On the slot's thread: makes the next batch (or END) and hands it over; nothing once closed. */
  private void make() {
    synchronized (lock) {
      if (closed) {
        return;
      }
    }
    Batch b = source.hasNext() ? source.next() : END;
    synchronized (lock) {
      if (!closed) {
        made = b;
        return;
      }
    }
    if (b != END) {
      b.close(); // closed while it was being made: nobody will take it
    }
  }

  @Override
  public boolean hasNext() {
    if (ready == null) {
      ready = await();
    }
    return ready != END;
  }

  @Override
  public Batch next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    Batch b = ready;
    ready = null;
    fetch(); // the next one is made while the caller trains on this one
    return b;
  }

  private Batch await() {
    try {
      pending.get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new IllegalStateException("The input pipeline failed: " + cause, cause);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted waiting for the next batch", e);
    }
    synchronized (lock) {
      Batch b = made;
      made = null;
      return b;
    }
  }

  /**
   * Stops the slot's thread; a batch it made that was not taken is closed, now or by the thread
   * when it finishes one. Returns once the thread has left the source.
   *
   * @throws IllegalStateException when the thread is still in the source after the close timeout
   *     (30 s; a reader blocked in native code ignores the interrupt): the source must not be
   *     closed under it, and the caller leaves it open
   */
  @Override
  public void close() {
    if (ready != null && ready != END) {
      ready.close();
    }
    ready = null;
    Batch left;
    synchronized (lock) {
      closed = true;
      left = made;
      made = null;
    }
    if (left != null && left != END) {
      left.close();
    }
    // A fetch not started will not run; one under way is interrupted (a source blocked on its
    // readers gives up) and closes what it makes itself.
    if (pending != null) {
      pending.cancel(true);
      pending = null;
    }
    thread.shutdown();
    boolean ended;
    try {
      ended = thread.awaitTermination(closeTimeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      ended = thread.isTerminated();
    }
    if (!ended) {
      throw new IllegalStateException(
          "The device prefetch thread "
              + name
              + " is still in the input pipeline "
              + closeTimeout.toMillis()
              + " ms after close (it ignored the interrupt): the pipeline is left open rather than"
              + " closed under it");
    }
  }
}
