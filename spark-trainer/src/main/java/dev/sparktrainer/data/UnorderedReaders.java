package dev.sparktrainer.data;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One epoch without a shuffle buffer and with {@code deterministic=false} (tf.data's {@code
 * interleave(..., deterministic=False)}): each of {@code cycleLength} reader threads takes the next
 * split of the epoch's order, decodes its records straight into a batch of its own — on the core
 * that just read and checked them — and hands whole batches to the prefetch queue as they fill. No
 * producer thread, no batch threads, one hand-off per batch; batches come in the order they are
 * ready, each made of consecutive records of one or two splits.
 *
 * <p>What does not change: every record of the shard is read once per epoch before any is repeated,
 * every worker takes exactly the shard's steps, no record read is dropped while steps remain (the
 * readers' partial batches are merged, and a last partial batch is emitted exactly when the ordered
 * pipeline would), errors name the file and offset, and memory is one batch per reader plus the
 * prefetch queue. PAD: once the pass is finished and every unemitted row is gathered, the reader
 * that finished last repeats the shard alone (padding is at most what the largest worker has more).
 * A resumed epoch ({@code skip > 0}) produces the remaining number of steps from a fresh pass.
 */
final class UnorderedReaders implements EpochStream.Readers {
  /** What the epoch's stream does with the output. */
  interface Sink {
    /** Puts a ready batch; waits while the queue is full. */
    void batch(HostBatch b) throws InterruptedException;

    /** Every step is produced (or the records ran out): called once, by the last reader. */
    void end();

    /** A reader failed: called once, with the first failure. */
    void fail(Throwable t);
  }

  private final PipelineContext ctx;
  private final int[] order;
  private final long steps;
  private final boolean repeat;
  private final AdjustableSemaphore permits;
  private final Sink sink;
  private final Interleaver.Opener opener;
  private final Thread[] threads;
  private final AtomicInteger nextItem = new AtomicInteger();
  private final AtomicInteger finishedItems = new AtomicInteger();
  private final AtomicLong emitted = new AtomicLong();
  private final AtomicLong rows = new AtomicLong();
  private final AtomicInteger running;
  private BatchBuilder tail; // guarded by this
  private volatile boolean stopped;

  UnorderedReaders(
      PipelineContext ctx, int epoch, long skip, AdjustableSemaphore permits, Sink sink) {
    this.ctx = ctx;
    this.order = ctx.shard().epochOrder(epoch, ctx.options());
    this.steps = ctx.shard().stepsPerEpoch() - skip;
    this.repeat = ctx.options().uneven() != PipelineOptions.UnevenPolicy.NONE;
    this.permits = permits;
    this.sink = sink;
    this.opener = ctx.opener(epoch);
    int k = Math.max(1, Math.min(ctx.options().cycleLength(), order.length));
    this.threads = new Thread[k];
    this.running = new AtomicInteger(k);
    for (int i = 0; i < k; i++) {
      threads[i] = new Thread(this::read, "pipeline-r" + ctx.rank() + "-e" + epoch + "-reader" + i);
      threads[i].setDaemon(true);
    }
    for (Thread t : threads) {
      t.start();
    }
  }

