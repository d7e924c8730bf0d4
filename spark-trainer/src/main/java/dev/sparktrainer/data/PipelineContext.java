package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.IOException;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;

/**
 * What one worker's pipeline needs in every epoch: its shard, the options, how to open a split, and
 * the memory plan — the shuffle buffer, the reader queues and the prefetched batches must fit the
 * memory budget together.
 */
final class PipelineContext {
  /** Rough per-record overhead of a decoded record on the heap (headers, the label). */
  private static final int RECORD_OVERHEAD = 48;

  /** Read buffers a reader may hold when examples are decoded in the batch stage. */
  private static final int READ_BUFFERS_PER_READER = 6;

  private final DatasetPlan plan;
  private final WorkerShard shard;
  private final PipelineOptions options;
  private final int rank;
  private final int numWorkers;
  private final Configuration conf;
  private final Interleaver.Opener opener;
  private final int slotCapacity;
  private final int maxPrefetch;
  private final boolean startAhead;
  private final boolean decodeInBatch;
  private final boolean unordered;
  private final boolean planned;
  private final int plannedWindow;
  private final ReadBuffers readBuffers;
  private final ThreadLocal<RecordDecoder> decoders;
  private final int initialPrefetch;
  private final int initialParallelism;
  private final ArrayPool records;
  private final BufferPool[] columns;
  private final BufferPool[] masks;
  private final BufferPool labels;
  private final ImageClock imageClock = new ImageClock();

  /** AUTOTUNE's ceiling for decoding readers ({@link #decodeThreads}). */
  private final int maxParallelism;

  PipelineContext(
      DatasetPlan plan, PipelineOptions options, int rank, int numWorkers, Configuration conf) {
    this(plan, options, rank, numWorkers, conf, plan.shard(rank, numWorkers, options));
  }

