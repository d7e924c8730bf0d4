package dev.sparktrainer.collective;

import java.nio.ByteBuffer;

/**
 * Element-wise kernels on little-endian buffers: {@code acc[i] = acc[i] op in[i]}. Positions are byte
 * offsets; {@code n} counts elements. One loop per (type, op) so the JIT compiles tight loops.
 */
final class Reductions {
  private Reductions() {}

  static void reduce(ElementType type, ReduceOp op, ByteBuffer acc, int apos, ByteBuffer in, int ipos, int n) {
    switch (type) {
      case FLOAT32:
        reduceF32(op, acc, apos, in, ipos, n);
        break;
      case FLOAT64:
        reduceF64(op, acc, apos, in, ipos, n);
        break;
      case INT64:
        reduceI64(op, acc, apos, in, ipos, n);
        break;
      default:
        throw new AssertionError(type);
    }
  }

  private static void reduceF32(ReduceOp op, ByteBuffer acc, int apos, ByteBuffer in, int ipos, int n) {
    switch (op) {
      case SUM:
      case MEAN:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 2);
          acc.putFloat(a, acc.getFloat(a) + in.getFloat(ipos + (i << 2)));
        }
        break;
      case MIN:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 2);
          acc.putFloat(a, Math.min(acc.getFloat(a), in.getFloat(ipos + (i << 2))));
        }
        break;
      case MAX:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 2);
          acc.putFloat(a, Math.max(acc.getFloat(a), in.getFloat(ipos + (i << 2))));
        }
        break;
      default:
        throw new AssertionError(op);
    }
  }

  private static void reduceF64(ReduceOp op, ByteBuffer acc, int apos, ByteBuffer in, int ipos, int n) {
    switch (op) {
      case SUM:
      case MEAN:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 3);
          acc.putDouble(a, acc.getDouble(a) + in.getDouble(ipos + (i << 3)));
        }
        break;
      case MIN:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 3);
          acc.putDouble(a, Math.min(acc.getDouble(a), in.getDouble(ipos + (i << 3))));
        }
        break;
      case MAX:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 3);
          acc.putDouble(a, Math.max(acc.getDouble(a), in.getDouble(ipos + (i << 3))));
        }
        break;
      default:
        throw new AssertionError(op);
    }
  }

  private static void reduceI64(ReduceOp op, ByteBuffer acc, int apos, ByteBuffer in, int ipos, int n) {
    switch (op) {
      case SUM:
      case MEAN:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 3);
          acc.putLong(a, acc.getLong(a) + in.getLong(ipos + (i << 3)));
        }
        break;
      case MIN:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 3);
          acc.putLong(a, Math.min(acc.getLong(a), in.getLong(ipos + (i << 3))));
        }
        break;
      case MAX:
        for (int i = 0; i < n; i++) {
          int a = apos + (i << 3);
          acc.putLong(a, Math.max(acc.getLong(a), in.getLong(ipos + (i << 3))));
        }
        break;
      default:
        throw new AssertionError(op);
    }
  }

  /** FLOAT32 partials arriving in a 16-bit wire format, accumulated in FP32. */
  static void reduceHalf(
      ReduceOp op, WirePrecision wire, ByteBuffer acc, int apos, ByteBuffer in, int ipos, int n) {
    for (int i = 0; i < n; i++) {
      int a = apos + (i << 2);
      float x = HalfFloats.decode(in.getShort(ipos + (i << 1)), wire);
      float y = acc.getFloat(a);
      float r;
      switch (op) {
        case MIN:
          r = Math.min(y, x);
          break;
        case MAX:
          r = Math.max(y, x);
          break;
        default:
          r = y + x;
      }
      acc.putFloat(a, r);
    }
  }

  /** MEAN's final step: divide by the number of ranks. */
  static void divide(ElementType type, ByteBuffer buf, int pos, int n, int divisor) {
    switch (type) {
      case FLOAT32:
        float f = divisor;
        for (int i = 0; i < n; i++) {
          int a = pos + (i << 2);
          buf.putFloat(a, buf.getFloat(a) / f);
        }
        break;
      case FLOAT64:
        double d = divisor;
        for (int i = 0; i < n; i++) {
          int a = pos + (i << 3);
          buf.putDouble(a, buf.getDouble(a) / d);
        }
        break;
      case INT64:
        for (int i = 0; i < n; i++) {
          int a = pos + (i << 3);
          buf.putLong(a, buf.getLong(a) / divisor);
        }
        break;
      default:
        throw new AssertionError(type);
    }
  }
}
