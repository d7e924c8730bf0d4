package dev.sparktrainer.data;

import java.io.Serializable;
import java.util.Arrays;
import java.util.Locale;
import java.util.Objects;

/**
 * How the pipeline streams: every stage's knob, with tf.data's meaning. Immutable, serializable.
 * {@link #AUTOTUNE} lets the pipeline choose reader parallelism and prefetch depth from the
 * measured time the consumer waits, within {@link #memoryBudgetBytes()}.
 */
public final class PipelineOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  /** For {@code readerParallelism} and {@code prefetchBatches}: adjusted while running. */
  public static final int AUTOTUNE = -1;

  /** How records are divided among workers. */
  public enum ShardingPolicy {
    /** FILE when there are at least as many splits as workers, DATA otherwise. */
    AUTO,
    /** Each worker reads whole splits (balanced by record count). */
    FILE,
    /** Every worker reads every split and keeps every N-th record. */
    DATA;

    public static ShardingPolicy parse(String v) {
      try {
        return valueOf(v.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException | NullPointerException e) {
        throw new IllegalArgumentException(
            "Invalid sharding '" + v + "': expected AUTO, FILE or DATA");
      }
    }
  }

  /** How workers with fewer records than others reach the common step count. */
  public enum UnevenPolicy {
    /** Steps = the largest worker's; workers that run out repeat their records from the start. */
    PAD,
    /** Steps = the smallest worker's; the others stop early (some records unused that epoch). */
    TRUNCATE,
    /**
     * Each worker takes its own number of steps and reads each of its records once: for evaluation
     * and prediction, never for synchronous training.
     */
    NONE;

    public static UnevenPolicy parse(String v) {
      try {
        return valueOf(v.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException | NullPointerException e) {
        throw new IllegalArgumentException(
            "Invalid uneven policy '" + v + "': expected PAD, TRUNCATE or NONE");
      }
    }
  }

  /** How image features (encoded images: PNG, JPEG, ...) cross to the device. */
  public enum ImageTransfer {
    /** uint8 on a GPU, float32 on a CPU (where uint8 would change nothing but the work). */
    AUTO,
    /**
     * One byte per pixel: converted to float32 in 0..1, normalized and augmented (the built-in
     * {@link ImageAugment} steps) on the device.
     */
    UINT8,
    /** Four bytes per pixel: decoded, augmented and normalized on the host (float32 in 0..1). */
    FLOAT32;

    /**
     * Parses {@code uint8}, {@code float32} or {@code auto}.
     *
     * @throws IllegalArgumentException naming the option and its allowed values
     */
    public static ImageTransfer parse(String v) {
      try {
        return valueOf(v.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException | NullPointerException e) {
        throw new IllegalArgumentException(
            "Invalid image transfer '"
                + v
                + "' (--image-transfer): expected uint8, float32 or auto");
      }
    }

    /** The transfer used on a device: AUTO resolved (uint8 on a GPU, float32 on a CPU). */
    public ImageTransfer resolve(boolean gpu) {
      return this == AUTO ? (gpu ? UINT8 : FLOAT32) : this;
    }
  }

  private final int batchSize;
  private final boolean dropRemainder;
  private final int shuffleBuffer;
  private final boolean shuffleSplits;
  private final int cycleLength;
  private final int blockLength;
  private final int readerParallelism;
  private final int prefetchBatches;
  private final long memoryBudgetBytes;
  private final ShardingPolicy sharding;
  private final UnevenPolicy uneven;
  private final long seed;
  private final long splitSizeBytes;
  private final String cacheDir;
  private final boolean deterministic;
  private final ShufflePath shufflePath;
  private final double plannedWindow;
  private final ExampleTransform transform;
  private final ImageTransfer imageTransfer;
  private final double padValue;
  private final int[] bucketBoundaries;
  private final ImageResize imageResize;

  private PipelineOptions(Builder b) {
    batchSize = b.batchSize;
    dropRemainder = b.dropRemainder;
    shuffleBuffer = b.shuffleBuffer;
    shuffleSplits = b.shuffleSplits;
    cycleLength = b.cycleLength;
    blockLength = b.blockLength;
    readerParallelism = b.readerParallelism;
    prefetchBatches = b.prefetchBatches;
    memoryBudgetBytes = b.memoryBudgetBytes;
    sharding = b.sharding;
    uneven = b.uneven;
    seed = b.seed;
    splitSizeBytes = b.splitSizeBytes;
    cacheDir = b.cacheDir;
    deterministic = b.deterministic;
    shufflePath = b.shufflePath;
    plannedWindow = b.plannedWindow;
    transform = b.transform;
    imageTransfer = b.imageTransfer;
    padValue = b.padValue;
    bucketBoundaries = b.bucketBoundaries.clone();
    imageResize = b.imageResize;
  }

  public static Builder builder() {
    return new Builder();
  }

  public Builder toBuilder() {
    Builder b = new Builder();
    b.batchSize = batchSize;
    b.dropRemainder = dropRemainder;
    b.shuffleBuffer = shuffleBuffer;
    b.shuffleSplits = shuffleSplits;
    b.cycleLength = cycleLength;
    b.blockLength = blockLength;
    b.readerParallelism = readerParallelism;
    b.prefetchBatches = prefetchBatches;
    b.memoryBudgetBytes = memoryBudgetBytes;
    b.sharding = sharding;
    b.uneven = uneven;
    b.seed = seed;
    b.splitSizeBytes = splitSizeBytes;
    b.cacheDir = cacheDir;
    b.deterministic = deterministic;
    b.shufflePath = shufflePath;
    b.plannedWindow = plannedWindow;
    b.transform = transform;
    b.imageTransfer = imageTransfer;
    b.padValue = padValue;
    b.bucketBoundaries = bucketBoundaries.clone();
    b.imageResize = imageResize;
    return b;
  }

  /** Examples per batch on one worker (the global batch is this times the number of workers). */
  public int batchSize() {
    return batchSize;
  }

  /** Drop a last partial batch (true, the default) or emit it. */
  public boolean dropRemainder() {
    return dropRemainder;
  }

  /** Records in the shuffle buffer (0 or 1: no shuffling of records). */
  public int shuffleBuffer() {
    return shuffleBuffer;
  }

  /** Reshuffle the order of splits every epoch from (seed, epoch). */
  public boolean shuffleSplits() {
    return shuffleSplits;
  }

  /** Splits read at once by the interleave stage. */
  public int cycleLength() {
    return cycleLength;
  }

  /** Consecutive records taken from one split before moving to the next. */
  public int blockLength() {
    return blockLength;
  }

  /** Reader threads, at most {@link #cycleLength()}; {@link #AUTOTUNE} to adjust. */
  public int readerParallelism() {
    return readerParallelism;
  }

  /** Ready batches buffered ahead of the consumer; {@link #AUTOTUNE} to adjust. */
  public int prefetchBatches() {
    return prefetchBatches;
  }

  /** Bound on the bytes the pipeline holds (shuffle buffer, reader queues, prefetched batches). */
  public long memoryBudgetBytes() {
    return memoryBudgetBytes;
  }

  public ShardingPolicy sharding() {
    return sharding;
  }

  public UnevenPolicy uneven() {
    return uneven;
  }

  public long seed() {
    return seed;
  }

  /** Uncompressed TFRecord files larger than this are split into byte ranges. */
  public long splitSizeBytes() {
    return splitSizeBytes;
  }

  /** Local directory for the decoded-record cache, or null for no cache. */
  public String cacheDir() {
    return cacheDir;
  }

  /**
   * Whether the order of batches is reproducible (tf.data's {@code deterministic}). Without a
   * shuffle buffer, {@code false} lets each reader make whole batches of its own split's records
   * and hand them on as they are ready: faster, each batch drawn from one or two splits, still
   * every record once per epoch and the same number of steps. With a shuffle buffer the order is
   * always reproducible.
   */
  public boolean deterministic() {
    return deterministic;
  }

  /** What pads a sequence to its batch's longest (tf.data's {@code padding_values}); default 0. */
  public double padValue() {
    return padValue;
  }

  /**
   * Length boundaries of tf.data's {@code bucket_by_sequence_length}: a sequence of length {@code
   * len} goes to the first bucket whose boundary exceeds it (the last bucket takes the rest), and
   * each batch is drawn from one bucket; empty for no bucketing.
   */
  public int[] bucketBoundaries() {
    return bucketBoundaries.clone();
  }

  /** How a shuffle buffer's order reaches the batches: see {@link ShufflePath}. */
  public ShufflePath shufflePath() {
    return shufflePath;
  }

  /**
   * With {@link ShufflePath#PLANNED}: the open batches' rows as a multiple of the shuffle buffer.
   */
  public double plannedWindow() {
    return plannedWindow;
  }

  /**
   * The two ways a shuffle buffer is carried out; both give exactly the same batches (tf.data's
   * semantics, the same seed and draws), they differ in how records move.
   */
  public enum ShufflePath {
    /**
     * The default: a producer moves decoded records through the buffer; batch threads copy them
     * out.
     */
    BUFFER,
    /**
     * The order is worked out on record indices from the plan's counts and reader threads decode
     * each record straight into its batch row ({@code PlannedReaders}): no producer, no batch
     * threads. Measured no faster than {@link #BUFFER} on 2 cores (see the package docs).
     */
    PLANNED
  }

  /**
   * The user's per-example map (tf.data's {@code map(fn, num_parallel_calls=AUTOTUNE)}), or null
   * for none: applied to every example these options read, in the parallel decode stage.
   */
  public ExampleTransform transform() {
    return transform;
  }

  /**
   * How image features cross to the device (see {@link ImageTransfer}); {@code AUTO} (the default)
   * is uint8 on a GPU and float32 on a CPU.
   */
  public ImageTransfer imageTransfer() {
    return imageTransfer;
  }

  /**
   * How images of another size than the declared one are resized (see {@link
   * Builder#optImageResize}); null: not given.
   */
  public ImageResize imageResize() {
    return imageResize;
  }

  /**
   * The resize the decoders apply: the transform's {@code random-resized-crop} step (training) when
   * it has one, else {@link #imageResize()}, else {@link ImageResize#DEFAULT}.
   */
  public ImageResize effectiveImageResize() {
    ImageResize fromTransform = ImageAugment.resizeOf(transform);
    if (fromTransform != null) {
      return fromTransform;
    }
    return imageResize == null ? ImageResize.DEFAULT : imageResize;
  }

  /** Builds {@link PipelineOptions}; defaults are documented on each setter. */
  public static final class Builder {
    private int batchSize = 32;
    private boolean dropRemainder = true;
    private int shuffleBuffer = 10_000;
    private boolean shuffleSplits = true;
    private int cycleLength = 4;
    private int blockLength = 1;
    private int readerParallelism = AUTOTUNE;
    private int prefetchBatches = AUTOTUNE;
    private long memoryBudgetBytes = 256L << 20;
    private ShardingPolicy sharding = ShardingPolicy.AUTO;
    private UnevenPolicy uneven = UnevenPolicy.PAD;
    private long seed = 42;
    private long splitSizeBytes = 128L << 20;
    private String cacheDir;
    private boolean deterministic = true;
    private ShufflePath shufflePath = ShufflePath.BUFFER;
    private double padValue;
    private int[] bucketBoundaries = new int[0];
    private double plannedWindow = 1;
    private ImageTransfer imageTransfer = ImageTransfer.AUTO;
    private ExampleTransform transform;
    private ImageResize imageResize;

    /** Default 32. */
    public Builder optBatchSize(int v) {
      batchSize = v;
      return this;
    }

    /** Default true. */
    public Builder optDropRemainder(boolean v) {
      dropRemainder = v;
      return this;
    }

    /** Default 10,000 records. */
    public Builder optShuffleBuffer(int v) {
      shuffleBuffer = v;
      return this;
    }

    /** Default true. */
    public Builder optShuffleSplits(boolean v) {
      shuffleSplits = v;
      return this;
    }

    /** Default 4. */
    public Builder optCycleLength(int v) {
      cycleLength = v;
      return this;
    }

    /** Default 1. */
    public Builder optBlockLength(int v) {
      blockLength = v;
      return this;
    }

    /** Default AUTOTUNE. */
    public Builder optReaderParallelism(int v) {
      readerParallelism = v;
      return this;
    }

    /** Default AUTOTUNE. */
    public Builder optPrefetchBatches(int v) {
      prefetchBatches = v;
      return this;
    }

    /** Default 256 MiB. */
    public Builder optMemoryBudgetBytes(long v) {
      memoryBudgetBytes = v;
      return this;
    }

    /** Default AUTO. */
    public Builder optSharding(ShardingPolicy v) {
      sharding = v;
      return this;
    }

    /** Default PAD. */
    public Builder optUneven(UnevenPolicy v) {
      uneven = v;
      return this;
    }

    /** Default 42. */
    public Builder optSeed(long v) {
      seed = v;
      return this;
    }

    /** Default 128 MiB. */
    public Builder optSplitSizeBytes(long v) {
      splitSizeBytes = v;
      return this;
    }

    /** Default none. */
    public Builder optCacheDir(String dir) {
      cacheDir = dir;
      return this;
    }

    /** Default {@link ShufflePath#BUFFER}: see {@link ShufflePath}. */
    public Builder optShufflePath(ShufflePath v) {
      shufflePath = Objects.requireNonNull(v, "shufflePath");
      return this;
    }

    /**
     * Default 1: the planned path's open batches, as a multiple of the shuffle buffer's rows (> 0).
     */
    public Builder optPlannedWindow(double v) {
      if (!(v > 0) || Double.isInfinite(v)) {
        throw new IllegalArgumentException(
            "Invalid plannedWindow " + v + ": expected a number > 0");
      }
      plannedWindow = v;
      return this;
    }

    /** Default true: see {@link PipelineOptions#deterministic()}. */
    public Builder optDeterministic(boolean v) {
      deterministic = v;
      return this;
    }

    /**
     * Default none: a per-example map (see {@link ExampleTransform}) run on each decoded example in
     * the readers' threads, before the shuffle buffer and batching; its randomness is seeded from
     * ({@link #optSeed seed}, epoch, rank, example). Null removes it.
     */
    public Builder optTransform(ExampleTransform t) {
      transform = t;
      return this;
    }

    /**
     * Default {@link ImageTransfer#AUTO}: how image features cross to the device (uint8: one byte
     * per pixel, converted, normalized and augmented there; float32: four, all done on the host).
     */
    public Builder optImageTransfer(ImageTransfer v) {
      imageTransfer = Objects.requireNonNull(v, "imageTransfer");
      return this;
    }

    /**
     * Default none ({@link ImageResize#DEFAULT}): how image features of another size than declared
     * are resized, e.g. {@link ImageResize#shorter shorter:256} then the centre (validation,
     * evaluation, prediction). A transform's {@code random-resized-crop} takes precedence.
     */
    public Builder optImageResize(ImageResize v) {
      imageResize = v;
      return this;
    }

    /** {@link #optImageTransfer(ImageTransfer)} from its text: uint8, float32 or auto. */
    public Builder optImageTransfer(String v) {
      return optImageTransfer(ImageTransfer.parse(v));
    }

    /** Default 0: the value padding a sequence to its batch's longest. */
    public Builder optPadValue(double v) {
      padValue = v;
      return this;
    }

    /**
     * Default none: batch sequences by length, tf.data's {@code bucket_by_sequence_length};
     * strictly increasing positive boundaries.
     */
    public Builder optBucketBoundaries(int... boundaries) {
      for (int i = 0; i < boundaries.length; i++) {
        if (boundaries[i] < 1 || (i > 0 && boundaries[i] <= boundaries[i - 1])) {
          throw new IllegalArgumentException(
              "Invalid bucketBoundaries "
                  + Arrays.toString(boundaries)
                  + ": expected strictly increasing positive lengths, e.g. 16,32,64");
        }
      }
      bucketBoundaries = boundaries.clone();
      return this;
    }

    public PipelineOptions build() {
      check(batchSize >= 1, "batchSize", batchSize, "at least 1");
      check(shuffleBuffer >= 0, "shuffleBuffer", shuffleBuffer, "0 or more");
      check(cycleLength >= 1, "cycleLength", cycleLength, "at least 1");
      check(blockLength >= 1, "blockLength", blockLength, "at least 1");
      check(
          readerParallelism == AUTOTUNE || (readerParallelism >= 1),
          "readerParallelism",
          readerParallelism,
          "AUTOTUNE (-1) or at least 1");
      check(
          prefetchBatches == AUTOTUNE || prefetchBatches >= 1,
          "prefetchBatches",
          prefetchBatches,
          "AUTOTUNE (-1) or at least 1");
      check(
          memoryBudgetBytes >= (1 << 20),
          "memoryBudgetBytes",
          memoryBudgetBytes,
          "at least 1048576");
      check(splitSizeBytes >= 1024, "splitSizeBytes", splitSizeBytes, "at least 1024");
      return new PipelineOptions(this);
    }

    private static void check(boolean ok, String name, long value, String expected) {
      if (!ok) {
        throw new IllegalArgumentException(
            "Invalid " + name + " " + value + ": expected " + expected);
      }
    }
  }
}