  /** A worker's pipeline over {@code shard} (the rest of a resumed epoch: {@link #remainder}). */
  PipelineContext(
      DatasetPlan plan,
      PipelineOptions options,
      int rank,
      int numWorkers,
      Configuration conf,
      WorkerShard shard) {
    this.plan = plan;
    this.options = options;
    this.rank = rank;
    this.numWorkers = numWorkers;
    this.conf = conf;
    this.shard = shard;
    DatasetSpec spec = plan.spec();
    long recordBytes = 4L * spec.featureSize() + RECORD_OVERHEAD;
    long batchBytes =
        2L * options.batchSize() * (4L * spec.featureSize() + 8); // records + the batch copy
    long budget = options.memoryBudgetBytes();
    long shuffleBytes = (long) Math.max(1, options.shuffleBuffer()) * recordBytes;
    int k = Math.min(options.cycleLength(), Math.max(1, shard.splits().size()));
    long readerBudget = Math.max(0, (budget - shuffleBytes - 2 * batchBytes) / 4);
    this.slotCapacity =
        (int) Math.max(2, Math.min(256, readerBudget / Math.max(1, k * recordBytes)));
    long fixed = shuffleBytes + (long) k * (slotCapacity + 17) * recordBytes + batchBytes;
    // Without a shuffle buffer, TFRecord examples are decoded straight into their batch from the
    // readers' buffers (no cache: the cache stores decoded records), when the budget has room for
    // them: a reader holds a few buffers — the one it reads, and ones whose records wait in its
    // queue or in a batch being made.
    long readBufferBytes = (long) READ_BUFFERS_PER_READER * k * ReadBuffers.SIZE;
    // Without a shuffle buffer and without the promise of a reproducible order, readers make whole
    // batches themselves (UnorderedReaders): each holds the batch it fills instead of a record
    // queue.
    // A reader holds its read buffer (at most 1 MiB) and the batch it fills.
    long unorderedFixed = shuffleBytes + (long) k * ((1 << 20) + batchBytes / 2);
    // Sequences are padded to each batch's longest, so their batches are made from decoded records
    // by the producer's batchers (HostBatch.padded), where buckets group them by length.
    boolean sequences = spec.hasSequences();
    this.unordered =
        !sequences
            && !options.deterministic()
            && options.shuffleBuffer() <= 1
            && unorderedFixed + 2 * batchBytes <= budget;
    if (unordered) {
      fixed = unorderedFixed;
    }
    // A map needs the example decoded first (in the readers, where it then runs).
    this.decodeInBatch =
        !unordered
            && !sequences
            && options.shuffleBuffer() <= 1
            && options.cacheDir() == null
            && options.transform() == null
            && !options.effectiveImageResize().random()
            && plan.spec().format() == DatasetSpec.Format.TFRECORD
            && fixed + readBufferBytes + 2 * batchBytes <= budget;
    if (decodeInBatch) {
      fixed += readBufferBytes;
    }
    // With a shuffle buffer, either the producer moves records through the buffer ("buffer", the
    // default) or the order is worked out on record indices and readers decode each record into its
    // batch (PlannedReaders, "planned": a window of open batches about the shuffle buffer's size
    // takes
    // the buffer's place in the budget). Side by side (bin/bench-shuffle-paths) neither was faster
    // on
    // a shared 2-core VM, so the default stays the older, simpler path.
    this.planned =
        !unordered
            && !sequences
            && options.shuffleBuffer() > 1
            && options.shufflePath() == PipelineOptions.ShufflePath.PLANNED;
    this.plannedWindow =
        (int)
            Math.max(
                2,
                Math.min(
                    4096,
                    (long)
                        Math.ceil(
                            options.plannedWindow()
                                * Math.max(1, options.shuffleBuffer())
                                / options.batchSize())));
    if (fixed + batchBytes > budget) {
      throw new IllegalArgumentException(
          String.format(
              Locale.ROOT,
              "memoryBudgetBytes %d is too small: the shuffle buffer (%d records of %d bytes = %d bytes),"
                  + " %d reader queues of %d records and one batch of %d need %d bytes; raise the budget"
                  + " or lower shuffleBuffer, cycleLength or batchSize",
              budget,
              options.shuffleBuffer(),
              recordBytes,
              shuffleBytes,
              k,
              slotCapacity,
              batchBytes,
              fixed + batchBytes));
    }
    // One batch of the budget is kept for the next epoch's stream, which starts (with a queue of
    // one) while this epoch's last prefetched batches are consumed — when the budget has room for
    // it.
    long batches = (budget - fixed) / batchBytes;
    this.startAhead = batches >= 2;
    this.maxPrefetch = (int) Math.max(1, Math.min(64, startAhead ? batches - 1 : batches));
    this.initialPrefetch =
        options.prefetchBatches() == PipelineOptions.AUTOTUNE
            ? Math.min(2, maxPrefetch)
            : options.prefetchBatches();
    if (initialPrefetch > maxPrefetch) {
      throw new IllegalArgumentException(
          "prefetchBatches "
              + options.prefetchBatches()
              + " batches of "
              + batchBytes
              + " bytes exceed memoryBudgetBytes "
              + budget
              + " with the shuffle buffer and reader queues (at most "
              + maxPrefetch
              + ")");
    }
    this.maxParallelism =
        decodeThreads(
            options.cycleLength(), taskCpus(), Runtime.getRuntime().availableProcessors());
    this.initialParallelism =
        options.readerParallelism() == PipelineOptions.AUTOTUNE
            ? Math.min(Math.min(2, k), maxParallelism)
            : Math.min(options.readerParallelism(), options.cycleLength());
    int live =
        Math.max(1, options.shuffleBuffer()) + k * (slotCapacity + 17) + 2 * options.batchSize();
    this.records = new ArrayPool(spec.featureSize(), live / options.batchSize() + 2);
    this.columns = new BufferPool[spec.features().size()];
    for (int c = 0; c < columns.length; c++) {
      columns[c] =
          new BufferPool(
              4 * options.batchSize() * spec.features().get(c).size(),
              maxPrefetch + 4 + (planned ? plannedWindow : 0));
    }
    this.masks = new BufferPool[columns.length];
    for (int c = 0; c < columns.length; c++) {
      DatasetSpec.Feature f = spec.features().get(c);
      if (f.sequence()) {
        masks[c] = new BufferPool(4 * options.batchSize() * f.maxLength(), maxPrefetch + 4);
      }
    }
    this.labels =
        new BufferPool(
            options.batchSize() * (spec.labelType() == DatasetSpec.LabelType.INT ? 8 : 4),
            maxPrefetch + 4 + (planned ? plannedWindow : 0));
    this.readBuffers = decodeInBatch ? new ReadBuffers(READ_BUFFERS_PER_READER * k) : null;
    ImageResize resize = options.effectiveImageResize();
    this.decoders =
        ThreadLocal.withInitial(() -> new RecordDecoder(spec, resize).clock(imageClock));
    this.opener =
        new Opener(plan, shard, conf, options, rank, numWorkers, records, readBuffers, imageClock);
  }

