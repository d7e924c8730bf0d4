package dev.sparktrainer.train;

import dev.sparktrainer.data.Batch;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

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
final class DevicePrefetch implements Iterator<Batch>, AutoCloseable {
  private static final Batch END = new Batch(null, null, null, 0);

  private final Iterator<Batch> source;
  private final ExecutorService thread;
  private Future<Batch> pending;
  private Batch ready;

  DevicePrefetch(Iterator<Batch> source, String name) {
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
    pending = thread.submit(() -> source.hasNext() ? source.next() : END);
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
    // A fetch not started yet is cancelled; one under way is interrupted (a source blocked on its
    // readers gives up) and awaited, and the batch it made is closed.
    if (pending != null && !pending.cancel(false)) {
      thread.shutdownNow();
      try {
        Batch b = pending.get(30, TimeUnit.SECONDS);
        if (b != END) {
          b.close();
        }
      } catch (ExecutionException | CancellationException | TimeoutException e) {
        // Nothing was made, or the source is stuck: closing the source (next) releases it.
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    pending = null;
    thread.shutdownNow();
  }
}
