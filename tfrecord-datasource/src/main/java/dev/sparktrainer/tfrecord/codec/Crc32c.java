package dev.sparktrainer.tfrecord.codec;

import java.util.zip.CRC32C;

/**
 * CRC-32C (Castagnoli) with TensorFlow's mask. {@link CRC32C} is intrinsified by the JIT to the
 * hardware instruction, so this is as fast as the JVM allows.
 */
public final class Crc32c {
  private static final int MASK_DELTA = 0xa282ead8;

  private final CRC32C crc = new CRC32C();

  /** Plain CRC-32C of {@code len} bytes of {@code b} from {@code off}. */
  public int crc(byte[] b, int off, int len) {
    crc.reset();
    crc.update(b, off, len);
    return (int) crc.getValue();
  }

  /** Masked CRC-32C as written in TFRecord files. */
  public int maskedCrc(byte[] b, int off, int len) {
    return mask(crc(b, off, len));
  }

  /** TensorFlow's mask: rotate right by 15 bits and add a constant. */
  public static int mask(int crc) {
    return ((crc >>> 15) | (crc << 17)) + MASK_DELTA;
  }

  /** Inverse of {@link #mask(int)}. */
  public static int unmask(int masked) {
    int rot = masked - MASK_DELTA;
    return (rot >>> 17) | (rot << 15);
  }
}
