package dev.sparktrainer.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * One epoch with a shuffle buffer, without a producer or batch threads: the output order is worked
 * out on record indices first ({@link ShufflePlan} — the same order as the producer path's), then
 * {@code cycleLength} reader threads take the epoch's items in order and decode each record
 * straight into its row of its batch, on the core that just read it. Batches are handed on in
 * order, each as soon as its last row is in.
 *
 * <p>Memory: a window of open batches (about the shuffle buffer's size in rows), and the records a
 * reader reaches before their batch is open, held decoded until it opens — readers are paced so
 * that none runs ahead of what the open batches need, which bounds them to about what the shuffle
 * buffer would hold. A split whose number of records no longer matches the plan's count fails the
 * epoch with an error naming it.
 */
final class PlannedReaders implements EpochStream.Readers {
  private static final int CHUNK = 16;

  private final PipelineContext ctx;
  private final ShufflePlan plan;
  private final int batchSize;
  private final int window;
  private final int skip;
  private final AdjustableSemaphore permits;
  private final UnorderedReaders.Sink sink;

  /**
   * Opens the epoch's splits, mapped by the options' transform if any (it runs where records are
   * decoded).
   */
  private final Interleaver.Opener opener;

  private final Thread[] threads;
  private final AtomicInteger nextItem = new AtomicInteger();
  private final AtomicInteger running;
  private final AtomicInteger drainRequests = new AtomicInteger();

  /** Open batches by batch number modulo the window; written under this, read without a lock. */
  private final AtomicReferenceArray<Open> open;

  /** Records whose batch is not open yet, by batch number; guarded by this. */
  private final List<Held>[] held;

  /** The first batch not handed on yet; written under this. */
  private volatile int head;

  /** The last interleaved record a reader may take now (what the open batches need). */
  private volatile int limit;

  private volatile boolean stopped;
  private volatile boolean ended;

  PlannedReaders(
      PipelineContext ctx,
      int epoch,
      long skip,
      AdjustableSemaphore permits,
      UnorderedReaders.Sink sink)
      throws IOException {
    this.ctx = ctx;
    this.plan = new ShufflePlan(ctx.shard(), ctx.options(), epoch, ctx.rank());
    this.batchSize = ctx.options().batchSize();
    this.window = ctx.plannedWindow();
    this.skip = (int) Math.min(skip, plan.batches());
    this.permits = permits;
    this.sink = sink;
    this.opener = ctx.opener(epoch);
    this.open = new AtomicReferenceArray<>(window);
    @SuppressWarnings("unchecked")
    List<Held>[] h = new List[plan.batches()];
    this.held = h;
    this.head = this.skip;
    synchronized (this) {
      for (int j = this.skip; j < Math.min(plan.batches(), this.skip + window); j++) {
        open.set(j % window, new Open(j));
      }
      this.limit =
          plan.batches() == this.skip
              ? -1
              : plan.need(Math.min(plan.batches(), this.skip + window) - 1);
      this.ended = plan.batches() == this.skip;
    }
    int k = Math.max(1, Math.min(ctx.options().cycleLength(), plan.items()));
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

  /** A batch being filled by the readers, row by row in any order. */
  private final class Open {
    final int number;
    final int rows;
    final ByteBuffer[] columns;
    final ByteBuffer labels;
    final double[] labelValues;
    final long[] draws;
    final AtomicInteger missing;

    Open(int number) {
      this.number = number;
      this.rows = plan.rows(number, batchSize);
      int cols = ctx.spec().features().size();
      this.columns = new ByteBuffer[cols];
      for (int c = 0; c < cols; c++) {
        columns[c] = ctx.columnPool(c).take();
      }
      this.labels = ctx.labelPool().take();
      this.labelValues = new double[rows];
      this.draws = new long[rows];
      this.missing = new AtomicInteger(rows);
    }

    /** Row {@code row}'s features are in: sets its label; true when it was the batch's last row. */
    boolean done(int row, double label) {
      labelValues[row] = label;
      if (ctx.spec().labelType() == DatasetSpec.LabelType.INT) {
        labels.putLong(row * 8, (long) label);
      } else {
        labels.putFloat(row * 4, (float) label);
      }
      return missing.decrementAndGet() == 0;
    }

    void copy(int row, Record r) {
      int off = 0;
      for (int c = 0; c < columns.length; c++) {
        int w = ctx.spec().features().get(c).size();
        columns[c].asFloatBuffer().put(row * w, r.features, off, w);
        off += w;
      }
      draws[row] = r.draws;
    }

    HostBatch build() {
      if (rows == batchSize) {
        return new HostBatch(columns, labelValues, labels, rows, draws);
      }
      boolean intLabels = ctx.spec().labelType() == DatasetSpec.LabelType.INT;
      ByteBuffer[] exact = new ByteBuffer[columns.length];
      for (int c = 0; c < columns.length; c++) {
        int bytes = 4 * ctx.spec().features().get(c).size() * rows;
        exact[c] = ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
        exact[c].put(0, columns[c], 0, bytes);
      }
      int labelBytes = (intLabels ? 8 : 4) * rows;
      ByteBuffer exactLabels = ByteBuffer.allocateDirect(labelBytes).order(ByteOrder.nativeOrder());
      exactLabels.put(0, labels, 0, labelBytes);
      release();
      return new HostBatch(exact, labelValues, exactLabels, rows, draws);
    }

    void release() {
      for (int c = 0; c < columns.length; c++) {
        ctx.columnPool(c).give(columns[c]);
      }
      ctx.labelPool().give(labels);
    }
  }

  private record Held(int row, Record record) {}

  /** A reader's view of its split: TFRecord examples decoded in place, anything else copied. */
  private static final class Cursor implements AutoCloseable {
    private final RecordStream in;
    private final TFRecordStream tf;
    private final PipelineContext ctx;
    private final float[][] spent = new float[64][];
    private int spentCount;
    private Record current;

    Cursor(RecordStream in, PipelineContext ctx) {
      this.in = in;
      this.tf = in instanceof TFRecordStream t ? t : null;
      this.ctx = ctx;
    }

    boolean advance() throws IOException {
      if (tf != null) {
        return tf.advance();
      }
      if (current != null) {
        give(current.features);
      }
      current = in.next();
      return current != null;
    }

    double decodeInto(Open b, int row) throws IOException {
      if (tf != null) {
        return tf.decodeInto(b.columns, row);
      }
      b.copy(row, current);
      return current.label;
    }

    Record decode() throws IOException {
      if (tf != null) {
        return tf.decode();
      }
      Record r = current;
      current = null;
      return r;
    }

    private void give(float[] a) {
      spent[spentCount++] = a;
      if (spentCount == spent.length) {
        ctx.recordPool().giveAll(spent, spentCount);
        Arrays.fill(spent, null);
        spentCount = 0;
      }
    }

    @Override
    public void close() throws IOException {
      ctx.recordPool().giveAll(spent, spentCount);
      in.close();
    }
  }

  private void read() {
    try {
      while (!stopped && !ended) {
        int v = nextItem.getAndIncrement();
        if (v >= plan.items()) {
          break;
        }
        readItem(v);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable t) {
      fail(t);
    } finally {
      if (running.decrementAndGet() == 0 && !stopped) {
        if (head == plan.batches()) {
          sink.end();
        } else {
          fail(
              new IOException(
                  "The input pipeline of worker "
                      + ctx.rank()
                      + " read every split but made "
                      + (head - skip)
                      + " of its "
                      + (plan.batches() - skip)
                      + " batches"));
        }
      }
    }
  }

  private void readItem(int v) throws IOException, InterruptedException {
    int[] positions = plan.positions(v);
    int[] interleaved = plan.interleaved(v);
    int split = plan.split(v);
    int k = 0;
    int first = skip * batchSize;
    try (Cursor in = new Cursor(opener.open(split), ctx)) {
      while (!stopped && !ended) {
        permits.acquire();
        boolean acquired = true;
        try {
          for (int c = 0; c < CHUNK && !ended; c++) {
            if (!in.advance()) {
              if (k != positions.length) {
                throw new IOException(
                    opener.describe(split)
                        + " ended after "
                        + k
                        + " of the records this worker owns in it: the file changed since the plan counted them");
              }
              return;
            }
            if (k == positions.length) {
              throw new IOException(
                  opener.describe(split)
                      + " holds more records than the "
                      + positions.length
                      + " this worker owns by the plan's count: the file changed since it was counted");
            }
            int p = positions[k];
            int at = interleaved[k];
            k++;
            if (p < first) {
              continue; // not output this epoch, or in a skipped step
            }
            if (at > limit) {
              // Ahead of what the open batches need: wait, without holding a decoding permit.
              permits.release();
              acquired = false;
              awaitLimit(at);
              if (stopped || ended) {
                return;
              }
              permits.acquire();
              acquired = true;
            }
            place(in, p);
          }
        } finally {
          if (acquired) {
            permits.release();
          }
        }
      }
      if (k == positions.length && !stopped && in.advance()) {
        // Every planned record is in (the epoch may have ended with it): the split ends here —
        // which
        // also completes a cache file written through.
        throw new IOException(
            opener.describe(split)
                + " holds more records than the "
                + positions.length
                + " this worker owns by the plan's count: the file changed since it was counted");
      }
    }
  }

  /**
   * Decodes the record at output position {@code p} into its batch, or holds it until the batch
   * opens.
   */
  private void place(Cursor in, int p) throws IOException {
    int j = p / batchSize;
    int row = p % batchSize;
    Open b = openBatch(j);
    if (b == null) {
      Record r = in.decode();
      synchronized (this) {
        b = openBatch(j);
        if (b == null) {
          if (held[j] == null) {
            held[j] = new ArrayList<>();
          }
          held[j].add(new Held(row, r));
          return;
        }
      }
      b.copy(row, r);
      giveBack(r);
      if (b.done(row, r.label)) {
        drain();
      }
      return;
    }
    if (b.done(row, in.decodeInto(b, row))) {
      drain();
    }
  }

  /**
   * Batch {@code j} if it is open. Lock-free: batch j's slot holds it from when it opens until it
   * is complete, and a reader asking for it holds one of its rows.
   */
  private Open openBatch(int j) {
    Open b = open.get(j % window);
    return b != null && b.number == j ? b : null;
  }

  private void giveBack(Record r) {
    ctx.recordPool().giveAll(new float[][] {r.features}, 1);
  }

  private synchronized void awaitLimit(int at) throws InterruptedException {
    while (at > limit && !stopped && !ended) {
      wait(100);
    }
  }

  /**
   * Hands on every complete batch at the head, in order. One thread drains at a time; a reader that
   * finds another draining leaves the work to it (the drainer looks again before it stops).
   */
  private void drain() {
    if (drainRequests.getAndIncrement() != 0) {
      return;
    }
    int missed = 1;
    try {
      do {
        while (!stopped) {
          Open b;
          Open opened = null;
          List<Held> waiting = null;
          synchronized (this) {
            if (head == plan.batches()) {
              break;
            }
            b = open.get(head % window);
            if (b == null || b.missing.get() != 0) {
              break;
            }
            open.set(head % window, null);
            head++;
            int next = head + window - 1;
            if (next < plan.batches()) {
              opened = new Open(next);
              open.set(next % window, opened);
              waiting = held[next];
              held[next] = null;
            }
            limit = plan.need(Math.min(plan.batches(), head + window) - 1);
            if (head == plan.batches()) {
              ended = true;
            }
            notifyAll();
          }
          if (waiting != null) {
            // Outside the lock: readers write the batch's other rows meanwhile; the loop hands it
            // on
            // once it is complete and at the head.
            float[][] spent = new float[waiting.size()][];
            int i = 0;
            for (Held h : waiting) {
              opened.copy(h.row, h.record);
              opened.done(h.row, h.record.label);
              spent[i++] = h.record.features;
            }
            ctx.recordPool().giveAll(spent, i);
          }
          sink.batch(b.build());
        }
        missed = drainRequests.addAndGet(-missed);
      } while (missed != 0);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void fail(Throwable t) {
    boolean first;
    synchronized (this) {
      first = !stopped;
      stopped = true;
      notifyAll();
    }
    if (first) {
      sink.fail(t);
    }
  }

  @Override
  public void stop() {
    synchronized (this) {
      stopped = true;
      notifyAll();
    }
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
    synchronized (this) {
      for (int i = 0; i < open.length(); i++) {
        Open b = open.getAndSet(i, null);
        if (b != null) {
          b.release();
        }
      }
      Arrays.fill(held, null);
    }
  }

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
