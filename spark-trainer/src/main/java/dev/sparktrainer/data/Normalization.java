package dev.sparktrainer.data;

import java.io.Serializable;
import java.nio.FloatBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Feature normalization fitted on the training data: every feature value {@code x} becomes {@code
 * (x - shift) * scale}, with {@link Mode#STANDARD} {@code (x - mean) / std} (as Keras' {@code
 * Normalization} layer or Spark ML's {@code StandardScaler} with mean and std) and {@link
 * Mode#MINMAX} {@code (x - min) / (max - min)}, into 0..1. A constant feature is never divided by
 * zero: its scale is 1, so it becomes 0.
 *
 * <p>It is applied to host batches before they go to the device, in training, validation and
 * inference alike, and saved with the model (see {@code TrainedModel}): a model never sees raw
 * values that it was trained on normalized.
 */
public final class Normalization implements Serializable {
  private static final long serialVersionUID = 1L;

  /** How features are normalized. */
  public enum Mode {
    /** Not at all. */
    NONE,
    /** {@code (x - mean) / std}: mean 0, standard deviation 1. */
    STANDARD,
    /** {@code (x - min) / (max - min)}: into 0..1. */
    MINMAX;

    /** Parses {@code standard}, {@code minmax} or {@code none} (any case). */
    public static Mode parse(String value) {
      try {
        return valueOf(value.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException | NullPointerException e) {
        throw new IllegalArgumentException(
            "Invalid normalization '" + value + "': expected standard, minmax or none");
      }
    }

    /** The lower-case name the command line and the Estimator use. */
    public String id() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  private final Mode mode;
  private final FeatureStatistics stats;
  // In double: a float shift would be rounded to the float grid of the values' magnitude (0.0625
  // near 1e6), leaving that error in every normalized value.
  private final double[] shift;
  private final double[] scale;

  private Normalization(Mode mode, FeatureStatistics stats) {
    if (mode == Mode.NONE) {
      throw new IllegalArgumentException("A normalization needs a mode other than none");
    }
    this.mode = mode;
    this.stats = stats;
    int n = stats.size();
    shift = new double[n];
    scale = new double[n];
    for (int i = 0; i < n; i++) {
      double lo = stats.min(i);
      double hi = stats.max(i);
      boolean constant = !(hi > lo);
      if (mode == Mode.STANDARD) {
        double std = stats.std(i);
        shift[i] = stats.mean(i);
        scale[i] = constant || !(std > 0) ? 1 : 1 / std;
      } else {
        shift[i] = lo;
        scale[i] = constant ? 1 : 1 / (hi - lo);
      }
    }
  }

  /** The normalization of {@code mode} for {@code stats}; null for {@link Mode#NONE}. */
  public static Normalization of(Mode mode, FeatureStatistics stats) {
    return mode == Mode.NONE ? null : new Normalization(mode, stats);
  }

  public Mode mode() {
    return mode;
  }

  /** The training data's statistics it was fitted on. */
  public FeatureStatistics statistics() {
    return stats;
  }

  /** Number of feature values per example. */
  public int size() {
    return shift.length;
  }

  /**
   * Normalizes one value: feature value {@code i} (in the concatenated order of the feature
   * columns).
   */
  public float apply(int i, float x) {
    return (float) ((x - shift[i]) * scale[i]);
  }

  /**
   * Normalizes {@code rows} rows of {@code width} values in place, row {@code r} at {@code off + r
   * * width}; the row's first value is feature value {@code first}.
   */
  public void apply(float[] values, int off, int rows, int width, int first) {
    check(first, width);
    for (int r = 0; r < rows; r++) {
      int at = off + r * width;
      for (int j = 0; j < width; j++) {
        values[at + j] = (float) ((values[at + j] - shift[first + j]) * scale[first + j]);
      }
    }
  }

  /**
   * As {@link #apply(float[], int, int, int, int)} on a batch column: rows of {@code width} values
   * from index 0.
   */
  public void apply(FloatBuffer values, int rows, int width, int first) {
    check(first, width);
    // Row by row through a heap array: bulk copies and a plain loop the JIT vectorizes, about 3x
    // faster than element-wise buffer access.
    float[] row = new float[width];
    for (int r = 0; r < rows; r++) {
      int at = r * width;
      values.get(at, row, 0, width);
      apply(row, 0, 1, width, first);
      values.put(at, row, 0, width);
    }
  }

  private void check(int first, int width) {
    if (first < 0 || first + width > shift.length) {
      throw new IllegalArgumentException(
          "Feature values "
              + first
              + ".."
              + (first + width - 1)
              + " outside the "
              + shift.length
              + " values the normalization was fitted on");
    }
  }

  /** {@code normalization.csv}: a header, then one line per feature value. */
  public byte[] toCsv() {
    StringBuilder sb = new StringBuilder("feature,index,count,mean,std,min,max\n");
    int i = 0;
    int[] widths = stats.widths();
    for (int c = 0; c < widths.length; c++) {
      for (int j = 0; j < widths[c]; j++, i++) {
        sb.append(csvName(stats.names().get(c)))
            .append(',')
            .append(j)
            .append(',')
            .append(stats.count())
            .append(',')
            .append(stats.mean(i))
            .append(',')
            .append(stats.std(i))
            .append(',')
            .append(stats.min(i))
            .append(',')
            .append(stats.max(i))
            .append('\n');
      }
    }
    return sb.toString().getBytes(StandardCharsets.UTF_8);
  }

  /** Reads what {@link #toCsv} wrote; {@code where} names the file in errors. */
  public static Normalization fromCsv(Mode mode, byte[] csv, String where) {
    String[] lines = new String(csv, StandardCharsets.UTF_8).split("\n");
    if (lines.length < 2 || !lines[0].equals("feature,index,count,mean,std,min,max")) {
      throw new IllegalArgumentException(
          where
              + ": not a normalization table (expected the header"
              + " feature,index,count,mean,std,min,max)");
    }
    List<String> names = new ArrayList<>();
    List<Integer> widths = new ArrayList<>();
    int n = lines.length - 1;
    double[][] v = new double[4][n];
    long count = -1;
    for (int k = 0; k < n; k++) {
      String line = lines[k + 1];
      try {
        int cut = nthCommaFromEnd(line, 6); // the name may hold commas (quoted), the numbers do not
        String name = unCsvName(line.substring(0, cut));
        String[] f = line.substring(cut + 1).split(",");
        int j = Integer.parseInt(f[0]);
        count = Long.parseLong(f[1]);
        for (int q = 0; q < 4; q++) {
          v[q][k] = Double.parseDouble(f[2 + q]);
        }
        if (j == 0) {
          names.add(name);
          widths.add(0);
        }
        if (names.isEmpty()
            || !names.get(names.size() - 1).equals(name)
            || widths.get(widths.size() - 1) != j) {
          throw new IllegalArgumentException("out of order");
        }
        widths.set(widths.size() - 1, j + 1);
      } catch (RuntimeException e) {
        throw new IllegalArgumentException(
            where
                + ", line "
                + (k + 2)
                + ": invalid normalization entry '"
                + line
                + "' ("
                + e.getMessage()
                + ")",
            e);
      }
    }
    FeatureStatistics stats =
        FeatureStatistics.of(
            names,
            widths.stream().mapToInt(Integer::intValue).toArray(),
            count,
            v[0],
            v[1],
            v[2],
            v[3]);
    return new Normalization(mode, stats);
  }

  /** Index of the comma that starts the {@code k}-th field from the end. */
  private static int nthCommaFromEnd(String line, int k) {
    int at = line.length();
    for (int i = 0; i < k; i++) {
      at = line.lastIndexOf(',', at - 1);
      if (at < 0) {
        throw new IllegalArgumentException("expected 7 fields");
      }
    }
    return at;
  }

  private static String csvName(String name) {
    return name.contains(",") || name.contains("\"")
        ? "\"" + name.replace("\"", "\"\"") + "\""
        : name;
  }

  private static String unCsvName(String s) {
    return s.length() >= 2 && s.startsWith("\"") && s.endsWith("\"")
        ? s.substring(1, s.length() - 1).replace("\"\"", "\"")
        : s;
  }

  @Override
  public String toString() {
    return mode.id() + " normalization of " + stats;
  }
}