  /**
   * The pipeline of the rest of epoch {@code epoch} after {@code earlier} layouts consumed parts of
   * it: this worker's share of the records they did not consume ({@link ConsumedRecords}, {@link
   * WorkerShard#remainder}), read without the cache (which holds whole shards).
   */
  PipelineContext remainder(int epoch, List<EpochSegment> earlier) throws IOException {
    PipelineOptions o = options.toBuilder().optCacheDir(null).build();
    if (plan.spec().hasSequences() && o.bucketBoundaries().length > 0) {
      // Which records length buckets put into the first batches depends on the records' lengths,
      // which the replay (record indices only) does not read: it takes the unbucketed order's.
      System.getLogger(PipelineContext.class.getName())
          .log(
              System.Logger.Level.WARNING,
              "Epoch {0} resumes on another layout with length buckets: the records the earlier"
                  + " layout consumed are worked out as without buckets, so in this epoch some"
                  + " records may be read twice and as many not at all (every later epoch reads"
                  + " each once)",
              epoch);
    }
    ConsumedRecords consumed = ConsumedRecords.replay(plan, o, epoch, earlier);
    return new PipelineContext(
        plan,
        o,
        rank,
        numWorkers,
        conf,
        WorkerShard.remainder(plan, rank, numWorkers, o, consumed));
  }

  /** Decoded records' arrays, recycled once a record is copied into a batch. */
  ArrayPool recordPool() {
    return records;
  }

  /** Direct buffers of full batches' feature columns, recycled when the batch is closed. */
  BufferPool columnPool(int column) {
    return columns[column];
  }

  /** Direct buffers of full batches' masks of sequence column {@code column}. */
  BufferPool maskPool(int column) {
    return masks[column];
  }

  /** Direct buffers of full batches' labels, recycled when the batch is closed. */
  BufferPool labelPool() {
    return labels;
  }

  /** Returns a batch's buffers once nothing refers to them any more. */
  void recycle(HostBatch b) {
    for (int c = 0; c < b.features.length; c++) {
      columns[c].give(b.features[c]);
      if (masks[c] != null) {
        masks[c].give(b.masks[c]);
      }
    }
    labels.give(b.labelBuffer);
  }

  DatasetSpec spec() {
    return plan.spec();
  }

  WorkerShard shard() {
    return shard;
  }

  PipelineOptions options() {
    return options;
  }

  int rank() {
    return rank;
  }

  /**
   * Opens the splits of epoch {@code epoch}: decoded, then mapped by the options' transform if any.
   */
  Interleaver.Opener opener(int epoch) {
    return options.transform() == null && !options.effectiveImageResize().random()
        ? opener
        : MappedStream.opener(opener, plan.spec(), options, epoch, rank);
  }

  int slotCapacity() {
    return slotCapacity;
  }

  int maxPrefetch() {
    return maxPrefetch;
  }

  boolean decodesInBatch() {
    return decodeInBatch;
  }

  /**
   * Whether readers make whole batches, handed on in the order they are ready ({@link
   * UnorderedReaders}).
   */
  boolean unordered() {
    return unordered;
  }

  /**
   * Whether a shuffle buffer's order is worked out on record indices and readers decode records
   * into their batches ({@link PlannedReaders}) rather than a producer moving records.
   */
  boolean planned() {
    return planned;
  }

  /**
   * Open batches of {@link PlannedReaders}: about the shuffle buffer's size in rows, at least 2.
   */
  int plannedWindow() {
    return plannedWindow;
  }

  /** The images this pipeline decoded and its decoders' time on them (TFRecord data). */
  ImageClock imageClock() {
    return imageClock;
  }

  /** A decoder for the calling (batch) thread. */
  RecordDecoder decoder() {
    return decoders.get();
  }

