package dev.sparktrainer.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;

/**
 * Element-wise kernels: {@code acc[i] = acc[i] op in[i]}, optionally followed by MEAN's division.
 * Positions are byte offsets into the viewed buffers; {@code n} counts elements.
 *
 * <p>Why blocks of primitive arrays: C2 does not vectorize loops of absolute {@code ByteBuffer} or
 * {@code FloatBuffer} accesses on direct memory (each one is a scoped, bounds-checked Unsafe call),
 * but it does vectorize plain loops over {@code float[]}. So each kernel copies a cache-sized block
 * of both operands into scratch arrays (a memcpy), combines them there and copies the result back,
 * which runs several times faster than element-wise buffer access. The result bits are exactly
 * those of the scalar loop: the same IEEE operation on the same operands, {@code acc} first, in
 * place.
 */
final class Reductions {
  /** Bytes of one operand block: both blocks stay in L1 while they are combined. */
  static final int BLOCK_BYTES = 8 * 1024;

  private Reductions() {}

  /**
   * Typed views of one buffer for the bulk copies. Rebuilt only when the buffer or its phase (base
   * offset modulo 8) changes, so a communicator that reduces the same buffer every step allocates
   * nothing.
   */
  static final class View {
    private ByteBuffer owner;
    private int origin = -1;
    private FloatBuffer floats;
    private DoubleBuffer doubles;
    private LongBuffer longs;

    /**
     * Points this view at {@code buffer}, for elements at byte offsets congruent to {@code base}.
     */
    View on(ByteBuffer buffer, int base) {
      int phase = base & 7;
      if (buffer != owner || phase != origin) {
        ByteBuffer d = buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        d.clear().position(Math.min(phase, d.capacity()));
        floats = d.asFloatBuffer();
        doubles = d.asDoubleBuffer();
        longs = d.asLongBuffer();
        owner = buffer;
        origin = phase;
      }
      return this;
    }

    private int index(int pos, int shift) {
      return (pos - origin) >> shift;
    }
  }

  /** Per-communicator scratch blocks: the kernels allocate nothing. */
  static final class Scratch {
    final float[] fa = new float[BLOCK_BYTES / 4];
    final float[] fb = new float[BLOCK_BYTES / 4];
    final double[] da = new double[BLOCK_BYTES / 8];
    final double[] db = new double[BLOCK_BYTES / 8];
    final long[] la = new long[BLOCK_BYTES / 8];
    final long[] lb = new long[BLOCK_BYTES / 8];
  }

  /**
   * {@code acc[i] = acc[i] op in[i]} for {@code n} elements; then, if {@code divisor} is not 0
   * (MEAN's last step), {@code acc[i] /= divisor}, which gives the same bits as a separate division
   * pass.
   */
  static void reduce(
      ElementType type,
      ReduceOp op,
      View acc,
      int apos,
      View in,
      int ipos,
      int n,
      int divisor,
      Scratch s) {
    switch (type) {
      case FLOAT32:
        reduceF32(
            op,
            acc.floats,
            acc.index(apos, 2),
            in.floats,
            in.index(ipos, 2),
            n,
            divisor,
            s.fa,
            s.fb);
        break;
      case FLOAT64:
        reduceF64(
            op,
            acc.doubles,
            acc.index(apos, 3),
            in.doubles,
            in.index(ipos, 3),
            n,
            divisor,
            s.da,
            s.db);
        break;
      case INT64:
        reduceI64(
            op, acc.longs, acc.index(apos, 3), in.longs, in.index(ipos, 3), n, divisor, s.la, s.lb);
        break;
      default:
        throw new AssertionError(type);
    }
  }

