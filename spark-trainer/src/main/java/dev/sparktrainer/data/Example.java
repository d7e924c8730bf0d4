package dev.sparktrainer.data;

import java.util.List;
import java.util.random.RandomGenerator;

/**
 * One decoded example as an {@link ExampleTransform} sees it: the feature columns of the {@link
 * DatasetSpec}, concatenated in the spec's column order in one float array ({@link #values()},
 * column {@code c} at {@link #offset}{@code (c)}, {@link #size}{@code (c)} values laid out
 * row-major in the column's {@link #shape}), and the label. A transform rewrites both in place; the
 * shapes are the spec's and do not change. Valid only during the call: the pipeline reuses it.
 */
public final class Example {
  private final List<DatasetSpec.Feature> features;
  private final int[] offsets;
  private final ExampleRandom random = new ExampleRandom();
  private float[] values;
  private double label;
  private int epoch;
  private int rank;
  private long index;
  private float[] scratch = new float[0];

  /** Draws recorded for the device's augmentation ({@link #setDraws}); 0 if none. */
  long draws;

  Example(DatasetSpec spec) {
    this.features = spec.features();
    this.offsets = new int[features.size() + 1];
    for (int c = 0; c < features.size(); c++) {
      offsets[c + 1] = offsets[c] + features.get(c).size();
    }
  }

  /** Points this view at the next example, and seeds its random generator. */
  void reset(float[] values, double label, int epoch, int rank, long index, long seed) {
    this.values = values;
    this.label = label;
    this.epoch = epoch;
    this.rank = rank;
    this.index = index;
    this.draws = 0;
    random.reset(seed);
  }

  /** Every feature value, columns concatenated in the spec's order (written in place). */
  public float[] values() {
    return values;
  }

  /** Number of feature columns. */
  public int numColumns() {
    return features.size();
  }

  /** The index of the feature column named {@code name}. */
  public int column(String name) {
    for (int c = 0; c < features.size(); c++) {
      if (features.get(c).name().equals(name)) {
        return c;
      }
    }
    throw new IllegalArgumentException(
        "No feature column '" + name + "': the columns are " + features);
  }

  /** Where column {@code c} starts in {@link #values()}. */
  public int offset(int c) {
    return offsets[c];
  }

  /** Values of column {@code c}. */
  public int size(int c) {
    return offsets[c + 1] - offsets[c];
  }

  /** Column {@code c}'s shape for one example, as declared in the {@link DatasetSpec}. */
  public long[] shape(int c) {
    return features.get(c).shape();
  }

  /**
   * The length of sequence column {@code c} in this example as read (it may exceed the column's
   * maximum: only the first {@code maxLength} values are kept, and the batch counts the cut).
   */
  public int length(int c) {
    if (!features.get(c).sequence()) {
      throw new IllegalArgumentException(
          "Column '" + features.get(c).name() + "' is not a sequence: its shape is fixed");
    }
    return Slots.getInt(values, offsets[c]);
  }

  /**
   * Value {@code i} of int64 column {@code c} (a fixed shape row-major, or position {@code i} of a
   * sequence, below {@code min(length(c), maxLength)}).
   */
  public long getLong(int c, int i) {
    DatasetSpec.Feature f = features.get(c);
    if (f.type() != DatasetSpec.ValueType.INT64) {
      throw new IllegalArgumentException("Column '" + f.name() + "' holds float32 values");
    }
    int n = f.sequence() ? Math.min(length(c), f.maxLength()) : f.values();
    if (i < 0 || i >= n) {
      throw new IndexOutOfBoundsException(
          "value " + i + " of column '" + f.name() + "' of " + n + " values");
    }
    return Slots.getLong(values, offsets[c] + (f.sequence() ? 1 : 0) + 2 * i);
  }

  /**
   * Value {@code i} (row-major) of float32 column {@code c} of a fixed shape (for other columns the
   * slots of {@link #values()} hold their bits: see {@link #getLong} and {@link #length}).
   */
  public float get(int c, int i) {
    return values[offsets[c] + check(c, i)];
  }

  /** Sets value {@code i} (row-major) of column {@code c}. */
  public void set(int c, int i, float v) {
    values[offsets[c] + check(c, i)] = v;
  }

  private int check(int c, int i) {
    if (i < 0 || i >= size(c)) {
      throw new IndexOutOfBoundsException(
          "value " + i + " of column '" + features.get(c).name() + "' of " + size(c) + " values");
    }
    return i;
  }

  /** The label (a class index or a regression target; 0 for unlabelled data). */
  public double label() {
    return label;
  }

  public void setLabel(double label) {
    this.label = label;
  }

  /**
   * Records this example's random choices for an augmentation done on the device instead of here
   * (image transfer uint8: the device package's {@code DeviceImages} draws them from {@link
   * #random()} as the host steps would and unpacks them there): the word rides with the example to
   * its row of the host batch ({@link HostBatch#draws()}). A user's map has no use for it.
   */
  public void setDraws(long draws) {
    this.draws = draws;
  }

  /**
   * A generator seeded from (seed, epoch, rank, example): reproducible, independent between
   * examples, the same after a resume.
   */
  public RandomGenerator random() {
    return random;
  }

  public int epoch() {
    return epoch;
  }

  /** The worker reading the example. */
  public int rank() {
    return rank;
  }

  /**
   * Which example of the worker's shard this is (the split's position in the shard, then the
   * record's).
   */
  public long index() {
    return index;
  }

  /**
   * A work array of at least {@code n} floats, owned by the calling reader thread and reused for
   * the next example (its contents are not kept).
   */
  public float[] scratch(int n) {
    if (scratch.length < n) {
      scratch = new float[n];
    }
    return scratch;
  }
}