  /** Whether the memory budget leaves room to start the next epoch's stream ahead of its turn. */
  boolean startAhead() {
    return startAhead;
  }

  int initialPrefetch() {
    return initialPrefetch;
  }

  int initialParallelism() {
    return initialParallelism;
  }

  /**
   * Threads copying records into batches (in parallel, delivered in order): two where there are two
   * cores or more — the copy of shuffled records is memory-bound, one thread would make it the
   * pipeline's serial bottleneck.
   */
  int batchThreads() {
    return Math.max(1, Math.min(2, Runtime.getRuntime().availableProcessors()));
  }

  /** AUTOTUNE's ceiling for decoding readers ({@link #decodeThreads}). */
  int maxParallelism() {
    return maxParallelism;
  }

  /**
   * AUTOTUNE's ceiling for the parallel decode stage (the readers, which decode and map): as many
   * as the task has CPUs ({@code taskCpus}, Spark's {@code spark.task.cpus} inside a task on an
   * executor; 0 outside a task or in local mode, where the task shares the machine: then its {@code
   * cores}), and no more than the cycle length (one reader per open split).
   */
  static int decodeThreads(int cycleLength, int taskCpus, int cores) {
    int cpus = taskCpus > 0 ? taskCpus : cores;
    return Math.max(1, Math.min(cycleLength, cpus));
  }

  /**
   * The CPUs Spark gave the calling task ({@code TaskContext.cpus()}, i.e. {@code
   * spark.task.cpus}), or 0 outside a task, in local mode (tasks run in the driver and share its
   * machine) and without Spark on the class path.
   */
  static int taskCpus() {
    try {
      org.apache.spark.TaskContext task = org.apache.spark.TaskContext.get();
      if (task == null) {
        return 0;
      }
      org.apache.spark.SparkEnv env = org.apache.spark.SparkEnv.get();
      if (env == null || "driver".equals(env.executorId())) { // SparkContext.DRIVER_IDENTIFIER
        return 0;
      }
      return task.cpus();
    } catch (NoClassDefFoundError e) {
      return 0;
    }
  }

  /**
   * Opens item {@code i} (a position in the shard's split list), from the cache when it holds it.
   */
  private static final class Opener implements Interleaver.Opener {
    private final DatasetPlan plan;
    private final WorkerShard shard;
    private final Configuration conf;
    private final RecordCache cache;
    private final ArrayPool records;
    private final ReadBuffers readBuffers;
    private final ImageResize resize;
    private final ImageClock clock;

    Opener(
        DatasetPlan plan,
        WorkerShard shard,
        Configuration conf,
        PipelineOptions options,
        int rank,
        int numWorkers,
        ArrayPool records,
        ReadBuffers readBuffers,
        ImageClock clock) {
      this.clock = clock;
      this.records = records;
      this.readBuffers = readBuffers;
      this.resize = options.effectiveImageResize();
      if (resize.random() && options.cacheDir() != null) {
        throw new IllegalArgumentException(
            "random-resized-crop cannot be used with cacheDir "
                + options.cacheDir()
                + ": the cache keeps images as decoded, and this crop is drawn anew every epoch"
                + " while decoding; drop one of them");
      }
      this.plan = plan;
      this.shard = shard;
      this.conf = conf;
      this.cache =
          options.cacheDir() == null
              ? null
              : new RecordCache(options.cacheDir(), plan, shard, rank, numWorkers);
    }

    @Override
    public RecordStream open(int i) throws IOException {
      Split s = shard.splits().get(i);
      if (cache != null) {
        RecordStream cached = cache.open(s, records);
        if (cached != null) {
          return cached;
        }
      }
      RecordStream source =
          plan.spec().format() == DatasetSpec.Format.PARQUET
              ? new ParquetStream(s, plan.spec(), j -> shard.owns(i, j), conf, records, resize)
                  .clock(clock)
              : new TFRecordStream(
                      s,
                      plan.spec(),
                      j -> shard.owns(i, j),
                      conf,
                      TFRecordReader.DEFAULT_MAX_RECORD_LENGTH,
                      records,
                      readBuffers,
                      resize)
                  .clock(clock);
      return cache == null ? source : cache.writeThrough(s, source);
    }

    @Override
    public String describe(int i) {
      return shard.splits().get(i).toString();
    }
  }
}
