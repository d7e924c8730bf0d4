package dev.sparktrainer.train.step;

import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ElementType;
import dev.sparktrainer.collective.ReduceOp;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;

/**
 * The communication thread of a worker: all-reduces (mean) the buckets of a {@link GradientBuckets}
 * arena in the order they are submitted, while the training thread goes on with backward. Buckets
 * complete in submission order; {@link #await} waits for one. While a step's buckets are out, this
 * thread is the only user of the communicator: the training thread calls no collective until it has
 * awaited them all.
 *
 * <p>A failed all-reduce (a dead peer, a timeout: the communicator's own deadline) is rethrown by
 * {@link #await} on the training thread, and every later bucket fails the same way; nothing waits
 * forever: {@code await} gives up after the communicator's operation timeout plus a margin.
 */
final class BucketReducer implements AutoCloseable {
  private static final int[] STOP = new int[0];

  private final int rank;
  private final IntConsumer reduce;
  private final BlockingQueue<int[]> queue;
  private final Thread thread;
  private final long awaitNanos;
  private final Object lock = new Object();
  private long submitted;
  private long completed;
  private RuntimeException failure;
  private volatile long busyNanos;

  BucketReducer(Communicator comm, GradientBuckets buckets, Duration operationTimeout) {
    this(
        comm.rank(),
        reducerOf(comm, buckets, buckets.arena.duplicate().order(buckets.arena.order())),
        buckets.buckets() + 1,
        operationTimeout);
  }

  /**
   * @param rank this rank, for messages
   * @param reduce all-reduces one bucket (on this reducer's thread)
   * @param capacity the most buckets out at once
   */
  BucketReducer(int rank, IntConsumer reduce, int capacity, Duration operationTimeout) {
    this.rank = rank;
    this.reduce = reduce;
    this.queue = new ArrayBlockingQueue<>(capacity);
    this.awaitNanos = operationTimeout.toNanos() + TimeUnit.SECONDS.toNanos(30);
    this.thread = new Thread(this::run, "allreduce-rank" + rank);
    thread.setDaemon(true);
    thread.start();
  }

  /** Queues the all-reduce of bucket {@code b} (the statistics bucket at full precision). */
  void submit(int b) {
    synchronized (lock) {
      submitted++;
    }
    if (!queue.offer(new int[] {b})) {
      throw new IllegalStateException("more buckets submitted than awaited");
    }
  }

  /**
   * Waits until the {@code n}-th bucket submitted (1-based, counting since the reducer started) is
   * reduced; rethrows the reducer's failure.
   */
  void await(long n) {
    long deadline = System.nanoTime() + awaitNanos;
    synchronized (lock) {
      while (completed < n && failure == null) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new IllegalStateException(
              "rank "
                  + rank
                  + ": gradient bucket "
                  + n
                  + " not reduced within "
                  + TimeUnit.NANOSECONDS.toSeconds(awaitNanos)
                  + " s");
        }
        try {
          TimeUnit.NANOSECONDS.timedWait(lock, left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(
              "rank " + rank + ": interrupted waiting for the all-reduce", e);
        }
      }
      if (completed < n) {
        throw failure;
      }
    }
  }

  /** Buckets submitted so far (the number to {@link #await} for all of them). */
  long submitted() {
    synchronized (lock) {
      return submitted;
    }
  }

  /** Total time spent in all-reduce calls so far. */
  long busyNanos() {
    return busyNanos;
  }

  private void run() {
    try {
      while (true) {
        int[] job = queue.take();
        if (job == STOP) {
          return;
        }
        long t0 = System.nanoTime();
        try {
          reduce.accept(job[0]);
        } catch (Throwable t) { // an Error too: the training thread must hear of it now
          synchronized (lock) {
            failure =
                t instanceof RuntimeException
                    ? (RuntimeException) t
                    : new IllegalStateException(
                        "rank " + rank + ": the all-reduce failed: " + t, t);
            lock.notifyAll();
          }
          return;
        }
        busyNanos += System.nanoTime() - t0;
        synchronized (lock) {
          completed++;
          lock.notifyAll();
        }
      }
    } catch (InterruptedException e) {
      synchronized (lock) {
        if (failure == null) {
          failure = new IllegalStateException("rank " + rank + ": all-reduce thread interrupted");
        }
        lock.notifyAll();
      }
    }
  }

  private static IntConsumer reducerOf(
      Communicator comm, GradientBuckets buckets, ByteBuffer view) {
    return b -> reduce(comm, buckets, view, b);
  }

  /**
   * All-reduces (mean) bucket {@code b} of {@code buckets} in place through {@code view} (a
   * duplicate of the arena owned by the calling thread); the statistics bucket travels as float64.
   */
  static void reduce(Communicator comm, GradientBuckets buckets, ByteBuffer view, int b) {
    if (b == buckets.statsBucket()) {
      buckets.widenStats();
      comm.allReduce(buckets.statsWide, ElementType.FLOAT64, ReduceOp.MEAN);
      buckets.narrowStats();
      return;
    }
    view.limit((buckets.start[b] + buckets.count[b]) * 4).position(buckets.start[b] * 4);
    comm.allReduce(view, ElementType.FLOAT32, ReduceOp.MEAN);
  }

  /**
   * Stops the thread. One blocked in an all-reduce is released by the communicator's deadline or
   * its close (the caller closes the communicator next); this waits a moment, not for that.
   */
  @Override
  public void close() {
    queue.clear();
    queue.offer(STOP);
    try {
      thread.join(1000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
