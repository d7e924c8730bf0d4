package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.SerializableConfiguration;

/**
 * Count, mean, variance, minimum and maximum of every feature value (the spec's columns
 * concatenated, one entry per float an example feeds the model), in double precision. Each split is
 * accumulated with Welford's update and splits are merged with Chan et al.'s pairwise formula, so
 * the result does not lose precision to large means or many records (unlike sum and sum of squares)
 * and does not depend on how the records were split.
 *
 * <p>{@link #compute(DatasetPlan, SparkSession)} is one distributed pass over a planned dataset: a
 * Spark task per split decodes its records with the pipeline's own readers (so the statistics
 * describe exactly the values the model sees) and only the per-split statistics come back.
 */
public final class FeatureStatistics implements Serializable {
  private static final long serialVersionUID = 1L;

  private final List<String> names;
  private final int[] widths;
  private long count;
  private final double[] mean;
  private final double[] m2;
  private final double[] min;
  private final double[] max;

  /** Empty statistics for the feature columns of {@code spec}. */
  public FeatureStatistics(DatasetSpec spec) {
    this(
        checkedNames(spec), spec.features().stream().mapToInt(DatasetSpec.Feature::size).toArray());
  }

  private static List<String> checkedNames(DatasetSpec spec) {
    if (!spec.fixedFloatOnly()) {
      throw new IllegalArgumentException(
          "Feature statistics (normalization) describe float32 features of a fixed shape; the data"
              + " has "
              + spec.features()
              + ": leave the int64 and sequence columns out");
    }
    return spec.features().stream().map(DatasetSpec.Feature::name).toList();
  }

  /** Empty statistics for columns {@code names} of {@code widths} values each. */
  public FeatureStatistics(List<String> names, int[] widths) {
    if (names.size() != widths.length) {
      throw new IllegalArgumentException(
          names.size() + " feature names for " + widths.length + " widths");
    }
    this.names = List.copyOf(names);
    this.widths = widths.clone();
    int n = 0;
    for (int w : widths) {
      n += w;
    }
    mean = new double[n];
    m2 = new double[n];
    min = new double[n];
    max = new double[n];
    Arrays.fill(min, Double.POSITIVE_INFINITY);
    Arrays.fill(max, Double.NEGATIVE_INFINITY);
  }

  /**
   * Statistics from stored values (a saved model); {@code std} is the population standard
   * deviation.
   */
  public static FeatureStatistics of(
      List<String> names,
      int[] widths,
      long count,
      double[] mean,
      double[] std,
      double[] min,
      double[] max) {
    FeatureStatistics s = new FeatureStatistics(names, widths);
    int n = s.size();
    if (mean.length != n || std.length != n || min.length != n || max.length != n) {
      throw new IllegalArgumentException("Feature statistics of " + n + " values expected");
    }
    s.count = count;
    for (int i = 0; i < n; i++) {
      s.mean[i] = mean[i];
      s.m2[i] = std[i] * std[i] * count;
      s.min[i] = min[i];
      s.max[i] = max[i];
    }
    return s;
  }

  /**
   * Adds one example: {@code values[off .. off + size())}. A value that is not finite (NaN, an
   * infinity) would make every statistic of its feature meaningless: it is refused, naming the
   * feature.
   */
  public void add(float[] values, int off) {
    long n = ++count;
    double inv = 1.0 / n;
    for (int i = 0; i < mean.length; i++) {
      double x = values[off + i];
      if (!Double.isFinite(x)) {
        throw new IllegalArgumentException(
            "feature " + describe(i) + " is " + x + ": normalization needs finite values");
      }
      double d = x - mean[i];
      mean[i] += d * inv;
      m2[i] += d * (x - mean[i]);
      if (x < min[i]) {
        min[i] = x;
      }
      if (x > max[i]) {
        max[i] = x;
      }
    }
  }

  /** Merges {@code other} into this (Chan et al.); both must describe the same columns. */
  public FeatureStatistics merge(FeatureStatistics other) {
    if (!names.equals(other.names) || !Arrays.equals(widths, other.widths)) {
      throw new IllegalArgumentException(
          "Cannot merge statistics of " + other.names + " into " + names);
    }
    if (other.count == 0) {
      return this;
    }
    long n = count + other.count;
    double wb = (double) other.count / n;
    for (int i = 0; i < mean.length; i++) {
      double delta = other.mean[i] - mean[i];
      mean[i] += delta * wb; // exact where the parts agree (a constant feature stays constant)
      m2[i] += other.m2[i] + delta * delta * count * wb;
      min[i] = Math.min(min[i], other.min[i]);
      max[i] = Math.max(max[i], other.max[i]);
    }
    count = n;
    return this;
  }

