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

  /** One feature column and the shape of one example's tensor. */
  public static final class Feature implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String name;
    private final long[] shape;
    private final Encoding encoding;
    private final int size;

    Feature(String name, long[] shape, Encoding encoding) {
      this.name = name;
      this.shape = shape.clone();
      this.encoding = encoding;
      long n = 1;
      for (long d : shape) {
        n *= d;
      }
      if (n > Integer.MAX_VALUE / 4) {
        throw new IllegalArgumentException(
            "DatasetSpec: feature '" + name + "' has " + n + " values per example: too many");
      }
      this.size = (int) n;
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

    /** Number of float values of one example. */
    public int size() {
      return size;
    }

    @Override
    public String toString() {
      return name + Arrays.toString(shape) + (encoding == Encoding.IMAGE ? " image" : "");
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

  /** Total float values of one example's features. */
  public int featureSize() {
    int n = 0;
    for (Feature f : features) {
      n += f.size();
    }
    return n;
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
