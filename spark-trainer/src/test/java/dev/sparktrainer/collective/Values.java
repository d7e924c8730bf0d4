package dev.sparktrainer.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Closed-form test data: rank r's element i is f(r, i), chosen so that sums are exact and the
 * expected SUM, MEAN, MIN and MAX over ranks are known analytically.
 */
final class Values {
  private Values() {}

  static int g(int i) {
    return (i % 251) + 1;
  }

  static int sign(int i) {
    return i % 2 == 0 ? 1 : -1;
  }

  static float f32(int r, int i) {
    return sign(i) * (r + 1) * (float) g(i);
  }

  static double f64(int r, int i) {
    return sign(i) * (r + 1) * (g(i) + 0.5);
  }

  static long i64(int r, int i) {
    return sign(i) * ((r + 1) * (1L << 33) + i);
  }

  /** Rank r's input for {@code count} elements of {@code type}, as little-endian bytes. */
  static byte[] input(ElementType type, int r, int count) {
    ByteBuffer b = ByteBuffer.allocate(count * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < count; i++) {
      switch (type) {
        case FLOAT32:
          b.putFloat(f32(r, i));
          break;
        case FLOAT64:
          b.putDouble(f64(r, i));
          break;
        default:
          b.putLong(i64(r, i));
      }
    }
    return b.array();
  }

  /** The analytic result over n ranks. */
  static byte[] expected(ElementType type, ReduceOp op, int n, int count) {
    ByteBuffer b = ByteBuffer.allocate(count * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    long tri = (long) n * (n + 1) / 2;
    for (int i = 0; i < count; i++) {
      int s = sign(i);
      switch (type) {
        case FLOAT32:
          {
            float sum = (float) (s * tri * g(i));
            float lo = s > 0 ? g(i) : -n * g(i);
            float hi = s > 0 ? n * g(i) : -g(i);
            b.putFloat(
                op == ReduceOp.SUM
                    ? sum
                    : op == ReduceOp.MEAN ? sum / (float) n : op == ReduceOp.MIN ? lo : hi);
            break;
          }
        case FLOAT64:
          {
            double v = g(i) + 0.5;
            double sum = s * tri * v;
            double lo = s > 0 ? v : -n * v;
            double hi = s > 0 ? n * v : -v;
            b.putDouble(
                op == ReduceOp.SUM
                    ? sum
                    : op == ReduceOp.MEAN ? sum / n : op == ReduceOp.MIN ? lo : hi);
            break;
          }
        default:
          {
            long sum = s * (tri * (1L << 33) + (long) n * i);
            long lo = s > 0 ? (1L << 33) + i : -(n * (1L << 33) + i);
            long hi = s > 0 ? n * (1L << 33) + i : -((1L << 33) + i);
            b.putLong(
                op == ReduceOp.SUM
                    ? sum
                    : op == ReduceOp.MEAN ? sum / n : op == ReduceOp.MIN ? lo : hi);
          }
      }
    }
    return b.array();
  }

  /**
   * Runs allReduce on this rank's closed-form input through the array API; returns the result
   * bytes.
   */
  static byte[] allReduceArray(Communicator c, ElementType type, ReduceOp op, int count) {
    ByteBuffer in = ByteBuffer.wrap(input(type, c.rank(), count)).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer out = ByteBuffer.allocate(count * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    switch (type) {
      case FLOAT32:
        {
          float[] a = new float[count];
          in.asFloatBuffer().get(a);
          c.allReduce(a, op);
          out.asFloatBuffer().put(a);
          break;
        }
      case FLOAT64:
        {
          double[] a = new double[count];
          in.asDoubleBuffer().get(a);
          c.allReduce(a, op);
          out.asDoubleBuffer().put(a);
          break;
        }
      default:
        {
          long[] a = new long[count];
          in.asLongBuffer().get(a);
          c.allReduce(a, op);
          out.asLongBuffer().put(a);
        }
    }
    return out.array();
  }

  /** Fails with the first differing element. */
  static void assertSameBytes(String context, byte[] expected, byte[] actual, ElementType type) {
    if (expected.length != actual.length) {
      throw new AssertionError(
          context + ": length " + actual.length + ", expected " + expected.length);
    }
    ByteBuffer e = ByteBuffer.wrap(expected).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer a = ByteBuffer.wrap(actual).order(ByteOrder.LITTLE_ENDIAN);
    int es = type.bytes();
    for (int i = 0; i < expected.length / es; i++) {
      long ev = es == 4 ? e.getInt(i * 4) : e.getLong(i * 8);
      long av = es == 4 ? a.getInt(i * 4) : a.getLong(i * 8);
      if (ev != av) {
        throw new AssertionError(
            context
                + ": element "
                + i
                + " is "
                + format(type, a, i)
                + ", expected "
                + format(type, e, i)
                + " (raw bits differ)");
      }
    }
  }

  private static String format(ElementType type, ByteBuffer b, int i) {
    switch (type) {
      case FLOAT32:
        return Float.toString(b.getFloat(i * 4));
      case FLOAT64:
        return Double.toString(b.getDouble(i * 8));
      default:
        return Long.toString(b.getLong(i * 8));
    }
  }
}
