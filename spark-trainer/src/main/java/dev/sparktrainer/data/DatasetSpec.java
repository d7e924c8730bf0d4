package dev.sparktrainer.data;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

/**
 * What to read: paths or globs on any Hadoop FileSystem, the format, the feature columns with their
 * shapes, and the label column. Immutable and serializable: it travels to the workers.
 *
 * <pre>{@code
 * DatasetSpec spec = DatasetSpec.builder()
 *     .addPath("hdfs:///data/mnist/train-*.tfrecord")
 *     .optFormat(DatasetSpec.Format.TFRECORD)
 *     .addFeature("pixels", 784)
 *     .setLabel("label", DatasetSpec.LabelType.INT)
 *     .build();
 * }</pre>
 */
public final class DatasetSpec implements Serializable {
  private static final long serialVersionUID = 1L;

  /** File formats the pipeline reads. */
  public enum Format {
    /** TFRecord files of {@code tf.train.Example} records (none, gzip or zlib compressed). */
    TFRECORD,
    /** Parquet files. */
    PARQUET;

    /** Parses a user's value: {@code tfrecord} or {@code parquet}. */
    public static Format parse(String value) {
      try {
        return valueOf(value.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException | NullPointerException e) {
        throw new IllegalArgumentException(
            "Invalid format '" + value + "': expected tfrecord or parquet");
      }
    }
  }

  /** How a label is fed to the model. */
  public enum LabelType {
    /** Class indices: an int64 tensor. */
    INT,
    /** Regression targets (or 0/1 for binary cross-entropy): a float32 tensor. */
    FLOAT
  }

  /** How a feature column is encoded. */
  public enum Encoding {
    /** Numbers: a scalar, a list, or a vector, reshaped to the column's shape. */
    NUMERIC,
    /**
     * An encoded image (PNG, JPEG, ...) decoded with ImageIO to [height, width, channels], scaled
     * to 0..1.
     */
    IMAGE
  }

  /** The element type of a numeric feature column's tensor. */
  public enum ValueType {
    /** float32: the default. */
    FLOAT32,
    /** int64 (token ids, categorical ids): stays integer up to the device. */
    INT64
  }

  /**
   * One feature column and the shape of one example's tensor: a fixed shape, or a sequence of any
   * length up to {@link #maxLength()} (padded per batch to the batch's longest, with a mask).
   */
  public static final class Feature implements Serializable {
    private static final long serialVersionUID = 2L;
    private final String name;
    private final long[] shape;
    private final Encoding encoding;
    private final ValueType type;
    private final boolean sequence;
    private final long vocabSize;
    private final int size;

    /** An image column held as its bytes, four to a float slot ({@link #bytes()}). */
    private final boolean bytes;

    Feature(String name, long[] shape, Encoding encoding) {
      this(name, shape, encoding, ValueType.FLOAT32, false, 0);
    }

    Feature(
        String name,
        long[] shape,
        Encoding encoding,
        ValueType type,
        boolean sequence,
        long vocabSize) {
      this(name, shape, encoding, type, sequence, vocabSize, false);
    }

    private Feature(
        String name,
        long[] shape,
        Encoding encoding,
        ValueType type,
        boolean sequence,
        long vocabSize,
        boolean bytes) {
      this.name = name;
      this.shape = shape.clone();
      this.encoding = encoding;
      this.type = type;
      this.sequence = sequence;
      this.vocabSize = vocabSize;
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      // A record keeps its values in float slots: an int64 takes two, a sequence one more for its
      // length (see Slots).
      // An image column held as bytes (image transfer uint8) packs four pixel values into a slot.
      long slots = bytes ? (n + 3) / 4 : (type == ValueType.INT64 ? 2 : 1) * n + (sequence ? 1 : 0);
      this.bytes = bytes;
      if (slots > Integer.MAX_VALUE / 8) {
        throw new IllegalArgumentException(
            "DatasetSpec: feature '" + name + "' has " + n + " values per example: too many");
      }
      this.size = (int) slots;
    }

    public String name() {
      return name;
    }

    /** The shape of one example (without the batch dimension). */
    public long[] shape() {
      return shape.clone();
    }

    public Encoding encoding() {
      return encoding;
    }

    /** The tensor's element type: float32, or int64 (ids). */
    public ValueType type() {
      return type;
    }

    /**
     * Whether the column is a sequence of any length (at most {@link #maxLength()}; empty allowed)
     * rather than a fixed shape: batched as {@code [batch, T]} padded to the batch's longest, with
     * a float32 mask {@code [batch, T]} (1 for real positions) beside it.
     */
    public boolean sequence() {
      return sequence;
    }

    /** A sequence's maximum length (longer ones are truncated); 0 for a fixed shape. */
    public int maxLength() {
      return sequence ? (int) shape[0] : 0;
    }

