package dev.sparktrainer.data;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.hadoop.conf.Configuration;

/**
 * One worker's input pipeline: its {@link HostBatch}es (direct buffers on the Java side), epoch by
 * epoch. No device here: the {@code device} package's {@code PipelineSource} uploads them, and is
 * what the trainer reads ({@code BatchSource}).
 *
 * <pre>{@code
 * DatasetPlan plan = DatasetPlanner.plan(spec, options, spark);       // driver
 * try (InputPipeline in = InputPipeline.create(plan, options, rank, numWorkers, conf)) {
 *   for (int epoch = 0; epoch < epochs; epoch++) {
 *     Iterator<HostBatch> it = in.epoch(epoch, 0);
 *     if (epoch + 1 < epochs) in.prepare(epoch + 1);                  // read ahead across the boundary
 *     while (it.hasNext()) {
 *       HostBatch b = it.next();
 *       try { ... } finally { b.release(); }                          // its buffers go back to the pool
 *     }
 *   }
 * }
 * }</pre>
 *
 * <p>Every worker of a job gets the same {@link #stepsPerEpoch()}; for a fixed seed an epoch's
 * batches are reproducible, so a worker resuming at step k of epoch e calls {@code epoch(e, k)}.
 */
public final class InputPipeline implements AutoCloseable {
  private final PipelineContext ctx;
  private EpochStream current;

  /** A stream started ahead of its turn ({@link #prepare}), and the epoch it was asked for. */
  private EpochStream upcoming;

  private int prepared = -1;
  private boolean closed;

  /** The rest of a resumed epoch ({@link #epochAfter(int, List, long)}), for one position. */
  private PipelineContext remainder;

  private int remainderEpoch = -1;
  private List<EpochSegment> remainderOf = List.of();
  private PipelineStats lastStats;

  private InputPipeline(PipelineContext ctx) {
    this.ctx = ctx;
  }

  /**
   * The pipeline of worker {@code rank} of {@code numWorkers}, with {@code options} as given (the
   * device package's {@code PipelineSource} gives it the host's side of an image transfer).
   *
   * @throws IllegalArgumentException if the options do not fit the memory budget or a worker would
   *     get no step
   */
  public static InputPipeline create(
      DatasetPlan plan, PipelineOptions options, int rank, int numWorkers, Configuration conf) {
    return new InputPipeline(new PipelineContext(plan, options, rank, numWorkers, conf));
  }

  /** What the batches hold: the plan's spec (columns, shapes, label type). */
  public DatasetSpec spec() {
    return ctx.spec();
  }

  /**
   * Whether examples are decoded straight into their batches (no shuffle buffer, room in the
   * budget).
   */
  boolean decodesInBatch() {
    return ctx.decodesInBatch();
  }

  /**
   * Whether readers make whole batches, in the order they are ready (deterministic=false, no
   * shuffle buffer).
   */
  boolean unordered() {
    return ctx.unordered();
  }

  /** Whether a shuffle buffer's order is planned on record indices ({@link PlannedReaders}). */
  boolean planned() {
    return ctx.planned();
  }

  /** The shard this worker reads. */
  public WorkerShard shard() {
    return ctx.shard();
  }

  /** Steps (batches) per epoch, equal on every worker. */
  public long stepsPerEpoch() {
    return ctx.shard().stepsPerEpoch();
  }

  /**
   * The host batches of {@code epoch} for this worker, after its first {@code skipSteps}: exactly
   * {@code stepsPerEpoch() - skipSteps} of them. Each is the caller's until it calls {@link
   * HostBatch#release()}. Reader failures surface from {@code hasNext()/next()} as exceptions
   * naming the file.
   */
  public Iterator<HostBatch> epoch(int epoch, long skipSteps) {
    return start(ctx, epoch, skipSteps, false);
  }

  /**
   * This worker's host batches of {@code epoch} after {@code earlier} layouts consumed parts of it
   * ({@link EpochSegment}s, oldest first), starting after {@code skipSteps} of them: the records
   * they consumed are worked out again and the rest are dealt to this layout's workers with the
   * sharding policy; each gets {@link #stepsAfter} batches. With no earlier segment, this is {@link
   * #epoch}. Released by the caller as {@link #epoch}'s.
   */
  public Iterator<HostBatch> epochAfter(int epoch, List<EpochSegment> earlier, long skipSteps) {
    return after(epoch, earlier, skipSteps, false);
  }

  /** The number of batches {@link #epochAfter} yields from its start. */
  public long stepsAfter(int epoch, List<EpochSegment> earlier) {
    return earlier.isEmpty() ? stepsPerEpoch() : remainder(epoch, earlier).shard().stepsPerEpoch();
  }

  /** The rest of an epoch's pipeline, worked out once per (epoch, earlier segments). */
  private synchronized PipelineContext remainder(int epoch, List<EpochSegment> earlier) {
    if (remainder == null || remainderEpoch != epoch || !remainderOf.equals(earlier)) {
      try {
        remainder = ctx.remainder(epoch, earlier);
      } catch (IOException e) {
        throw new UncheckedIOException(e.getMessage(), e);
      }
      remainderEpoch = epoch;
      remainderOf = List.copyOf(earlier);
    }
    return remainder;
  }

  /**
   * The epoch's batches, each given back when the next is asked for: for benchmarks, tools and
   * tests. A batch is valid until the next call to the iterator, which recycles its buffers.
   */
  HostIterator hostEpoch(int epoch, long skipSteps) {
    return start(ctx, epoch, skipSteps, true);
  }

