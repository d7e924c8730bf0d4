package dev.sparktrainer.ml;

import java.util.Arrays;
import java.util.List;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.sql.Row;
import scala.collection.Seq;
import scala.runtime.BoxedUnit;

/** Reading feature values and labels out of Spark rows, with errors that name the column. */
final class Features {
  private Features() {}

  /**
   * Copies the values of column {@code c} of {@code row} (a Vector, an array of numbers or a
   * number) into {@code dst} at {@code off}, at most {@code room} of them; returns how many the
   * column has.
   */
  static int copy(Row row, int c, float[] dst, int off, int room) {
    Object v = row.get(c);
    if (v == null) {
      throw new IllegalArgumentException(
          "Feature column '" + name(row, c) + "' is null in a row: expected values");
    }
    if (v instanceof Vector) {
      Vector vec = (Vector) v;
      int n = vec.size();
      if (n <= room) {
        Arrays.fill(dst, off, off + n, 0f);
        vec.foreachActive(
            (i, x) -> {
              dst[off + ((Number) i).intValue()] = ((Number) x).floatValue();
              return BoxedUnit.UNIT;
            });
      }
      return n;
    }
    if (v instanceof Seq || v instanceof List) {
      List<?> list = v instanceof List ? (List<?>) v : row.getList(c);
      int n = list.size();
      if (n <= room) {
        for (int i = 0; i < n; i++) {
          Object x = list.get(i);
          if (x == null) {
            throw new IllegalArgumentException(
                "Feature column '" + name(row, c) + "' has a null in an array");
          }
          dst[off + i] = ((Number) x).floatValue();
        }
      }
      return n;
    }
    if (room >= 1) {
      dst[off] = v instanceof Boolean ? ((Boolean) v ? 1f : 0f) : ((Number) v).floatValue();
    }
    return 1;
  }

  /**
   * The token ids of column {@code c} of {@code row} (an array of integers, or one integer; null is
   * an empty sequence), each checked to be in {@code [0, vocabSize)}.
   */
  static long[] ids(Row row, int c, long vocabSize) {
    Object v = row.get(c);
    if (v == null) {
      return new long[0];
    }
    if (v instanceof Seq || v instanceof List) {
      List<?> list = v instanceof List ? (List<?>) v : row.getList(c);
      long[] out = new long[list.size()];
      for (int i = 0; i < out.length; i++) {
        out[i] = id(row, c, list.get(i), i, vocabSize);
      }
      return out;
    }
    return new long[] {id(row, c, v, 0, vocabSize)};
  }

  private static long id(Row row, int c, Object x, int i, long vocabSize) {
    if (!(x instanceof Long || x instanceof Integer || x instanceof Short || x instanceof Byte)) {
      throw new IllegalArgumentException(
          "Feature column '"
              + name(row, c)
              + "' holds "
              + (x == null ? "a null" : x.getClass().getSimpleName() + " " + x)
              + " at position "
              + i
              + ": expected integer token ids");
    }
    long id = ((Number) x).longValue();
    if (id < 0 || id >= vocabSize) {
      throw new IllegalArgumentException(
          "Feature column '"
              + name(row, c)
              + "' value "
              + i
              + " is "
              + id
              + ": outside the vocabulary [0, "
              + vocabSize
              + ")");
    }
    return id;
  }

  static void checkSize(Row row, int c, int got, int expected) {
    if (got != expected) {
      throw new IllegalArgumentException(
          (c < 0 ? "The feature columns have " : "Feature column '" + name(row, c) + "' has ")
              + got
              + " values in a row: the model expects "
              + expected);
    }
  }

  static double number(Row row, int c) {
    Object v = row.get(c);
    if (v == null) {
      throw new IllegalArgumentException("Label column '" + name(row, c) + "' is null in a row");
    }
    return v instanceof Boolean ? ((Boolean) v ? 1 : 0) : ((Number) v).doubleValue();
  }

  static long classLabel(Row row, int c, int classes) {
    double d = number(row, c);
    if (d != Math.rint(d) || d < 0 || d >= classes) {
      throw new IllegalArgumentException(
          "Label column '"
              + name(row, c)
              + "' has value "
              + d
              + ": expected a class index 0.."
              + (classes - 1));
    }
    return (long) d;
  }

  private static String name(Row row, int c) {
    return row.schema() == null ? "#" + c : row.schema().fieldNames()[c];
  }
}
