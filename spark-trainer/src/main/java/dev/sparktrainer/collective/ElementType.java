package dev.sparktrainer.collective;

/**
 * Element types the collectives reduce. Buffers hold them little-endian (DJL's and x86's order).
 */
public enum ElementType {
  /** IEEE 754 binary32, {@code float}. */
  FLOAT32(4),
  /** IEEE 754 binary64, {@code double}. */
  FLOAT64(8),
  /** Two's complement 64-bit integer, {@code long}. */
  INT64(8);

  private final int bytes;

  ElementType(int bytes) {
    this.bytes = bytes;
  }

  /** Size of one element in bytes. */
  public int bytes() {
    return bytes;
  }
}