    /**
     * For int64 ids: the vocabulary size, every value must be in {@code [0, vocabSize)} (checked as
     * records are decoded, naming the file and record); 0 for unchecked.
     */
    public long vocabSize() {
      return vocabSize;
    }

    /** Whether the column is float32 values of a fixed shape (what normalization applies to). */
    public boolean fixedFloat() {
      return type == ValueType.FLOAT32 && !sequence;
    }

    /**
     * Float slots one example takes in a decoded record: its values for a fixed float32 shape (so,
     * for such columns, the number of values); two per int64 value, and one more for a sequence's
     * length.
     */
    public int size() {
      return size;
    }

    /**
     * Whether this image column is held on the host as its decoded bytes (0..255, HWC), four to a
     * float slot as raw bits (native byte order, the last slot's unused bytes 0): what image
     * transfer uint8 hands the device, one byte per pixel in records, the shuffle buffer, the cache
     * and host batches ({@link DatasetSpec#withImageBytes()}). Such slots are only ever copied,
     * never read as floats. False for every column of a spec as the user builds it.
     */
    public boolean bytes() {
      return bytes;
    }

    /** This column held as bytes ({@link #bytes()}); only for image columns. */
    Feature asBytes() {
      if (encoding != Encoding.IMAGE) {
        throw new IllegalArgumentException(
            "DatasetSpec: feature '"
                + name
                + "' is not an image column: only images travel as bytes");
      }
      return bytes ? this : new Feature(name, shape, encoding, type, sequence, vocabSize, true);
    }

    /** Values of one example of a fixed shape (the product of the shape), a sequence's maximum. */
    public int values() {
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      return (int) n;
    }

    @Override
    public String toString() {
      if (sequence) {
        return name
            + "[<="
            + shape[0]
            + "] "
            + (type == ValueType.INT64 ? "ids" : "seq")
            + (vocabSize > 0 ? " vocab " + vocabSize : "");
      }
      return name
          + Arrays.toString(shape)
          + (encoding == Encoding.IMAGE ? (bytes ? " image bytes" : " image") : "")
          + (type == ValueType.INT64 ? " int64" : "");
    }
  }

  private final List<String> paths;
  private final Format format;
  private final List<Feature> features;
  private final String label;
  private final LabelType labelType;

  private DatasetSpec(Builder b) {
    this.paths = Collections.unmodifiableList(new ArrayList<>(b.paths));
    this.format = b.format;
    this.features = Collections.unmodifiableList(new ArrayList<>(b.features));
    this.label = b.label;
    this.labelType = b.labelType;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A builder with this spec's values, to derive a variant (other paths, for instance). */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.paths.addAll(paths);
    b.format = format;
    b.features.addAll(features);
    b.label = label;
    b.labelType = labelType;
    return b;
  }

  public List<String> paths() {
    return paths;
  }

  public Format format() {
    return format;
  }

  public List<Feature> features() {
    return features;
  }

  /** The label column, or null for unlabelled data (prediction). */
  public String label() {
    return label;
  }

  public LabelType labelType() {
    return labelType;
  }

  /** Whether a feature column is a sequence (padded per batch, with a mask). */
  public boolean hasSequences() {
    for (Feature f : features) {
      if (f.sequence()) {
        return true;
      }
    }
    return false;
  }

  /** Whether every feature column is float32 of a fixed shape. */
  public boolean fixedFloatOnly() {
    for (Feature f : features) {
      if (!f.fixedFloat()) {
        return false;
      }
    }
    return true;
  }

  /**
   * Float slots of one example's features in a decoded record (the number of feature values when
   * every column is float32 of a fixed shape).
   */
  public int featureSize() {
    int n = 0;
    for (Feature f : features) {
      n += f.size();
    }
    return n;
  }

  /**
   * This spec with every image column held as bytes on the host ({@link Feature#bytes()}): what the
   * input pipeline reads when images travel to the device as uint8 and nothing on the host needs
   * them as floats. The shapes are the same; a record takes a quarter of the slots for its images.
   */
  public DatasetSpec withImageBytes() {
    Builder b = toBuilder();
    for (int i = 0; i < b.features.size(); i++) {
      Feature f = b.features.get(i);
      if (f.encoding() == Encoding.IMAGE) {
        b.features.set(i, f.asBytes());
      }
    }
    return b.build();
  }

  /** Whether an image column is held as bytes ({@link #withImageBytes()}). */
  public boolean hasImageBytes() {
    for (Feature f : features) {
      if (f.bytes()) {
        return true;
      }
    }
    return false;
  }

  @Override
  public String toString() {
    return format + " " + paths + " features " + features + " label " + label;
  }

