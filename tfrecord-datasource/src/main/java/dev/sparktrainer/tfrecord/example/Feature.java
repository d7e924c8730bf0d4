package dev.sparktrainer.tfrecord.example;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A {@code tf.train.Feature} as a plain immutable value: a kind and its values. The kind is null
 * for a present Feature with no list set.
 */
public final class Feature {
  private static final Feature EMPTY = new Feature(null, null, null, null);

  private final FeatureKind kind;
  private final long[] int64s;
  private final float[] floats;
  private final byte[][] bytes;

  private Feature(FeatureKind kind, long[] int64s, float[] floats, byte[][] bytes) {
    this.kind = kind;
    this.int64s = int64s;
    this.floats = floats;
    this.bytes = bytes;
  }

  public static Feature empty() {
    return EMPTY;
  }

  public static Feature ofInt64(long... values) {
    return new Feature(FeatureKind.INT64, values.clone(), null, null);
  }

  public static Feature ofFloats(float... values) {
    return new Feature(FeatureKind.FLOAT, null, values.clone(), null);
  }

  public static Feature ofBytes(byte[]... values) {
    return new Feature(FeatureKind.BYTES, null, null, values.clone());
  }

  public static Feature ofStrings(String... values) {
    byte[][] b = new byte[values.length][];
    for (int i = 0; i < values.length; i++) {
      b[i] = values[i].getBytes(StandardCharsets.UTF_8);
    }
    return new Feature(FeatureKind.BYTES, null, null, b);
  }

  public FeatureKind kind() {
    return kind;
  }

  public int size() {
    if (kind == null) {
      return 0;
    }
    switch (kind) {
      case INT64:
        return int64s.length;
      case FLOAT:
        return floats.length;
      default:
        return bytes.length;
    }
  }

  public long[] int64s() {
    return int64s == null ? new long[0] : int64s.clone();
  }

  public float[] floats() {
    return floats == null ? new float[0] : floats.clone();
  }

  public byte[][] bytes() {
    return bytes == null ? new byte[0][] : bytes.clone();
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof Feature)) {
      return false;
    }
    Feature f = (Feature) o;
    return kind == f.kind
        && Arrays.equals(int64s, f.int64s)
        && Arrays.equals(floats, f.floats)
        && Arrays.deepEquals(bytes, f.bytes);
  }

  @Override
  public int hashCode() {
    return 31 * (31 * Arrays.hashCode(int64s) + Arrays.hashCode(floats))
        + Arrays.deepHashCode(bytes);
  }

  @Override
  public String toString() {
    if (kind == null) {
      return "Feature{}";
    }
    switch (kind) {
      case INT64:
        return "int64" + Arrays.toString(int64s);
      case FLOAT:
        return "float" + Arrays.toString(floats);
      default:
        StringBuilder sb = new StringBuilder("bytes[");
        for (int i = 0; i < bytes.length; i++) {
          sb.append(i == 0 ? "" : ", ").append(new String(bytes[i], StandardCharsets.UTF_8));
        }
        return sb.append(']').toString();
    }
  }
}