  private void read() {
    BatchBuilder b = null;
    RecordStream in = null;
    boolean padder = false;
    int idx = nextItem.getAndIncrement();
    try {
      while (!stopped && emitted.get() < steps) {
        if (in == null) {
          if (idx >= order.length && !padder) {
            break;
          }
          in = opener.open(order[idx % order.length]);
        }
        if (b == null) {
          b = new BatchBuilder(ctx);
        }
        boolean more;
        int before = b.size();
        permits.acquire();
        try {
          more = fill(in, b);
        } finally {
          permits.release();
        }
        rows.addAndGet(b.size() - before);
        if (!more) {
          in.close();
          in = null;
          int next;
          if (padder) {
            next = idx + 1; // alone now: the shard again, in the epoch's order
          } else {
            next = nextItem.getAndIncrement();
            if (next >= order.length) {
              // This reader's share of the pass is done. Its rows join the tail before its item
              // counts as finished, so when the last item finishes, every unemitted row is there.
              handIn(b);
              b = null;
              if (finishedItems.incrementAndGet() == order.length && repeat && needMore()) {
                if (rows.get() == 0) {
                  throw new IOException(
                      "Worker "
                          + ctx.rank()
                          + " owns no records to fill its "
                          + ctx.shard().stepsPerEpoch()
                          + " steps");
                }
                padder =
                    true; // the last reader of the pass pads, alone, from the start of the shard
                b = takeTail();
                next = order.length;
              }
            } else {
              finishedItems.incrementAndGet();
            }
          }
          idx = next;
        }
        if (b != null && b.full()) {
          HostBatch hb = b.build();
          b = null;
          if (!emit(hb)) {
            break;
          }
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable t) {
      fail(t);
    } finally {
      if (in != null) {
        try {
          in.close();
        } catch (IOException | RuntimeException e) {
          // the reader's own failure, if any, is the one reported
        }
      }
    }
    finish(b);
  }

  /**
   * Whether the rows read so far cannot make the epoch's steps, so the shard must be repeated
   * (PAD). As in the ordered pipeline, without dropRemainder a last partial batch ends the epoch
   * rather than one padded with repeated records.
   */
  private boolean needMore() {
    long batchSize = ctx.options().batchSize();
    return rows.get()
        < (ctx.options().dropRemainder() ? steps * batchSize : (steps - 1) * batchSize + 1);
  }

  /** Moves a reader's partial batch into the shared tail; full tails are emitted. */
  private synchronized void handIn(BatchBuilder b) throws InterruptedException {
    if (b == null) {
      return;
    }
    try {
      while (b.size() > 0 && !stopped) {
        if (tail == null) {
          tail = new BatchBuilder(ctx);
        }
        tail.takeRowsFrom(b);
        if (tail.full()) {
          HostBatch hb = tail.build();
          tail = null;
          if (!emit(hb)) {
            return;
          }
        }
      }
    } finally {
      b.release();
    }
  }

  private synchronized BatchBuilder takeTail() {
    BatchBuilder t = tail;
    tail = null;
    return t;
  }

  /** Fills {@code b} from {@code in}; false when {@code in} ended first. */
  private static boolean fill(RecordStream in, BatchBuilder b) throws IOException {
    if (in instanceof TFRecordStream) {
      TFRecordStream t = (TFRecordStream) in;
      while (!b.full()) {
        if (!t.nextInto(b)) {
          return false;
        }
      }
      return true;
    }
    if (in instanceof ParquetStream) {
      ParquetStream p = (ParquetStream) in;
      while (!b.full()) {
        if (!p.nextInto(b)) {
          return false;
        }
      }
      return true;
    }
    while (!b.full()) {
      Record r = in.next();
      if (r == null) {
        return false;
      }
      b.add(r);
    }
    return true;
  }

  /** Emits one of the epoch's steps; false (the batch recycled) when they are all emitted. */
  private boolean emit(HostBatch hb) throws InterruptedException {
    if (emitted.getAndIncrement() >= steps) {
      ctx.recycle(hb);
      return false;
    }
    sink.batch(hb);
    return true;
  }

  private void fail(Throwable t) {
    boolean first;
    synchronized (this) {
      first = !stopped;
      stopped = true;
    }
    if (first) {
      sink.fail(t);
    }
  }

  /**
   * A reader is done: its partial batch joins the shared tail. The last reader emits what is left
   * as the last, partial step — when the ordered pipeline would (no dropRemainder and exactly one
   * step to go) — and ends the epoch.
   */
  private void finish(BatchBuilder b) {
    boolean last;
    try {
      synchronized (this) {
        handIn(b);
        last = running.decrementAndGet() == 0;
        if (last && tail != null) {
          if (!stopped
              && tail.size() > 0
              && !ctx.options().dropRemainder()
              && emitted.get() == steps - 1) {
            HostBatch hb = tail.build();
            tail = null;
            emit(hb);
          } else {
            tail.release();
            tail = null;
          }
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    if (last && !stopped) {
      sink.end();
    }
  }

  /** Stops the readers (the stream is closed) and waits for them. */
  @Override
  public void stop() {
    stopped = true;
    for (Thread t : threads) {
      t.interrupt();
    }
    for (Thread t : threads) {
      try {
        t.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** Whether a reader is still running. */
  @Override
  public boolean alive() {
    for (Thread t : threads) {
      if (t.isAlive()) {
        return true;
      }
    }
    return false;
  }
}
