package dev.sparktrainer.data;

import java.nio.ByteBuffer;

/**
 * Where one feature of one row is decoded: a record's float array, or a batch's column buffer
 * (native order) at the row's place. Counts the values it takes and refuses more than the feature's
 * size, so a row with too many values fails instead of spilling into the next feature or row.
 */
final class FloatSink {
  private float[] array;
  private ByteBuffer buffer;
  private int base;
  private int max;
  int count;

  /** Targets {@code array[off .. off + max)}. */
  FloatSink toArray(float[] a, int off, int size) {
    this.array = a;
    this.buffer = null;
    this.base = off;
    this.max = size;
    this.count = 0;
    return this;
  }

  /** Targets the floats {@code buf[byteOff ..]}, {@code size} of them. */
  FloatSink toBuffer(ByteBuffer buf, int byteOff, int size) {
    this.array = null;
    this.buffer = buf;
    this.base = byteOff;
    this.max = size;
    this.count = 0;
    return this;
  }

  void add(float x) {
    if (count >= max) {
      throw new ParquetColumns.BadValue("more values than the shape holds (" + max + ")");
    }
    if (array != null) {
      array[base + count++] = x;
    } else {
      buffer.putFloat(base + 4 * count++, x);
    }
  }

  /** Writes {@code x} at {@code i} (< size) without counting it (sparse vectors' scatter). */
  void set(int i, float x) {
    if (array != null) {
      array[base + i] = x;
    } else {
      buffer.putFloat(base + 4 * i, x);
    }
  }

  /**
   * Writes int64 {@code v} into slots {@code i} and {@code i + 1} without counting them: a record's
   * two slots ({@link Slots#putLong}), or the int64 at that place of a batch's int64 column.
   */
  void putLong(int i, long v) {
    if (array != null) {
      Slots.putLong(array, base + i, v);
    } else {
      buffer.putLong(base + 4 * i, v);
    }
  }

  /** Writes a count (a sequence's length) into slot {@code i} without counting it. */
  void putInt(int i, int v) {
    if (array != null) {
      Slots.putInt(array, base + i, v);
    } else {
      buffer.putInt(base + 4 * i, v);
    }
  }

  /**
   * Counts every slot as taken: a column that writes its slots itself (int64 values, a sequence)
   * and checked its own counts.
   */
  void markFull() {
    count = max;
  }

  /** Copies {@code n} floats from {@code src[off ..]} and counts them. */
  void addAll(float[] src, int off, int n) {
    if (count + n > max) {
      throw new ParquetColumns.BadValue("more values than the shape holds (" + max + ")");
    }
    if (array != null) {
      System.arraycopy(src, off, array, base + count, n);
    } else {
      buffer.asFloatBuffer().put((base >> 2) + count, src, off, n);
    }
    count += n;
  }
}
