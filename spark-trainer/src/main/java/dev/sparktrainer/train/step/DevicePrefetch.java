package dev.sparktrainer.train.step;

import dev.sparktrainer.data.Batch;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * A prefetch-to-device slot: batch N+1 is taken from the source (on a GPU that is its upload from
 * the pipeline's direct buffers) on a thread of its own while step N runs, so the training thread
 * finds the next batch on the device when it asks. One batch ahead: the slot holds at most one
 * batch beyond the one being trained on.
 *
 * <p>The source is only ever called from the slot's thread, one call at a time. A failure of the
 * source (a corrupt record, a reader error) is rethrown to the training thread as it was thrown.
 * {@link #close} stops the thread and closes a batch made but not taken.
 */
public final class DevicePrefetch implements Iterator<Batch>, AutoCloseable {
  private static final Batch END = new Batch(null, null, null, 0);

  private final Iterator<Batch> source;
  private final ExecutorService thread;
  private Future<Batch> pending;
  private Batch ready;

  /** Set by {@link #close}; a batch the slot's thread makes after it is closed by that thread. */
  private final Object lock = new Object();

  private boolean closed;

  public DevicePrefetch(Iterator<Batch> source, String name) {
    this.source = source;
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

  /** On the slot's thread: the next batch, or END; nothing once closed. */
  private Batch make() {
    synchronized (lock) {
      if (closed) {
        return END;
      }
    }
    Batch b = source.hasNext() ? source.next() : END;
    synchronized (lock) {
      if (closed && b != END) {
        b.close(); // closed while it was being made: nobody will take it
        return END;
      }
    }
    return b;
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
      return pending.get();
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
  }

  /** Stops the slot's thread; a batch it made that was not taken is closed. */
  @Override
  public void close() {
    if (ready != null && ready != END) {
      ready.close();
    }
    ready = null;
    synchronized (lock) {
      closed = true;
    }
    // A fetch not started will not run; one under way is interrupted (a source blocked on its
    // readers gives up) and closes what it makes itself; one done left a batch that is closed here.
    if (pending != null && !pending.cancel(true)) {
      try {
        Batch b = pending.get();
        if (b != END) {
          b.close();
        }
      } catch (ExecutionException | CancellationException e) {
        // Nothing was made.
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    pending = null;
    // The source is closed after this: wait until the slot's thread no longer uses it.
    thread.shutdown();
    try {
      thread.awaitTermination(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
