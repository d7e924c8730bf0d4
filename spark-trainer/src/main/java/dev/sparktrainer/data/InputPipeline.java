package dev.sparktrainer.data;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One worker's input pipeline: the {@link BatchSource} the trainer consumes.
 *
 * <pre>{@code
 * DatasetPlan plan = DatasetPlanner.plan(spec, options, spark);       // driver
 * try (InputPipeline in = InputPipeline.create(plan, options, rank, numWorkers, manager, conf)) {
 *   for (int epoch = 0; epoch < epochs; epoch++) {
 *     Iterator<Batch> it = in.epoch(epoch, 0);
 *     if (epoch + 1 < epochs) in.prepare(epoch + 1);                  // read ahead across the boundary
 *     while (it.hasNext()) {
 *       try (Batch b = it.next()) { ... }
 *     }
 *   }
 * }
 * }</pre>
 */
public final class InputPipeline implements BatchSource {
  private final PipelineContext ctx;
  private final NDManager manager;
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

  private static final Logger LOG = LoggerFactory.getLogger(InputPipeline.class);

  /** Applied to every host batch before it goes to the device; null for none. */
  private final Normalization normalization;

  /** How image columns cross to the device (uint8, converted there; or float32 as decoded). */
  private final DeviceImages images;

  private InputPipeline(
      PipelineContext ctx, NDManager manager, Normalization normalization, DeviceImages images) {
    this.ctx = ctx;
    this.manager = manager;
    this.normalization = normalization;
    this.images = images;
    if (normalization != null && normalization.size() != ctx.spec().featureSize()) {
      throw new IllegalArgumentException(
          "The normalization was fitted on "
              + normalization.size()
              + " feature values per example, the data has "
              + ctx.spec().featureSize()
              + " ("
              + ctx.spec().features()
              + ")");
    }
  }

  /**
   * The pipeline of worker {@code rank} of {@code numWorkers}; batches are created on {@code
   * manager}'s device.
   *
   * @throws IllegalArgumentException if the options do not fit the memory budget or a worker would
   *     get no step
   */
  public static InputPipeline create(
      DatasetPlan plan,
      PipelineOptions options,
      int rank,
      int numWorkers,
      NDManager manager,
      Configuration conf) {
    return create(plan, options, null, rank, numWorkers, manager, conf);
  }

  /**
   * As {@link #create(DatasetPlan, PipelineOptions, int, int, NDManager, Configuration)},
   * normalizing the features.
   */
  public static InputPipeline create(
      DatasetPlan plan,
      PipelineOptions options,
      Normalization normalization,
      int rank,
      int numWorkers,
      NDManager manager,
      Configuration conf) {
    DeviceImages images =
        DeviceImages.plan(
            plan.spec(), options, normalization, manager != null && manager.getDevice().isGpu());
    if (!images.active()
        && options.imageTransfer() == PipelineOptions.ImageTransfer.UINT8
        && plan.spec().features().stream()
            .anyMatch(f -> f.encoding() == DatasetSpec.Encoding.IMAGE)) {
      LOG.info("--image-transfer uint8 asked for, images travel as float32: {}", images.reason());
    }
    PipelineOptions host = images.active() ? images.hostOptions(options) : options;
    return new InputPipeline(
        new PipelineContext(plan, host, rank, numWorkers, conf), manager, normalization, images);
  }

