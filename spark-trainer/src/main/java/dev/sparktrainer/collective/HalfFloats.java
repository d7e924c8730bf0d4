package dev.sparktrainer.collective;

import java.nio.ByteBuffer;

/**
 * FP32 to and from bfloat16 / IEEE binary16, round to nearest even (Java 17 has no {@code
 * Float.floatToFloat16}). Buffers are little-endian; positions are byte offsets.
 */
final class HalfFloats {
  private HalfFloats() {}

  static short toBf16(float f) {
    int bits = Float.floatToRawIntBits(f);
    if ((bits & 0x7fffffff) > 0x7f800000) {
      return (short) ((bits >>> 16) | 0x40); // keep NaN a (quiet) NaN
    }
    return (short) ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16);
  }

  static float fromBf16(short h) {
    return Float.intBitsToFloat((h & 0xffff) << 16);
  }

  static short toFp16(float f) {
    int bits = Float.floatToRawIntBits(f);
    int sign = (bits >>> 16) & 0x8000;
    int exp = (bits >>> 23) & 0xff;
    int mant = bits & 0x7fffff;
    if (exp == 0xff) {
      return (short) (sign | 0x7c00 | (mant != 0 ? 0x200 | (mant >>> 13) : 0));
    }
    int e = exp - 127 + 15;
    if (e >= 0x1f) {
      return (short) (sign | 0x7c00);
    }
    if (e <= 0) {
      if (e < -10) {
        return (short) sign;
      }
      mant |= 0x800000;
      int shift = 14 - e;
      int h = mant >>> shift;
      int rem = mant & ((1 << shift) - 1);
      int half = 1 << (shift - 1);
      if (rem > half || (rem == half && (h & 1) != 0)) {
        h++;
      }
      return (short) (sign | h);
    }
    int h = (e << 10) | (mant >>> 13);
    int rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1) != 0)) {
      h++; // may carry into the exponent, up to infinity: still correct
    }
    return (short) (sign | h);
  }

  static float fromFp16(short s) {
    int h = s & 0xffff;
    int sign = (h & 0x8000) << 16;
    int exp = (h >>> 10) & 0x1f;
    int mant = h & 0x3ff;
    if (exp == 0x1f) {
      return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
    }
    if (exp == 0) {
      float v = mant * 0x1p-24f;
      return sign != 0 ? -v : v;
    }
    return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }

  static short encode(float f, WirePrecision wire) {
    return wire == WirePrecision.BF16 ? toBf16(f) : toFp16(f);
  }

  static float decode(short h, WirePrecision wire) {
    return wire == WirePrecision.BF16 ? fromBf16(h) : fromFp16(h);
  }

  /** {@code n} floats at {@code src[spos..]} to 16-bit values at {@code dst[dpos..]}. */
  static void encode(
      ByteBuffer src, int spos, ByteBuffer dst, int dpos, int n, WirePrecision wire) {
    if (wire == WirePrecision.BF16) {
      for (int i = 0; i < n; i++) {
        dst.putShort(dpos + 2 * i, toBf16(src.getFloat(spos + 4 * i)));
      }
    } else {
      for (int i = 0; i < n; i++) {
        dst.putShort(dpos + 2 * i, toFp16(src.getFloat(spos + 4 * i)));
      }
    }
  }

  /** {@code n} 16-bit values at {@code src[spos..]} to floats at {@code dst[dpos..]}. */
  static void decode(
      ByteBuffer src, int spos, ByteBuffer dst, int dpos, int n, WirePrecision wire) {
    if (wire == WirePrecision.BF16) {
      for (int i = 0; i < n; i++) {
        dst.putFloat(dpos + 4 * i, fromBf16(src.getShort(spos + 2 * i)));
      }
    } else {
      for (int i = 0; i < n; i++) {
        dst.putFloat(dpos + 4 * i, fromFp16(src.getShort(spos + 2 * i)));
      }
    }
  }

  /** Rounds {@code n} floats in place to what the wire format can carry. */
  static void roundInPlace(ByteBuffer buf, int pos, int n, WirePrecision wire) {
    for (int i = 0; i < n; i++) {
      int at = pos + 4 * i;
      buf.putFloat(at, decode(encode(buf.getFloat(at), wire), wire));
    }
  }
}