  /** Builds a {@link DatasetSpec}; {@link #build()} validates. */
  public static final class Builder {
    private final List<String> paths = new ArrayList<>();
    private Format format = Format.TFRECORD;
    private final List<Feature> features = new ArrayList<>();
    private String label;
    private LabelType labelType = LabelType.INT;

    /**
     * A path: a file, a directory (read recursively, hidden and {@code _} files skipped) or a glob.
     */
    public Builder addPath(String path) {
      paths.add(path);
      return this;
    }

    public Builder setPaths(List<String> all) {
      paths.clear();
      paths.addAll(all);
      return this;
    }

    /** Default {@link Format#TFRECORD}. */
    public Builder optFormat(Format format) {
      this.format = format;
      return this;
    }

    /**
     * A numeric feature column with the shape of one example, e.g. {@code 784} or {@code 28, 28,
     * 1}.
     */
    public Builder addFeature(String name, long... shape) {
      features.add(new Feature(name, shape.length == 0 ? new long[] {1} : shape, Encoding.NUMERIC));
      return this;
    }

    /** An int64 feature column with the shape of one example (categorical ids, for instance). */
    public Builder addIntFeature(String name, long... shape) {
      features.add(
          new Feature(
              name,
              shape.length == 0 ? new long[] {1} : shape,
              Encoding.NUMERIC,
              ValueType.INT64,
              false,
              0));
      return this;
    }

    /**
     * A sequence column of any length up to {@code maxLength} (longer ones are truncated and
     * counted): int64 ids ({@code vocabSize} > 0 checks every id is below it; 0 does not) or
     * float32 values ({@code vocabSize} 0). Batched padded to the batch's longest, with a mask.
     */
    public Builder addSequenceFeature(String name, ValueType type, int maxLength, long vocabSize) {
      if (maxLength < 1) {
        throw new IllegalArgumentException(
            "DatasetSpec: sequence feature '"
                + name
                + "' has maximum length "
                + maxLength
                + ": expected at least 1");
      }
      if (vocabSize < 0 || (vocabSize > 0 && type != ValueType.INT64)) {
        throw new IllegalArgumentException(
            "DatasetSpec: feature '"
                + name
                + "' has vocabulary size "
                + vocabSize
                + ": expected 0 (unchecked) or, for int64 ids, a positive size");
      }
      features.add(
          new Feature(name, new long[] {maxLength}, Encoding.NUMERIC, type, true, vocabSize));
      return this;
    }

    /**
     * Sets the vocabulary size of the int64 column {@code name} (known once the data's statistics
     * or its {@code vocab.txt} were read).
     */
    public Builder setVocabSize(String name, long vocabSize) {
      for (int i = 0; i < features.size(); i++) {
        Feature f = features.get(i);
        if (f.name().equals(name)) {
          if (f.type() != ValueType.INT64 || vocabSize < 0) {
            throw new IllegalArgumentException(
                "DatasetSpec: vocabulary size "
                    + vocabSize
                    + " for feature "
                    + f
                    + ": expected int64 ids and a size >= 0");
          }
          features.set(
              i, new Feature(f.name(), f.shape(), f.encoding(), f.type(), f.sequence(), vocabSize));
          return this;
        }
      }
      throw new IllegalArgumentException("DatasetSpec: no feature column '" + name + "'");
    }

    /** An encoded-image feature column decoded to {@code [height, width, channels]}. */
    public Builder addImageFeature(String name, int height, int width, int channels) {
      features.add(new Feature(name, new long[] {height, width, channels}, Encoding.IMAGE));
      return this;
    }

    public Builder setLabel(String column, LabelType type) {
      this.label = column;
      this.labelType = type;
      return this;
    }

    /** No label column (prediction). */
    public Builder noLabel() {
      this.label = null;
      return this;
    }

    public DatasetSpec build() {
      if (paths.isEmpty()) {
        throw new IllegalArgumentException("DatasetSpec: no path given");
      }
      if (features.isEmpty()) {
        throw new IllegalArgumentException("DatasetSpec: no feature column given");
      }
      List<String> names = new ArrayList<>();
      for (Feature f : features) {
        for (long d : f.shape) {
          if (d <= 0) {
            throw new IllegalArgumentException(
                "DatasetSpec: feature '"
                    + f.name
                    + "' has shape "
                    + Arrays.toString(f.shape)
                    + ": every dimension must be positive");
          }
        }
        if (names.contains(f.name)) {
          throw new IllegalArgumentException("DatasetSpec: feature '" + f.name + "' given twice");
        }
        names.add(f.name);
      }
      if (label != null && names.contains(label)) {
        throw new IllegalArgumentException(
            "DatasetSpec: column '" + label + "' is both a feature and the label");
      }
      return new DatasetSpec(this);
    }
  }
}
