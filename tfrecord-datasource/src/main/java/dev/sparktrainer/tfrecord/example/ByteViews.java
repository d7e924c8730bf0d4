package dev.sparktrainer.tfrecord.example;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** Bulk little-endian conversions between bytes and primitive arrays. */
final class ByteViews {
  private ByteViews() {}

  static void copyFloats(byte[] src, int off, float[] dst, int dstOff, int n) {
    ByteBuffer.wrap(src, off, n * 4)
        .order(ByteOrder.LITTLE_ENDIAN)
        .asFloatBuffer()
        .get(dst, dstOff, n);
  }

  static void putFloats(float[] src, int srcOff, int n, byte[] dst, int off) {
    ByteBuffer.wrap(dst, off, n * 4)
        .order(ByteOrder.LITTLE_ENDIAN)
        .asFloatBuffer()
        .put(src, srcOff, n);
  }
}
