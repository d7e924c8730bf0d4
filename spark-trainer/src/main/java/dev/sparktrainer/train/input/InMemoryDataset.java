package dev.sparktrainer.train.input;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.BatchSource;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * A small dataset held in memory (one float feature tensor per example, class or float labels), for
 * tests, examples and data that fits on the driver; it travels inside the task closure.
 *
 * <p>{@link #trainBatches} shards it exactly like synchronous data parallelism over a global
 * stream: each epoch the rows are permuted by {@code (seed, epoch)} and global batch {@code s} (of
 * {@code B x N} rows) is cut into N consecutive slices of {@code B}, slice {@code r} for worker
 * {@code r}; the remainder is dropped, so every worker has {@code rows / (B N)} steps. Hence N
 * workers with batch B see, together, exactly the batches of one worker with batch {@code B N}.
 */
public final class InMemoryDataset implements Serializable {
  private static final long serialVersionUID = 1L;

  private final float[] features;
  private final long[] exampleDims; // DJL's Shape is not serializable
  private final long[] classLabels;
  private final float[] floatLabels;
  private final int rows;
  private final int width;

  private InMemoryDataset(
      float[] features, Shape exampleShape, long[] classLabels, float[] floatLabels) {
    this.features = features;
    this.exampleDims = exampleShape.getShape();
    this.classLabels = classLabels;
    this.floatLabels = floatLabels;
    this.rows = classLabels != null ? classLabels.length : floatLabels.length;
    this.width = Math.toIntExact(exampleShape.size());
    if ((long) rows * width != features.length) {
      throw new IllegalArgumentException(
          "Invalid dataset: "
              + features.length
              + " feature values for "
              + rows
              + " rows of shape "
              + exampleShape);
    }
  }

  /** Row-major features ({@code rows x exampleShape}) with int64 class labels. */
  public static InMemoryDataset ofClasses(float[] features, Shape exampleShape, long[] labels) {
    return new InMemoryDataset(features, exampleShape, labels, null);
  }

  /** Row-major features with float32 labels (regression or 0/1 targets). */
  public static InMemoryDataset ofValues(float[] features, Shape exampleShape, float[] labels) {
    return new InMemoryDataset(features, exampleShape, null, labels);
  }

  /** The features of row {@code i} (a copy). */
  public float[] features(int i) {
    return Arrays.copyOfRange(features, i * width, (i + 1) * width);
  }

  /** The class label of row {@code i} (int64 labels), or the float label rounded. */
  public long label(int i) {
    return classLabels != null ? classLabels[i] : Math.round(floatLabels[i]);
  }

  /** Number of rows. */
  public int size() {
    return rows;
  }

  /** Shape of one example. */
  public Shape exampleShape() {
    return new Shape(exampleDims);
  }

  /** Rows {@code [from, to)} as a new dataset. */
  public InMemoryDataset slice(int from, int to) {
    float[] f = Arrays.copyOfRange(features, from * width, to * width);
    return classLabels != null
        ? ofClasses(f, exampleShape(), Arrays.copyOfRange(classLabels, from, to))
        : ofValues(f, exampleShape(), Arrays.copyOfRange(floatLabels, from, to));
  }

  /** The rows permuted by {@code seed} (for a random train/test split with {@link #slice}). */
  public InMemoryDataset shuffled(long seed) {
    int[] p = permutation(rows, new SplittableRandom(seed));
    float[] f = new float[features.length];
    long[] cl = classLabels == null ? null : new long[rows];
    float[] fl = floatLabels == null ? null : new float[rows];
    for (int i = 0; i < rows; i++) {
      System.arraycopy(features, p[i] * width, f, i * width, width);
      if (cl != null) {
        cl[i] = classLabels[p[i]];
      } else {
        fl[i] = floatLabels[p[i]];
      }
    }
    return new InMemoryDataset(f, exampleShape(), cl, fl);
  }

  /**
   * Training batches: per-worker batch {@code batchSize}, rows reshuffled every epoch by {@code
   * (seed, epoch)} when {@code shuffle}, remainder dropped (see the class comment).
   */
  public BatchSourceFactory trainBatches(int batchSize, long seed, boolean shuffle) {
    if (batchSize <= 0) {
      throw new IllegalArgumentException("Invalid batchSize " + batchSize + ": expected > 0");
    }
    InMemoryDataset data = this;
    return new BatchSourceFactory() {
      private static final long serialVersionUID = 1L;

      @Override
      public BatchSource create(int rank, int numWorkers, NDManager manager) {
        return new Source(data, manager, batchSize, rank, numWorkers, seed, shuffle, true);
      }

      @Override
      public int batchSize() {
        return batchSize;
      }

      @Override
      public BatchSourceFactory withBatchSize(int b) {
        return data.trainBatches(b, seed, shuffle);
      }

      @Override
      public boolean globalOrder() {
        return true;
      }

      @Override
      public void preflight(int numWorkers) {
        if ((long) batchSize * numWorkers > rows) {
          throw new IllegalArgumentException(
              "Invalid training data: "
                  + rows
                  + " rows are fewer than one global batch ("
                  + numWorkers
                  + " workers x batch "
                  + batchSize
                  + ")");
        }
      }
    };
  }

  /**
   * Evaluation batches: worker {@code r} reads the contiguous r-th of N parts of the rows, in
   * order, every row exactly once across workers (the last batch may be smaller).
   */
  public BatchSourceFactory evalBatches(int batchSize) {
    InMemoryDataset data = this;
    return (rank, numWorkers, manager) ->
        new Source(data, manager, batchSize, rank, numWorkers, 0, false, false);
  }

  static int[] permutation(int n, SplittableRandom rnd) {
    int[] p = new int[n];
    for (int i = 0; i < n; i++) {
      p[i] = i;
    }
    for (int i = n - 1; i > 0; i--) {
      int j = rnd.nextInt(i + 1);
      int t = p[i];
      p[i] = p[j];
      p[j] = t;
    }
    return p;
  }

  /** One worker's view. */
  private static final class Source implements BatchSource {
    private final InMemoryDataset d;
    private final NDManager manager;
    private final int batch;
    private final int rank;
    private final int workers;
    private final long seed;
    private final boolean shuffle;
    private final boolean train;
    private final int from;
    private final int to;

    Source(
        InMemoryDataset d,
        NDManager manager,
        int batch,
        int rank,
        int workers,
        long seed,
        boolean shuffle,
        boolean train) {
      this.d = d;
      this.manager = manager;
      this.batch = batch;
      this.rank = rank;
      this.workers = workers;
      this.seed = seed;
      this.shuffle = shuffle;
      this.train = train;
      this.from = (int) ((long) d.rows * rank / workers);
      this.to = (int) ((long) d.rows * (rank + 1) / workers);
    }

    @Override
    public long stepsPerEpoch() {
      return train ? d.rows / ((long) batch * workers) : (to - from + batch - 1) / batch;
    }

    @Override
    public long stepsAfter(long consumedRecords) {
      return Math.max(0, d.rows - consumedRecords) / ((long) batch * workers);
    }

    @Override
    public Iterator<Batch> epochAfter(int epoch, long consumedRecords) {
      if (!train || consumedRecords < 0 || consumedRecords > d.rows) {
        throw new IllegalArgumentException(
            "Invalid position " + consumedRecords + " in an epoch of " + d.rows + " rows");
      }
      return batches(epoch, 0, stepsAfter(consumedRecords), consumedRecords);
    }

    @Override
    public Iterator<Batch> epoch(int epoch, long skipSteps) {
      return batches(epoch, skipSteps, stepsPerEpoch(), 0);
    }

    /**
     * Batches {@code skipSteps..steps} of the epoch's order after its first {@code offset} rows.
     */
    private Iterator<Batch> batches(int epoch, long skipSteps, long steps, long offset) {
      int[] order =
          shuffle ? permutation(d.rows, new SplittableRandom(seed * 1_000_003L + epoch)) : null;
      return new Iterator<>() {
        long step = skipSteps;

        @Override
        public boolean hasNext() {
          return step < steps;
        }

        @Override
        public Batch next() {
          if (!hasNext()) {
            throw new NoSuchElementException();
          }
          int start;
          int n;
          if (train) {
            start = (int) (offset + step * batch * workers + (long) rank * batch);
            n = batch;
          } else {
            start = (int) (from + step * batch);
            n = Math.min(batch, to - start);
          }
          step++;
          // The batch is made in direct memory taken from a small pool (given back when the batch
          // closes): on CPU the tensors wrap it, on a GPU it is uploaded at the full rate, never
          // from a heap array.
          ByteBuffer fb = take(4 * n * d.width);
          ByteBuffer lb = take(8 * n);
          FloatBuffer f = fb.asFloatBuffer();
          for (int i = 0; i < n; i++) {
            int row = order == null ? start + i : order[start + i];
            f.put(i * d.width, d.features, row * d.width, d.width);
            if (d.classLabels != null) {
              lb.putLong(i * 8, d.classLabels[row]);
            } else {
              lb.putFloat(i * 4, d.floatLabels[row]);
            }
          }
          NDManager m = manager.newSubManager();
          try {
            NDArray x =
                m.create(
                    fb.limit(4 * n * d.width),
                    new Shape(n).addAll(new Shape(d.exampleDims)),
                    DataType.FLOAT32);
            NDArray y =
                d.classLabels != null
                    ? m.create(lb.limit(8 * n), new Shape(n), DataType.INT64)
                    : m.create(lb.limit(4 * n), new Shape(n), DataType.FLOAT32);
            return new Batch(
                m,
                new NDList(x),
                y,
                n,
                () -> {
                  pool.add(fb.clear());
                  pool.add(lb.clear());
                },
                true);
          } catch (RuntimeException e) {
            m.close();
            throw e;
          }
        }

        private final ConcurrentLinkedQueue<ByteBuffer> pool = new ConcurrentLinkedQueue<>();

        /** A direct buffer of at least {@code bytes}, from the pool when one is large enough. */
        private ByteBuffer take(int bytes) {
          for (ByteBuffer b : pool) {
            if (b.capacity() >= bytes && pool.remove(b)) {
              return b.clear();
            }
          }
          return ByteBuffer.allocateDirect(Math.max(bytes, 8)).order(ByteOrder.nativeOrder());
        }
      };
    }

    @Override
    public void close() {}
  }
}
