package dev.sparktrainer.data;

import java.io.IOException;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.FutureTask;
import java.util.concurrent.RunnableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One epoch of one worker: a producer thread runs interleave → shuffle buffer → batch into the
 * prefetch queue; the consumer takes ready batches. The batch stage — copying the batch's records
 * into its direct buffers, which for shuffled records means reading them back from main memory —
 * runs on a small pool of batcher threads, in parallel, and the queue holds the batches' futures in
 * order (tf.data's deterministic parallel map): the order never depends on thread timing. It yields
 * exactly the shard's steps (minus the skipped ones): a worker that runs out of records repeats its
 * shard (PAD), one with more stops early (TRUNCATE).
 *
 * <p>When the consumer takes a batch whose copy no batcher has started yet (on a busy machine the
 * batchers may wait for a core), it makes the copy itself rather than wait for one to be scheduled.
 * A stream can be started ahead of its turn (the next epoch, while this one's last batches are
 * consumed): {@link #afterProduced} runs once the producer has read everything and closed its
 * readers.
 *
 * <p>With {@code deterministic=false} and no shuffle buffer there is no producer and no batcher:
 * {@link UnorderedReaders} make whole batches and put them in the same prefetch queue, and the rest
 * (measurements, AUTOTUNE, read-ahead, close) is the same.
 */
final class EpochStream implements AutoCloseable {
  /**
   * Reader threads that make whole batches themselves ({@link UnorderedReaders}, {@link
   * PlannedReaders}).
   */
  interface Readers {
    /** Stops the readers (the stream is closed) and waits for them. */
    void stop();

    /** Whether a reader is still running. */
    boolean alive();
  }

  private static final Logger LOG = LoggerFactory.getLogger(EpochStream.class);
  private static final Object END = new Object();
  private static final int TUNE_WINDOW = 16;

  private final PipelineContext ctx;
  private final int epoch;
  private final long skip;
  private final ResizableQueue<Object> prefetch;
  private final AdjustableSemaphore permits;
  private final Thread producer;
  private final ExecutorService batcher;

  /** Instead of producer and batchers: readers that make the batches themselves. */
  private final Readers readers;

  private volatile boolean closed;
  private boolean ended;
  private Runnable afterProduced;
  private boolean produced;

  // consumer-side measurements
  private long batches;
  private long records;
  private long waitNanos;
  private long consumerNanos;
  private long lastReturn;
  private long windowWait;
  private long windowTotal;
  private int windowBatches;

  /** The pipeline's image clock when this stream started (its images are what it added since). */
  private final long decodedAtStart;

  private final long decodeNanosAtStart;

  /**
   * Starts the producer of {@code epoch}, skipping its first {@code skip} batches, with {@code
   * prefetch} batches of queue and {@code parallelism} decoding readers to begin with.
   */
  EpochStream(PipelineContext ctx, int epoch, long skip, int prefetch, int parallelism) {
    this.ctx = ctx;
    this.epoch = epoch;
    this.skip = skip;
    this.prefetch = new ResizableQueue<>(prefetch);
    this.permits = new AdjustableSemaphore(parallelism);
    this.decodedAtStart = ctx.imageClock().images();
    this.decodeNanosAtStart = ctx.imageClock().nanos();
    if (ctx.unordered() || ctx.planned()) {
      this.producer = null;
      this.batcher = null;
      UnorderedReaders.Sink sink =
          new UnorderedReaders.Sink() {
            @Override
            public void batch(HostBatch b) throws InterruptedException {
              EpochStream.this.prefetch.put(b, false);
            }

            @Override
            public void end() {
              try {
                EpochStream.this.prefetch.put(END, true);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
              }
              producedAll();
            }

            @Override
            public void fail(Throwable t) {
              if (!closed) {
                try {
                  EpochStream.this.prefetch.put(new Failure(t), true);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              }
            }
          };
      Readers r;
      if (ctx.unordered()) {
        r = new UnorderedReaders(ctx, epoch, skip, permits, sink);
      } else {
        try {
          r = new PlannedReaders(ctx, epoch, skip, permits, sink);
        } catch (IOException | RuntimeException e) {
          sink.fail(e); // reported by take(), as a reader's failure would be
          r =
              new Readers() {
                @Override
                public void stop() {}

                @Override
                public boolean alive() {
                  return false;
                }
              };
        }
      }
      this.readers = r;
      return;
    }
    this.readers = null;
    String prefix = "pipeline-r" + ctx.rank() + "-e" + epoch;
    AtomicInteger batchers = new AtomicInteger();
    this.batcher =
        Executors.newFixedThreadPool(
            ctx.batchThreads(),
            r -> {
              Thread t = new Thread(r, prefix + "-batch" + batchers.getAndIncrement());
              t.setDaemon(true);
              return t;
            });
    this.producer = new Thread(this::produce, prefix);
    producer.setDaemon(true);
    producer.start();
  }

  private void produce() {
    WorkerShard shard = ctx.shard();
    PipelineOptions o = ctx.options();
    int[] order = shard.epochOrder(epoch, o);
    int b = o.batchSize();
    long target = shard.stepsPerEpoch();
    Record[] buf = new Record[b];
    // bucket_by_sequence_length: a batch per bucket as it fills; at the shard's end the buckets'
    // rest, in bucket order, fills the last batches — so as many steps as without buckets.
    int[] bounds = ctx.spec().hasSequences() ? o.bucketBoundaries() : new int[0];
    Record[][] buckets = new Record[bounds.length == 0 ? 0 : bounds.length + 1][];
    int[] inBucket = new int[buckets.length];
    for (int k = 0; k < buckets.length; k++) {
      buckets[k] = new Record[b];
    }
    int n = 0;
    long emitted = 0;
    Random rnd = new Random(Seeds.mix(o.seed(), epoch, ctx.rank(), 2));
    Record[] shuffle = new Record[Math.max(1, o.shuffleBuffer())];
    int held = 0;
    try (Interleaver in =
        new Interleaver(
            order,
            o.cycleLength(),
            o.blockLength(),
            ctx.slotCapacity(),
            permits,
            ctx.opener(epoch),
            "pipeline-r" + ctx.rank() + "-reader")) {
      boolean sourceDone = false;
      long fromThisPass = 0;
      while (emitted < target && !closed) {
        // Shuffle buffer: fill, then emit a random element and put the new one in its place.
        Record r = null;
        if (!sourceDone) {
          Record incoming = in.next();
          if (incoming == null) {
            sourceDone = true;
          } else {
            fromThisPass++;
            if (o.shuffleBuffer() <= 1) {
              r = incoming;
            } else if (held < shuffle.length) {
              shuffle[held++] = incoming;
              continue;
            } else {
              int i = rnd.nextInt(held);
              r = shuffle[i];
              shuffle[i] = incoming;
            }
          }
        }
        if (r == null && sourceDone) {
          if (held > 0) {
            int i = rnd.nextInt(held);
            r = shuffle[i];
            shuffle[i] = shuffle[--held];
            shuffle[held] = null;
          } else {
            // The shard is exhausted.
            for (int k = 0; k < buckets.length && emitted < target; k++) {
              for (int i = 0; i < inBucket[k] && emitted < target; i++) {
                buf[n++] = buckets[k][i];
                buckets[k][i] = null;
                if (n == b) {
                  emitted = emit(buf, n, emitted);
                  n = 0;
                }
              }
              inBucket[k] = 0;
            }
            if (emitted >= target) {
              break;
            }
            if (n > 0 && !o.dropRemainder() && emitted == target - 1) {
              emitted = emit(buf, n, emitted);
              n = 0;
              break;
            }
            if (o.uneven() == PipelineOptions.UnevenPolicy.NONE) {
              break; // every record read once; no padding
            }
            if (fromThisPass == 0) {
              throw new IOException(
                  "Worker " + ctx.rank() + " owns no records to fill its " + target + " steps");
            }
            in.restart(); // PAD: repeat the shard
            sourceDone = false;
            fromThisPass = 0;
            continue;
          }
        }
        if (r == null) {
          continue;
        }
        if (buckets.length > 0) {
          int k = bucketOf(r, bounds);
          buckets[k][inBucket[k]++] = r;
          if (inBucket[k] == b) {
            emitted = emit(buckets[k], b, emitted);
            inBucket[k] = 0;
          }
          continue;
        }
        buf[n++] = r;
        if (n == b) {
          emitted = emit(buf, n, emitted);
          n = 0;
        }
      }
      prefetch.put(END, true);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    } catch (Throwable t) {
      if (!closed) {
        try {
          prefetch.put(new Failure(t), true);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
        }
      }
      return;
    }
    producedAll();
  }

  /**
   * The bucket of a record: the first whose boundary exceeds its length (the longest of its
   * sequence columns, as batched: at most the column's maximum), else the last.
   */
  private int bucketOf(Record r, int[] bounds) {
    int len = 0;
    int off = 0;
    for (DatasetSpec.Feature f : ctx.spec().features()) {
      if (f.sequence()) {
        len = Math.max(len, Math.min(Slots.getInt(r.features, off), f.maxLength()));
      }
      off += f.size();
    }
    for (int k = 0; k < bounds.length; k++) {
      if (len < bounds[k]) {
        return k;
      }
    }
    return bounds.length;
  }

  /** Everything is read and the readers are closed: runs what waits for that. */
  private void producedAll() {
    Runnable next;
    synchronized (this) {
      produced = true;
      next = closed ? null : afterProduced;
      afterProduced = null;
    }
    if (next != null) {
      next.run();
    }
  }

  /**
   * Runs {@code r} once everything is read and the readers are closed: on the producer's thread
   * when that happens, at once when it already has. Not run if the stream fails or is closed first.
   */
  void afterProduced(Runnable r) {
    synchronized (this) {
      if (!produced) {
        afterProduced = r;
        return;
      }
      if (closed) {
        return;
      }
    }
    r.run();
  }

  int epoch() {
    return epoch;
  }

  long skip() {
    return skip;
  }

  /** The consumer-facing prefetch depth, as AUTOTUNE left it. */
  int prefetchCapacity() {
    return prefetch.capacity();
  }

  /** The decoding readers' limit, as AUTOTUNE left it. */
  int parallelism() {
    return permits.limit();
  }

  /**
   * Continues from another stream's tuning (a stream started ahead with a small queue takes over).
   */
  void tune(int prefetchCapacity, int parallelism) {
    prefetch.setCapacity(Math.max(prefetch.capacity(), prefetchCapacity));
    permits.setLimit(parallelism);
  }

  private long emit(Record[] buf, int n, long emitted) throws InterruptedException {
    if (emitted >= skip) {
      Record[] records = Arrays.copyOf(buf, n);
      FutureTask<HostBatch> task = new FutureTask<>(() -> HostBatch.of(records, n, ctx));
      batcher.execute(task);
      prefetch.put(task, false);
    } else {
      HostBatch.discard(buf, n, ctx);
    }
    Arrays.fill(buf, 0, n, null);
    return emitted + 1;
  }

  /** The next batch, or null at the end of the epoch. */
  HostBatch take() throws IOException {
    if (ended) {
      return null;
    }
    long start = System.nanoTime();
    if (lastReturn != 0) {
      consumerNanos += start - lastReturn;
      windowTotal += start - lastReturn;
    }
    Object o;
    try {
      do {
        o = prefetch.poll(100, TimeUnit.MILLISECONDS);
        if (o == null
            && !(producer != null ? producer.isAlive() : readers.alive())
            && prefetch.size() == 0) {
          throw new IOException(
              "The input pipeline of worker " + ctx.rank() + " stopped without a result");
        }
      } while (o == null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("Interrupted while waiting for a batch", e);
    }
    long now = System.nanoTime();
    waitNanos += now - start;
    windowWait += now - start;
    windowTotal += now - start;
    lastReturn = now;
    if (o == END) {
      ended = true;
      return null;
    }
    if (o instanceof Failure) {
      ended = true;
      Throwable t = ((Failure) o).error;
      throw t instanceof IOException
          ? new IOException(t.getMessage(), t)
          : new IOException(t.toString(), t);
    }
    HostBatch hb;
    if (o instanceof HostBatch) {
      hb = (HostBatch) o; // made whole by a reader (UnorderedReaders)
    } else {
      try {
        @SuppressWarnings("unchecked")
        RunnableFuture<HostBatch> pending = (RunnableFuture<HostBatch>) o;
        if (!pending.isDone()) {
          pending.run(); // no batcher has started it: copy here (a no-op if one has)
        }
        hb = pending.get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("Interrupted while waiting for a batch", e);
      } catch (ExecutionException e) {
        ended = true;
        Throwable t = e.getCause();
        throw t instanceof IOException
            ? new IOException(t.getMessage(), t)
            : new IOException(t.toString(), t);
      }
    }
    now = System.nanoTime(); // waiting for the batch's copy is waiting for data too
    waitNanos += now - lastReturn;
    windowWait += now - lastReturn;
    windowTotal += now - lastReturn;
    lastReturn = now;
    batches++;
    records += hb.size;
    if (++windowBatches >= TUNE_WINDOW) {
      autotune();
    }
    return hb;
  }

  /**
   * Grows prefetch depth and reader parallelism while the consumer waits more than 2% of the time.
   */
  private void autotune() {
    double wait = windowTotal == 0 ? 0 : (double) windowWait / windowTotal;
    if (wait > 0.02) {
      if (ctx.options().prefetchBatches() == PipelineOptions.AUTOTUNE
          && prefetch.capacity() < ctx.maxPrefetch()) {
        prefetch.setCapacity(Math.min(ctx.maxPrefetch(), prefetch.capacity() * 2));
      }
      if (ctx.options().readerParallelism() == PipelineOptions.AUTOTUNE
          && permits.limit() < ctx.maxParallelism()) {
        permits.setLimit(permits.limit() + 1);
      }
      LOG.debug(
          "AUTOTUNE worker {}: wait {}%, prefetch {}, parallelism {}",
          ctx.rank(), Math.round(wait * 100), prefetch.capacity(), permits.limit());
    }
    windowWait = 0;
    windowTotal = 0;
    windowBatches = 0;
  }

  PipelineStats stats() {
    int imageColumns = 0;
    for (DatasetSpec.Feature f : ctx.spec().features()) {
      if (f.encoding() == DatasetSpec.Encoding.IMAGE) {
        imageColumns++;
      }
    }
    return new PipelineStats(
        batches,
        records,
        waitNanos,
        consumerNanos,
        permits.limit(),
        prefetch.capacity(),
        imageColumns,
        ctx.imageClock().images() - decodedAtStart,
        ctx.imageClock().nanos() - decodeNanosAtStart);
  }

  @Override
  public void close() {
    synchronized (this) {
      closed = true;
      afterProduced = null;
    }
    if (readers != null) {
      readers.stop();
      return;
    }
    batcher.shutdownNow();
    producer.interrupt();
    try {
      producer.join(30_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static final class Failure {
    final Throwable error;

    Failure(Throwable error) {
      this.error = error;
    }
  }
}
