package dev.sparktrainer.data;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * How a decoded record's float array holds what is not a float: an int64 value takes two slots (its
 * low and high 32 bits, as raw float bits), a sequence's length one slot (as raw int bits) before
 * its values. The bits are only ever copied (never used in float arithmetic), so they come out
 * exactly as they went in; on a little-endian machine two slots copied as floats into a buffer of
 * native order are the int64's bytes.
 */
final class Slots {
  static final boolean LITTLE_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

  private Slots() {}

  /** Writes {@code v} into slots {@code i} and {@code i + 1}. */
  static void putLong(float[] a, int i, long v) {
    a[i] = Float.intBitsToFloat((int) v);
    a[i + 1] = Float.intBitsToFloat((int) (v >>> 32));
  }

  /** The int64 in slots {@code i} and {@code i + 1}. */
  static long getLong(float[] a, int i) {
    return (Float.floatToRawIntBits(a[i]) & 0xFFFFFFFFL)
        | ((long) Float.floatToRawIntBits(a[i + 1]) << 32);
  }

  /** Writes a count (a sequence's length) into slot {@code i}. */
  static void putInt(float[] a, int i, int v) {
    a[i] = Float.intBitsToFloat(v);
  }

  /** The count in slot {@code i}. */
  static int getInt(float[] a, int i) {
    return Float.floatToRawIntBits(a[i]);
  }

  /**
   * Copies {@code n} int64 values (2n slots from {@code off}) to {@code dst} (native order) at byte
   * {@code at}.
   */
  static void copyLongs(float[] src, int off, int n, ByteBuffer dst, int at) {
    if (LITTLE_ENDIAN) {
      dst.asFloatBuffer().put(at / 4, src, off, 2 * n); // at is a multiple of 8
    } else {
      for (int i = 0; i < n; i++) {
        dst.putLong(at + 8 * i, getLong(src, off + 2 * i));
      }
    }
  }
}
