package dev.sparktrainer.data;

import java.io.IOException;

/**
 * The map stage: a split's decoded records passed through the user's {@link ExampleTransform}, in
 * the thread that read and decoded them (the interleave's readers, or the unordered readers), so it
 * runs as parallel as decoding does and AUTOTUNE's reader parallelism governs both. It wraps what
 * the opener returns — after the decoded-record cache, which therefore holds records as decoded and
 * never one epoch's augmentation.
 *
 * <p>Each example's random generator is seeded from (seed, epoch, rank, the split's position in the
 * shard, the record's ordinal among the split's records this worker reads): an example's draws
 * depend on what it is, never on thread timing or on where the epoch was resumed.
 */
final class MappedStream implements RecordStream {
  /**
   * Records per split the example index can tell apart (the split's position fills the bits above).
   */
  static final int ORDINAL_BITS = 40;

  /** {@link Seeds} stream of the map stage (1: split order, 2: shuffle buffer). */
  private static final int SEED_STREAM = 3;

  private final RecordStream in;
  private final ExampleTransform transform;
  private final Example example;
  private final long base;
  private final int item;
  private final int epoch;
  private final int rank;
  private final String source;
  private long ordinal;

  private MappedStream(
      RecordStream in,
      ExampleTransform transform,
      DatasetSpec spec,
      long seed,
      int epoch,
      int rank,
      int item,
      String source) {
    this.in = in;
    this.transform = transform;
    this.example = new Example(spec);
    this.base = Seeds.mix(seed, epoch, rank, SEED_STREAM);
    this.item = item;
    this.epoch = epoch;
    this.rank = rank;
    this.source = source;
  }

  /** {@code opener}'s streams of epoch {@code epoch}, mapped by the options' transform. */
  static Interleaver.Opener opener(
      Interleaver.Opener opener, DatasetSpec spec, PipelineOptions options, int epoch, int rank) {
    ExampleTransform t = options.transform();
    boolean randomImages = options.effectiveImageResize().random();
    return new Interleaver.Opener() {
      @Override
      public RecordStream open(int item) throws IOException {
        RecordStream in = opener.open(item);
        MappedStream m =
            new MappedStream(in, t, spec, options.seed(), epoch, rank, item, opener.describe(item));
        if (randomImages && in instanceof ImageSeeding images) {
          // random-resized-crop: the decoder draws each example's box from its seed
          images.seedImages(m.base, item);
        }
        return m;
      }

      @Override
      public String describe(int item) {
        return opener.describe(item);
      }
    };
  }

  @Override
  public Record next() throws IOException {
    Record r = in.next();
    if (r == null) {
      return null;
    }
    if (r.features == null) {
      // PipelineContext has the readers decode records whenever the options carry a transform.
      throw new IllegalStateException(
          "The map stage got a record of "
              + source
              + " that is not decoded yet: with a"
              + " transform, the readers must decode records");
    }
    long k = ordinal++;
    example.reset(
        r.features,
        r.label,
        epoch,
        rank,
        ((long) item << ORDINAL_BITS) | k,
        Seeds.mix(base, item, k, 0));
    try {
      if (transform != null) {
        transform.apply(example);
      }
    } catch (Exception | LinkageError | AssertionError | StackOverflowError e) {
      long offset = in.recordOffset();
      throw new IOException(
          "The example transform failed on record "
              + k
              + " of "
              + source
              + (offset >= 0 ? " (byte offset " + offset + ")" : "")
              + ": "
              + e,
          e);
    }
    return example.label() == r.label && example.draws == 0
        ? r
        : new Record(r.features, example.label(), example.draws);
  }

  @Override
  public long recordOffset() {
    return in.recordOffset();
  }

  @Override
  public void close() throws IOException {
    in.close();
  }
}