  private static void reduceF32(
      ReduceOp op,
      FloatBuffer acc,
      int ai,
      FloatBuffer in,
      int ii,
      int n,
      int divisor,
      float[] a,
      float[] b) {
    for (int done = 0; done < n; ) {
      int m = Math.min(a.length, n - done);
      acc.get(ai + done, a, 0, m);
      in.get(ii + done, b, 0, m);
      switch (op) {
        case SUM:
        case MEAN:
          addF32(a, b, m);
          break;
        case MIN:
          minF32(a, b, m);
          break;
        case MAX:
          maxF32(a, b, m);
          break;
        default:
          throw new AssertionError(op);
      }
      if (divisor != 0) {
        divF32(a, m, divisor);
      }
      acc.put(ai + done, a, 0, m);
      done += m;
    }
  }

  // One loop per operation and type, each a plain counted loop over arrays, so C2 vectorizes it.

  private static void addF32(float[] a, float[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = a[i] + b[i];
    }
  }

  private static void minF32(float[] a, float[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = Math.min(a[i], b[i]);
    }
  }

  private static void maxF32(float[] a, float[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = Math.max(a[i], b[i]);
    }
  }

  private static void divF32(float[] a, int m, int divisor) {
    float d = divisor;
    for (int i = 0; i < m; i++) {
      a[i] = a[i] / d;
    }
  }

  private static void reduceF64(
      ReduceOp op,
      DoubleBuffer acc,
      int ai,
      DoubleBuffer in,
      int ii,
      int n,
      int divisor,
      double[] a,
      double[] b) {
    for (int done = 0; done < n; ) {
      int m = Math.min(a.length, n - done);
      acc.get(ai + done, a, 0, m);
      in.get(ii + done, b, 0, m);
      switch (op) {
        case SUM:
        case MEAN:
          addF64(a, b, m);
          break;
        case MIN:
          minF64(a, b, m);
          break;
        case MAX:
          maxF64(a, b, m);
          break;
        default:
          throw new AssertionError(op);
      }
      if (divisor != 0) {
        divF64(a, m, divisor);
      }
      acc.put(ai + done, a, 0, m);
      done += m;
    }
  }

  private static void addF64(double[] a, double[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = a[i] + b[i];
    }
  }

  private static void minF64(double[] a, double[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = Math.min(a[i], b[i]);
    }
  }

  private static void maxF64(double[] a, double[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = Math.max(a[i], b[i]);
    }
  }

  private static void divF64(double[] a, int m, int divisor) {
    double d = divisor;
    for (int i = 0; i < m; i++) {
      a[i] = a[i] / d;
    }
  }

  private static void reduceI64(
      ReduceOp op,
      LongBuffer acc,
      int ai,
      LongBuffer in,
      int ii,
      int n,
      int divisor,
      long[] a,
      long[] b) {
    for (int done = 0; done < n; ) {
      int m = Math.min(a.length, n - done);
      acc.get(ai + done, a, 0, m);
      in.get(ii + done, b, 0, m);
      switch (op) {
        case SUM:
        case MEAN:
          addI64(a, b, m);
          break;
        case MIN:
          minI64(a, b, m);
          break;
        case MAX:
          maxI64(a, b, m);
          break;
        default:
          throw new AssertionError(op);
      }
      if (divisor != 0) {
        for (int i = 0; i < m; i++) {
          a[i] = a[i] / divisor;
        }
      }
      acc.put(ai + done, a, 0, m);
      done += m;
    }
  }

  private static void addI64(long[] a, long[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = a[i] + b[i];
    }
  }

  private static void minI64(long[] a, long[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = Math.min(a[i], b[i]);
    }
  }

  private static void maxI64(long[] a, long[] b, int m) {
    for (int i = 0; i < m; i++) {
      a[i] = Math.max(a[i], b[i]);
    }
  }

  /**
   * FLOAT32 partials arriving in a 16-bit wire format, accumulated in FP32; then divided by {@code
   * divisor} unless it is 0.
   */
  static void reduceHalf(
      ReduceOp op,
      WirePrecision wire,
      ByteBuffer acc,
      int apos,
      ByteBuffer in,
      int ipos,
      int n,
      int divisor) {
    float d = divisor;
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
      if (divisor != 0) {
        r = r / d;
      }
      acc.putFloat(a, r);
    }
  }
}