  /** As {@link #epochAfter(int, List, long)}, each batch given back as {@link #hostEpoch}'s. */
  Iterator<HostBatch> hostEpochAfter(int epoch, List<EpochSegment> earlier, long skipSteps) {
    return after(epoch, earlier, skipSteps, true);
  }

  private Iterator<HostBatch> after(
      int epoch, List<EpochSegment> earlier, long skipSteps, boolean autoRelease) {
    PipelineContext c = earlier.isEmpty() ? ctx : remainder(epoch, earlier);
    // Nothing left for this layout (all consumed, or too little under TRUNCATE): no readers.
    return c != ctx && c.shard().stepsPerEpoch() == skipSteps
        ? Collections.emptyIterator()
        : start(c, epoch, skipSteps, autoRelease);
  }

  private HostIterator start(PipelineContext c, int epoch, long skipSteps, boolean autoRelease) {
    long steps = c.shard().stepsPerEpoch();
    if (skipSteps < 0 || skipSteps > steps) {
      throw new IllegalArgumentException("skipSteps " + skipSteps + " outside 0.." + steps);
    }
    EpochStream previous;
    EpochStream ahead;
    EpochStream stream = null;
    synchronized (this) {
      if (closed) {
        throw new IllegalStateException("the input pipeline is closed");
      }
      previous = current;
      ahead = upcoming;
      current = null;
      upcoming = null;
      prepared = -1;
      if (c == ctx && ahead != null && ahead.epoch() == epoch && ahead.skip() == skipSteps) {
        stream = ahead;
        ahead = null;
      }
    }
    // Closed outside the lock (a producer may be waiting on it to start a stream ahead), and before
    // a new stream starts, so two epochs' readers never hold memory at once.
    if (previous != null) {
      previous.close();
    }
    if (ahead != null) {
      ahead.close();
    }
    if (stream == null) {
      stream = new EpochStream(c, epoch, skipSteps, c.initialPrefetch(), c.initialParallelism());
    }
    // AUTOTUNE goes on from where the last epoch left it (a stream started ahead has a queue of
    // one).
    stream.tune(
        previous != null ? previous.prefetchCapacity() : c.initialPrefetch(),
        previous != null ? previous.parallelism() : stream.parallelism());
    synchronized (this) {
      if (previous != null) {
        lastStats = previous.stats();
      }
      if (closed) {
        stream.close();
        throw new IllegalStateException("the input pipeline is closed");
      }
      current = stream;
    }
    return new HostIterator(stream, c, autoRelease);
  }

  /**
   * Starts reading epoch {@code epoch} (from its first step) ahead of its turn, as soon as the
   * current epoch's records are all read — the shuffle buffer fills and the first batches are ready
   * before the consumer asks for them. The next call to {@link #epoch} uses it if it asks for that
   * epoch from step 0; any other call discards it. Does nothing if the memory budget has no room
   * for a second stream.
   */
  public void prepare(int epoch) {
    EpochStream c;
    synchronized (this) {
      if (closed || !ctx.startAhead() || (upcoming != null && upcoming.epoch() == epoch)) {
        return;
      }
      prepared = epoch;
      c = current;
    }
    if (c == null) {
      startAhead(epoch);
    } else {
      c.afterProduced(() -> startAhead(epoch));
    }
  }

  private void startAhead(int epoch) {
    EpochStream stale;
    synchronized (this) {
      if (closed || prepared != epoch || (upcoming != null && upcoming.epoch() == epoch)) {
        return;
      }
      stale = upcoming;
      upcoming = new EpochStream(ctx, epoch, 0, 1, ctx.initialParallelism());
    }
    if (stale != null) {
      stale.close();
    }
  }

  /** Measurements of the current (or last) epoch. */
  public synchronized PipelineStats stats() {
    return current != null ? current.stats() : lastStats;
  }

  /** Stops reader threads and releases buffers. */
  @Override
  public void close() {
    EpochStream c;
    EpochStream u;
    synchronized (this) {
      closed = true;
      c = current;
      u = upcoming;
      if (c != null) {
        lastStats = c.stats();
      }
      current = null;
      upcoming = null;
    }
    if (c != null) {
      c.close();
    }
    if (u != null) {
      u.close();
    }
  }

  /**
   * Host batches of one epoch, each knowing the pools it goes back to; reader failures surface as
   * {@link UncheckedIOException}s naming the file. With {@code autoRelease} each batch is released
   * when the next is asked for; otherwise by its consumer.
   */
  static final class HostIterator implements Iterator<HostBatch> {
    private final EpochStream stream;
    private final PipelineContext pool;
    private final boolean autoRelease;
    private HostBatch next;
    private HostBatch returned;
    private boolean done;

    HostIterator(EpochStream stream, PipelineContext pool, boolean autoRelease) {
      this.stream = stream;
      this.pool = pool;
      this.autoRelease = autoRelease;
    }

    @Override
    public boolean hasNext() {
      if (next == null && !done) {
        if (autoRelease && returned != null) {
          returned.release();
          returned = null;
        }
        try {
          next = stream.take();
        } catch (IOException e) {
          done = true;
          throw new UncheckedIOException(e.getMessage(), e);
        }
        done = next == null;
      }
      return next != null;
    }

    @Override
    public HostBatch next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      HostBatch b = next;
      next = null;
      b.pool(pool);
      if (autoRelease) {
        returned = b;
      }
      return b;
    }

    PipelineStats stats() {
      return stream.stats();
    }
  }
}
