package dev.sparktrainer.monitor;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;

/**
 * Hand-encoded TensorFlow {@code Event} protos (tensorflow/core/util/event.proto), the way the
 * TFRecord module encodes {@code Example}: no generated classes, no protobuf runtime.
 *
 * <pre>
 * Event   { double wall_time = 1; int64 step = 2; oneof what { string file_version = 3; Summary summary = 5; } }
 * Summary { repeated Value value = 1; }
 * Value   { string tag = 1; float simple_value = 2; }
 * </pre>
 */
final class EventProtos {
  static final int VARINT = 0;
  static final int FIXED64 = 1;
  static final int LEN = 2;
  static final int FIXED32 = 5;

  /** The first record of every event file: TensorBoard checks it. */
  static final String FILE_VERSION = "brain.Event:2";

  private EventProtos() {}

  static byte[] fileVersionEvent(double wallTime) {
    Buf e = new Buf();
    e.tag(1, FIXED64).fixed64(Double.doubleToRawLongBits(wallTime));
    e.tag(2, VARINT).varint(0);
    byte[] v = FILE_VERSION.getBytes(StandardCharsets.UTF_8);
    e.tag(3, LEN).varint(v.length).bytes(v);
    return e.toArray();
  }

  /** An Event with one Summary holding one simple_value per entry (NaN and infinite values skipped). */
  static byte[] scalarsEvent(double wallTime, long step, Map<String, Double> scalars) {
    Buf summary = new Buf();
    for (Map.Entry<String, Double> s : scalars.entrySet()) {
      if (s.getValue() == null || !Double.isFinite(s.getValue())) {
        continue;
      }
      Buf value = new Buf();
      byte[] tag = s.getKey().getBytes(StandardCharsets.UTF_8);
      value.tag(1, LEN).varint(tag.length).bytes(tag);
      value.tag(2, FIXED32).fixed32(Float.floatToRawIntBits(s.getValue().floatValue()));
      summary.tag(1, LEN).varint(value.size).bytes(value.buf, value.size);
    }
    Buf e = new Buf();
    e.tag(1, FIXED64).fixed64(Double.doubleToRawLongBits(wallTime));
    e.tag(2, VARINT).varint(step);
    e.tag(5, LEN).varint(summary.size).bytes(summary.buf, summary.size);
    return e.toArray();
  }

  /** A growable protobuf wire-format buffer. */
  static final class Buf {
    byte[] buf = new byte[64];
    int size;

    private void ensure(int extra) {
      if (size + extra > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(size + extra, 2 * buf.length));
      }
    }

    Buf tag(int field, int wire) {
      return varint(((long) field << 3) | wire);
    }

    Buf varint(long v) {
      ensure(10);
      while ((v & ~0x7FL) != 0) {
        buf[size++] = (byte) ((v & 0x7F) | 0x80);
        v >>>= 7;
      }
      buf[size++] = (byte) v;
      return this;
    }

    Buf fixed32(int v) {
      ensure(4);
      for (int i = 0; i < 4; i++) {
        buf[size++] = (byte) (v >>> (8 * i));
      }
      return this;
    }

    Buf fixed64(long v) {
      ensure(8);
      for (int i = 0; i < 8; i++) {
        buf[size++] = (byte) (v >>> (8 * i));
      }
      return this;
    }

    Buf bytes(byte[] b) {
      return bytes(b, b.length);
    }

    Buf bytes(byte[] b, int len) {
      ensure(len);
      System.arraycopy(b, 0, buf, size, len);
      size += len;
      return this;
    }

    byte[] toArray() {
      return Arrays.copyOf(buf, size);
    }
  }
}