  /** How this pipeline's image columns cross to the device. */
  public DeviceImages images() {
    return images;
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

  @Override
  public long stepsPerEpoch() {
    return ctx.shard().stepsPerEpoch();
  }

  @Override
  public Iterator<Batch> epoch(int epoch, long skipSteps) {
    return batches(ctx, epoch, skipSteps);
  }

  @Override
  public Iterator<Batch> epochAfter(int epoch, List<EpochSegment> earlier, long skipSteps) {
    if (earlier.isEmpty()) {
      return epoch(epoch, skipSteps);
    }
    PipelineContext c = remainder(epoch, earlier);
    // Nothing left for this layout (all consumed, or too little under TRUNCATE): no readers.
    return c.shard().stepsPerEpoch() == skipSteps
        ? Collections.emptyIterator()
        : batches(c, epoch, skipSteps);
  }

  @Override
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

  private Iterator<Batch> batches(PipelineContext c, int epoch, long skipSteps) {
    HostIterator host = start(c, epoch, skipSteps, false);
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        return host.hasNext();
      }

      @Override
      public Batch next() {
        return toBatch(c, host.next());
      }
    };
  }

  /**
   * The epoch's batches on the Java side (no DJL): for benchmarks, tools and tests. A batch is
   * valid until the next call to the iterator, which recycles its buffers.
   */
  HostIterator hostEpoch(int epoch, long skipSteps) {
    return start(ctx, epoch, skipSteps, true);
  }

  /** As {@link #epochAfter(int, List, long)}, on the Java side ({@link #hostEpoch}). */
  Iterator<HostBatch> hostEpochAfter(int epoch, List<EpochSegment> earlier, long skipSteps) {
    PipelineContext c = earlier.isEmpty() ? ctx : remainder(epoch, earlier);
    return c != ctx && c.shard().stepsPerEpoch() == skipSteps
        ? Collections.emptyIterator()
        : start(c, epoch, skipSteps, true);
  }

  private HostIterator start(PipelineContext c, int epoch, long skipSteps, boolean recycle) {
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
    return new HostIterator(stream, recycle ? c : null);
  }

  /**
   * Starts reading epoch {@code epoch} (from its first step) ahead of its turn, as soon as the
   * current epoch's records are all read — the shuffle buffer fills and the first batches are ready
   * before the consumer asks for them. The next call to {@link #epoch} uses it if it asks for that
   * epoch from step 0; any other call discards it. Does nothing if the memory budget has no room
   * for a second stream.
   */
  @Override
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

  private Batch toBatch(PipelineContext from, HostBatch hb) {
    NDManager m = manager.newSubManager();
    try {
      NDList features = new NDList();
      DatasetSpec spec = from.spec();
      int first = 0;
      long upload = 0;
      for (int c = 0; c < hb.features.length; c++) {
        int width = spec.features().get(c).size();
        if (images.uint8(c)) { // one byte per pixel crosses; float32 made on the device
          ByteBuffer bytes = images.pack(c, hb.floats(c), hb.size);
          try {
            features.add(images.upload(m, c, bytes, hb.size, hb.draws));
          } finally {
            images.give(c, bytes);
          }
          upload += (long) hb.size * width;
          first += width;
          continue;
        }
        upload += 4L * hb.size * width;
        if (normalization != null) { // in place: the buffer is the batch's own until it is recycled
          normalization.apply(hb.floats(c), hb.size, width, first);
        }
        first += width;
        long[] shape = spec.features().get(c).shape();
        long[] full = new long[shape.length + 1];
        full[0] = hb.size;
        System.arraycopy(shape, 0, full, 1, shape.length);
        features.add(m.create(hb.features[c], new Shape(full), DataType.FLOAT32));
      }
      NDArray labels =
          m.create(
              hb.labelBuffer,
              new Shape(hb.size),
              spec.labelType() == DatasetSpec.LabelType.INT ? DataType.INT64 : DataType.FLOAT32);
      upload += (long) hb.size * labels.getDataType().getNumOfBytes();
      // On CPU the arrays wrap the batch's direct buffers: they go back to the pool on close.
      return new Batch(m, features, labels, hb.size, () -> from.recycle(hb), true, upload);
    } catch (RuntimeException e) {
      m.close();
      throw e;
    }
  }

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
   * Host batches of one epoch; reader failures surface as {@link UncheckedIOException}s naming the
   * file.
   */
  static final class HostIterator implements Iterator<HostBatch> {
    private final EpochStream stream;
    private final PipelineContext recycler;
    private HostBatch next;
    private HostBatch returned;
    private boolean done;

    HostIterator(EpochStream stream, PipelineContext recycler) {
      this.stream = stream;
      this.recycler = recycler;
    }

    @Override
    public boolean hasNext() {
      if (next == null && !done) {
        if (recycler != null && returned != null) {
          recycler.recycle(returned);
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
      returned = b;
      return b;
    }

    PipelineStats stats() {
      return stream.stats();
    }
  }
}
