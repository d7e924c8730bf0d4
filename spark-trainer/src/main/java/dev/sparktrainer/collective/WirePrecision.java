package dev.sparktrainer.collective;

/**
 * How FLOAT32 all-reduce payloads travel between ranks. Accumulation is always FP32; the 16-bit
 * formats halve the bytes on the wire at the cost of rounding every partial sum (round to nearest
 * even). The result stays bit-identical on every rank: the owner of a segment rounds its final
 * value to the wire format before distributing it. FLOAT64 and INT64 always travel at full
 * precision, and so do messages on the small-message path.
 */
public enum WirePrecision {
  /** Full precision (default). */
  FP32,
  /** bfloat16: FP32's range, 8 significant bits. */
  BF16,
  /** IEEE binary16: 11 significant bits, values above 65504 become infinite. */
  FP16
}
