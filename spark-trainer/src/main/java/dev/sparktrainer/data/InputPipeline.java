package dev.sparktrainer.data;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.hadoop.conf.Configuration;

/**
 * One worker's input pipeline: the {@link BatchSource} the trainer consumes.
 *
 * <pre>{@code
 * DatasetPlan plan = DatasetPlanner.plan(spec, options, spark);       // driver
 * try (InputPipeline in = InputPipeline.create(plan, options, rank, numWorkers, manager, conf)) {
 *   for (int epoch = 0; epoch < epochs; epoch++) {
 *     Iterator<Batch> it = in.epoch(epoch, 0);
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
  private PipelineStats lastStats;

  private InputPipeline(PipelineContext ctx, NDManager manager) {
    this.ctx = ctx;
    this.manager = manager;
  }

  /**
   * The pipeline of worker {@code rank} of {@code numWorkers}; batches are created on {@code
   * manager}'s device.
   *
   * @throws IllegalArgumentException if the options do not fit the memory budget or a worker would
   *     get no step
   */
  public static InputPipeline create(DatasetPlan plan, PipelineOptions options, int rank,
      int numWorkers, NDManager manager, Configuration conf) {
    return new InputPipeline(new PipelineContext(plan, options, rank, numWorkers, conf), manager);
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
    HostIterator host = start(epoch, skipSteps, false);
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        return host.hasNext();
      }

      @Override
      public Batch next() {
        return toBatch(host.next());
      }
    };
  }

  /**
   * The epoch's batches on the Java side (no DJL): for benchmarks, tools and tests. A batch is valid
   * until the next call to the iterator, which recycles its buffers.
   */
  HostIterator hostEpoch(int epoch, long skipSteps) {
    return start(epoch, skipSteps, true);
  }

  private HostIterator start(int epoch, long skipSteps, boolean recycle) {
    if (skipSteps < 0 || skipSteps > stepsPerEpoch()) {
      throw new IllegalArgumentException("skipSteps " + skipSteps + " outside 0.." + stepsPerEpoch());
    }
    closeCurrent();
    current = new EpochStream(ctx, epoch, skipSteps);
    return new HostIterator(current, recycle ? ctx : null);
  }

  /** Measurements of the current (or last) epoch. */
  public PipelineStats stats() {
    return current != null ? current.stats() : lastStats;
  }

  private Batch toBatch(HostBatch hb) {
    NDManager m = manager.newSubManager();
    try {
      NDList features = new NDList();
      DatasetSpec spec = ctx.spec();
      for (int c = 0; c < hb.features.length; c++) {
        long[] shape = spec.features().get(c).shape();
        long[] full = new long[shape.length + 1];
        full[0] = hb.size;
        System.arraycopy(shape, 0, full, 1, shape.length);
        features.add(m.create(hb.features[c], new Shape(full), ai.djl.ndarray.types.DataType.FLOAT32));
      }
      NDArray labels = m.create(hb.labelBuffer, new Shape(hb.size), spec.labelType() == DatasetSpec.LabelType.INT
          ? ai.djl.ndarray.types.DataType.INT64 : ai.djl.ndarray.types.DataType.FLOAT32);
      // On CPU the arrays wrap the batch's direct buffers: they go back to the pool on close.
      return new Batch(m, features, labels, hb.size, () -> ctx.recycle(hb));
    } catch (RuntimeException e) {
      m.close();
      throw e;
    }
  }

  private void closeCurrent() {
    if (current != null) {
      lastStats = current.stats();
      current.close();
      current = null;
    }
  }

  @Override
  public void close() {
    closeCurrent();
  }

  /** Host batches of one epoch; reader failures surface as {@link UncheckedIOException}s naming the file. */
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