  /** Examples seen. */
  public long count() {
    return count;
  }

  /** Number of feature values per example. */
  public int size() {
    return mean.length;
  }

  /** The feature columns' names. */
  public List<String> names() {
    return names;
  }

  /** Values per example of each feature column. */
  public int[] widths() {
    return widths.clone();
  }

  public double mean(int i) {
    return mean[i];
  }

  /**
   * Population standard deviation (divided by the count, as Keras' {@code Normalization} layer).
   */
  public double std(int i) {
    return count == 0 ? Double.NaN : Math.sqrt(Math.max(0, m2[i] / count));
  }

  public double min(int i) {
    return min[i];
  }

  public double max(int i) {
    return max[i];
  }

  /** Value {@code i} as {@code column} (one value) or {@code column[j]}. */
  public String describe(int i) {
    int at = 0;
    for (int c = 0; c < widths.length; c++) {
      if (i < at + widths[c]) {
        return widths[c] == 1
            ? "'" + names.get(c) + "'"
            : "'" + names.get(c) + "'[" + (i - at) + "]";
      }
      at += widths[c];
    }
    throw new IndexOutOfBoundsException(i);
  }

  @Override
  public String toString() {
    return String.format(
        Locale.ROOT, "FeatureStatistics(%d values of %s, %d examples)", size(), names, count);
  }

  /**
   * One distributed pass over the plan's splits: a Spark task per split, only statistics come back.
   */
  public static FeatureStatistics compute(DatasetPlan plan, SparkSession spark) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    SerializableConfiguration sconf =
        new SerializableConfiguration(spark.sessionState().newHadoopConf());
    DatasetSpec spec = plan.spec();
    SparkContext sc = spark.sparkContext();
    String previous = sc.getLocalProperty("spark.job.description");
    sc.setJobDescription(
        "spark-trainer: feature statistics of "
            + plan.splits().size()
            + " splits"
            + (previous == null ? "" : " (" + previous + ")"));
    try {
      // One result per task, not per split: the driver receives a few statistics, each the size of
      // an example's features x 4 doubles, whatever the number of splits.
      int slices = Math.max(1, Math.min(plan.splits().size(), jsc.defaultParallelism() * 2));
      List<FeatureStatistics> parts =
          jsc.parallelize(plan.splits(), slices)
              .mapPartitions(
                  splits -> {
                    FeatureStatistics st = new FeatureStatistics(spec);
                    while (splits.hasNext()) {
                      try {
                        st.merge(of(splits.next(), spec, sconf.value())); // in split order
                      } catch (IOException e) {
                        throw new UncheckedIOException(e);
                      }
                    }
                    return List.of(st).iterator();
                  })
              .collect();
      return merged(spec, parts);
    } finally {
      sc.setJobDescription(previous);
    }
  }

  /** The same pass with local threads (tests, tools, one machine). */
  public static FeatureStatistics compute(DatasetPlan plan, Configuration conf) throws IOException {
    List<FeatureStatistics> parts = new ArrayList<>();
    for (Split s : plan.splits()) {
      parts.add(of(s, plan.spec(), conf));
    }
    return merged(plan.spec(), parts);
  }

  private static FeatureStatistics merged(DatasetSpec spec, List<FeatureStatistics> parts) {
    FeatureStatistics all = new FeatureStatistics(spec);
    for (FeatureStatistics p : parts) {
      all.merge(p); // in order: the result does not depend on the scheduling
    }
    if (all.count == 0) {
      throw new IllegalArgumentException(
          "No records in " + spec.paths() + " to compute feature statistics from");
    }
    return all;
  }

  /** The statistics of one split, read with the pipeline's decoding readers. */
  static FeatureStatistics of(Split s, DatasetSpec spec, Configuration conf) throws IOException {
    FeatureStatistics st = new FeatureStatistics(spec);
    ArrayPool pool = new ArrayPool(spec.featureSize(), 1);
    try (RecordStream in =
        spec.format() == DatasetSpec.Format.PARQUET
            ? new ParquetStream(s, spec, j -> true, conf, pool)
            : new TFRecordStream(
                s, spec, j -> true, conf, TFRecordReader.DEFAULT_MAX_RECORD_LENGTH, pool, null)) {
      float[][] one = new float[1][];
      for (Record r = in.next(); r != null; r = in.next()) {
        try {
          st.add(r.features, 0);
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException(
              s.path() + ", record #" + st.count + ": " + e.getMessage(), e);
        }
        one[0] = r.features;
        pool.giveAll(one, 1); // the reader decodes the next record into the same array
      }
    }
    return st;
  }
}
