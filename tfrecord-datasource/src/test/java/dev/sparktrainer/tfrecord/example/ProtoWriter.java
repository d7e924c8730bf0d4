package dev.sparktrainer.tfrecord.example;

import dev.sparktrainer.tfrecord.codec.LittleEndian;
import java.util.Arrays;

/**
 * Raw protobuf wire format, for tests: hand-made encodings (unpacked lists, odd field orders,
 * unknown fields, merges) as other writers may emit them, which the generated classes never write.
 */
final class ProtoWriter {
  byte[] buf;
  int size;

  ProtoWriter(int capacity) {
    buf = new byte[capacity];
  }

  void reset() {
    size = 0;
  }

  void ensure(int extra) {
    if (size + extra > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(size + extra, buf.length * 2));
    }
  }

  void varint(long v) {
    ensure(10);
    while ((v & ~0x7FL) != 0) {
      buf[size++] = (byte) ((v & 0x7F) | 0x80);
      v >>>= 7;
    }
    buf[size++] = (byte) v;
  }

  void tag(int field, int wire) {
    varint((field << 3) | wire);
  }

  void fixed32(int v) {
    ensure(4);
    LittleEndian.putInt(buf, size, v);
    size += 4;
  }

  void bytes(byte[] b, int off, int len) {
    ensure(len);
    System.arraycopy(b, off, buf, size, len);
    size += len;
  }

  void append(ProtoWriter other) {
    bytes(other.buf, 0, other.size);
  }

  static int varintSize(long v) {
    int n = 1;
    while ((v & ~0x7FL) != 0) {
      n++;
      v >>>= 7;
    }
    return n;
  }
}
