package dev.sparktrainer.it.fuzz;

import dev.sparktrainer.tfrecord.codec.Crc32c;
import dev.sparktrainer.tfrecord.codec.LittleEndian;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * Seed inputs of many shapes and the mutations applied to them, all from a {@link Random}: the same
 * seed gives the same inputs.
 *
 * <p>Valid records come from two writers: the product's {@link ExampleEncoder} (what TensorFlow
 * emits) and {@link Proto}, a small independent protobuf writer that also produces what protobuf
 * allows but TensorFlow does not write: unpacked and mixed lists, several lists in one Feature,
 * repeated keys, unknown fields of every wire type (groups included), and non-canonical (padded)
 * varints.
 */
final class Inputs {
  private Inputs() {}

  static final String[] NAMES = {
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "", "naïve_特征", "x".repeat(40)
  };

  // ---------------------------------------------------------------------------------------------
  // A protobuf writer, independent of the product's.

  /** Appends protobuf wire format; {@code pad} is the chance that a varint is written padded. */
  static final class Proto {
    private byte[] buf = new byte[64];
    private int size;
    private final Random rnd;
    private final Random padRnd; // its own stream: padding never changes what else is generated
    private final double pad;

    Proto(Random rnd, double pad) {
      this(rnd, new Random(rnd.nextLong()), pad);
    }

    private Proto(Random rnd, Random padRnd, double pad) {
      this.rnd = rnd;
      this.padRnd = padRnd;
      this.pad = pad;
    }

    Proto child() {
      return new Proto(rnd, padRnd, pad);
    }

    private void put(int b) {
      if (size == buf.length) {
        buf = Arrays.copyOf(buf, size * 2);
      }
      buf[size++] = (byte) b;
    }

    Proto varint(long v) {
      byte[] tmp = new byte[10];
      int n = 0;
      long x = v;
      do {
        tmp[n++] = (byte) (x & 0x7F);
        x >>>= 7;
      } while (x != 0);
      // padding: zero groups with the continuation bit, up to 9 bytes. (Protobuf accepts 10, but a
      // padded 10-byte varint is where protobuf-java's fast path, which the scanner matches, sets
      // bit 63 whatever the last byte holds, unlike its slow path and TensorFlow's C++ parser: not
      // the same value, so not a padding of it.)
      int extra = pad > 0 && padRnd.nextDouble() < pad ? 1 + padRnd.nextInt(4) : 0;
      int total = Math.max(n, Math.min(9, n + extra));
      for (int i = 0; i < total; i++) {
        put((i < n ? tmp[i] : 0) | (i < total - 1 ? 0x80 : 0));
      }
      return this;
    }

    Proto tag(int field, int wire) {
      return varint(((long) field << 3) | wire);
    }

    Proto fixed32(int v) {
      for (int i = 0; i < 4; i++) {
        put(v >>> (8 * i));
      }
      return this;
    }

    Proto fixed64(long v) {
      for (int i = 0; i < 8; i++) {
        put((int) (v >>> (8 * i)));
      }
      return this;
    }

    Proto bytes(int field, byte[] b) {
      tag(field, 2);
      varint(b.length);
      for (byte x : b) {
        put(x);
      }
      return this;
    }

    Proto message(int field, Proto m) {
      return bytes(field, m.toByteArray());
    }

    byte[] toByteArray() {
      return Arrays.copyOf(buf, size);
    }

    /** A field this schema does not know, of a random wire type (groups nest). */
    Proto unknownField(int depth) {
      int field = 4 + rnd.nextInt(30);
      switch (rnd.nextInt(depth < 3 ? 5 : 4)) {
        case 0:
          return tag(field, 0).varint(rnd.nextLong() >> rnd.nextInt(64));
        case 1:
          return tag(field, 1).fixed64(rnd.nextLong());
        case 2:
          return bytes(field, randomBytes(rnd, rnd.nextInt(12)));
        case 3:
          return tag(field, 5).fixed32(rnd.nextInt());
        default:
          tag(field, 3);
          for (int i = rnd.nextInt(3); i > 0; i--) {
            unknownField(depth + 1);
          }
          return tag(field, 4);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Valid records.

  static byte[] randomBytes(Random r, int n) {
    byte[] b = new byte[n];
    r.nextBytes(b);
    return b;
  }

  /** A Feature message: 0 lists (no kind), one list, or several (merged or replaced). */
  static Proto feature(Random r, Proto parent) {
    Proto f = parent.child();
    int lists = r.nextInt(8) == 0 ? 0 : r.nextInt(6) == 0 ? 2 + r.nextInt(2) : 1;
    FeatureKind k = FeatureKind.values()[r.nextInt(3)];
    for (int l = 0; l < lists; l++) {
      if (r.nextInt(4) == 0) {
        k = FeatureKind.values()[r.nextInt(3)];
      }
      Proto list = f.child();
      int n = r.nextInt(5) == 0 ? r.nextInt(300) : r.nextInt(6);
      boolean packed = r.nextInt(3) != 0;
      switch (k) {
        case BYTES:
          for (int i = 0; i < n; i++) {
            list.bytes(
                1,
                r.nextBoolean()
                    ? NAMES[r.nextInt(NAMES.length)].getBytes(StandardCharsets.UTF_8)
                    : randomBytes(r, r.nextInt(20)));
          }
          break;
        case FLOAT:
          if (packed) {
            Proto p = list.child();
            for (int i = 0; i < n; i++) {
              p.fixed32(
                  Float.floatToRawIntBits(
                      r.nextInt(10) == 0 ? Float.NaN : (float) r.nextGaussian()));
            }
            list.message(1, p);
          } else {
            for (int i = 0; i < n; i++) {
              list.tag(1, 5).fixed32(Float.floatToRawIntBits((float) r.nextGaussian()));
            }
          }
          break;
        default:
          if (packed) {
            Proto p = list.child();
            for (int i = 0; i < n; i++) {
              p.varint(r.nextLong() >> r.nextInt(64));
            }
            list.message(1, p);
          } else {
            for (int i = 0; i < n; i++) {
              list.tag(1, 0).varint(r.nextLong() >> r.nextInt(64));
            }
          }
      }
      if (r.nextInt(10) == 0) {
        list.unknownField(0);
      }
      f.message(k.fieldNumber(), list);
      if (r.nextInt(12) == 0) {
        f.unknownField(0);
      }
    }
    return f;
  }

  /** A Features (or FeatureLists) map body with {@code n} entries, keys possibly repeated. */
  static Proto featureMap(Random r, Proto parent, int n, boolean lists) {
    Proto map = parent.child();
    for (int i = 0; i < n; i++) {
      Proto entry = map.child();
      byte[] key = NAMES[r.nextInt(NAMES.length)].getBytes(StandardCharsets.UTF_8);
      Proto value;
      if (lists) {
        value = entry.child();
        for (int s = r.nextInt(5); s > 0; s--) {
          value.message(1, feature(r, value));
        }
      } else {
        value = feature(r, entry);
      }
      if (r.nextInt(10) == 0) { // value before key: protobuf allows any order
        entry.message(2, value).bytes(1, key);
      } else if (r.nextInt(30) == 0) {
        entry.message(2, value); // no key: ""
      } else {
        entry.bytes(1, key).message(2, value);
      }
      if (r.nextInt(15) == 0) {
        entry.unknownField(0);
      }
      map.message(1, entry);
    }
    return map;
  }

  /** A {@code tf.train.Example}, from either writer. */
  static byte[] example(Random r) {
    return r.nextInt(3) == 0 ? encoderExample(r) : protoExample(r, r.nextInt(4) == 0 ? 0.3 : 0);
  }

  /**
   * A {@code tf.train.Example} by {@link Proto}; {@code pad} is the share of padded varints. The
   * same random state gives the same record whatever {@code pad}, only its varints' widths differ.
   */
  static byte[] protoExample(Random r, double pad) {
    Proto ex = new Proto(r, pad);
    ex.message(1, featureMap(r, ex, r.nextInt(9), false));
    if (r.nextInt(10) == 0) {
      ex.unknownField(0);
    }
    return ex.toByteArray();
  }

  /** A {@code tf.train.SequenceExample}. */
  static byte[] sequenceExample(Random r, double pad) {
    Proto se = new Proto(r, pad);
    if (r.nextInt(6) != 0) {
      se.message(1, featureMap(r, se, r.nextInt(5), false));
    }
    if (r.nextInt(6) != 0) {
      se.message(2, featureMap(r, se, r.nextInt(5), true));
    }
    if (r.nextInt(10) == 0) {
      se.unknownField(0);
    }
    return se.toByteArray();
  }

  /** What the product's own encoder writes: packed lists, unique keys. */
  static byte[] encoderExample(Random r) {
    ExampleEncoder enc = new ExampleEncoder();
    enc.reset();
    List<String> names = new ArrayList<>(Arrays.asList(NAMES));
    Collections.shuffle(names, r);
    for (String name : names.subList(0, r.nextInt(6))) {
      FeatureKind k = FeatureKind.values()[r.nextInt(3)];
      enc.beginFeature(name, k);
      int n = r.nextInt(5) == 0 ? r.nextInt(200) : r.nextInt(5);
      for (int i = 0; i < n; i++) {
        switch (k) {
          case BYTES:
            enc.addBytes(randomBytes(r, r.nextInt(16)));
            break;
          case FLOAT:
            enc.addFloat((float) r.nextGaussian());
            break;
          default:
            enc.addInt64(r.nextLong() >> r.nextInt(64));
        }
      }
      enc.endFeature();
    }
    return enc.finishExample();
  }

  /** A record payload for the framing fuzzer: a record, random bytes or a big blob. */
  static byte[] payload(Random r) {
    switch (r.nextInt(10)) {
      case 0:
        return new byte[0];
      case 1:
        return randomBytes(r, r.nextInt(40));
      case 2:
        return randomBytes(r, 65_000 + r.nextInt(10_000)); // larger than a reader's first buffer
      case 3:
        return sequenceExample(r, 0);
      default:
        return example(r);
    }
  }

  /** The records framed as TFRecord; {@code offsets} receives each record's header offset. */
  static byte[] frame(List<byte[]> records, long[] offsets) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (TFRecordWriter w = new TFRecordWriter(out)) {
      for (int i = 0; i < records.size(); i++) {
        if (offsets != null) {
          offsets[i] = w.bytesWritten();
        }
        w.write(records.get(i));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  // ---------------------------------------------------------------------------------------------
  // Mutations.

  private static final long[] INTERESTING_LENGTHS = {
    0,
    1,
    2,
    11,
    12,
    15,
    16,
    127,
    128,
    255,
    65_535,
    65_536,
    (1L << 20) - 16,
    1L << 20,
    (1L << 20) + 1,
    Integer.MAX_VALUE - 64,
    Integer.MAX_VALUE,
    1L << 31,
    0xFFFF_FFFFL,
    1L << 32,
    Long.MAX_VALUE,
    -1,
    Long.MIN_VALUE
  };

  /** One to {@code max} random byte-level mutations. */
  static byte[] mutate(Random r, byte[] in, int max) {
    byte[] b = in;
    for (int m = 1 + r.nextInt(max); m > 0; m--) {
      b = mutateOnce(r, b);
    }
    return b;
  }

  static byte[] mutateOnce(Random r, byte[] b) {
    int n = b.length;
    switch (r.nextInt(n == 0 ? 2 : 10)) {
      case 0: // random bytes, short
        return randomBytes(r, r.nextInt(24));
      case 1:
        { // insert 1..8 bytes
          int at = n == 0 ? 0 : r.nextInt(n + 1);
          byte[] ins =
              r.nextBoolean()
                  ? randomBytes(r, 1 + r.nextInt(8))
                  : new byte[] {(byte) 0x80, (byte) 0xFF, 0x7F, 0, 0x0A, 0x12, 0x1A};
          byte[] out = new byte[n + ins.length];
          System.arraycopy(b, 0, out, 0, at);
          System.arraycopy(ins, 0, out, at, ins.length);
          System.arraycopy(b, at, out, at + ins.length, n - at);
          return out;
        }
      case 2:
        { // bit flip
          byte[] out = b.clone();
          out[r.nextInt(n)] ^= (byte) (1 << r.nextInt(8));
          return out;
        }
      case 3:
        { // random byte
          byte[] out = b.clone();
          out[r.nextInt(n)] = (byte) r.nextInt(256);
          return out;
        }
      case 4:
        { // interesting byte
          byte[] out = b.clone();
          byte[] vals = {0, (byte) 0xFF, 0x7F, (byte) 0x80, 1, 0x0A, 0x12, 0x1A, 0x22, 0x0B, 0x0C};
          out[r.nextInt(n)] = vals[r.nextInt(vals.length)];
          return out;
        }
      case 5:
        { // delete a range
          int at = r.nextInt(n);
          int len = 1 + r.nextInt(Math.min(16, n - at));
          byte[] out = new byte[n - len];
          System.arraycopy(b, 0, out, 0, at);
          System.arraycopy(b, at + len, out, at, n - at - len);
          return out;
        }
      case 6: // truncate
        return Arrays.copyOf(b, r.nextInt(n));
      case 7:
        { // duplicate a range somewhere else
          int from = r.nextInt(n);
          int len = 1 + r.nextInt(Math.min(32, n - from));
          int at = r.nextInt(n + 1);
          byte[] out = new byte[n + len];
          System.arraycopy(b, 0, out, 0, at);
          System.arraycopy(b, from, out, at, len);
          System.arraycopy(b, at, out, at + len, n - at);
          return out;
        }
      case 8:
        { // a varint written over the bytes at a random place (lengths, tags, values)
          Proto p = new Proto(r, 0.2);
          p.varint(
              r.nextBoolean()
                  ? INTERESTING_LENGTHS[r.nextInt(INTERESTING_LENGTHS.length)]
                  : r.nextInt(1 << r.nextInt(31)));
          byte[] v = p.toByteArray();
          byte[] out = b.clone();
          int at = r.nextInt(n);
          System.arraycopy(v, 0, out, at, Math.min(v.length, n - at));
          return out;
        }
      default:
        { // swap two bytes
          byte[] out = b.clone();
          int i = r.nextInt(n);
          int j = r.nextInt(n);
          byte t = out[i];
          out[i] = out[j];
          out[j] = t;
          return out;
        }
    }
  }

  /**
   * Corrupts the length field of one record of a TFRecord stream, and with {@code forge} also
   * rewrites its length CRC so the header passes the reader's first check.
   */
  static byte[] corruptLength(
      Random r, byte[] stream, long[] offsets, int records, boolean forge, long maxLength) {
    if (records == 0) {
      return stream;
    }
    int rec = r.nextInt(records);
    int at = (int) offsets[rec];
    if (at + 12 > stream.length) {
      return stream;
    }
    byte[] out = stream.clone();
    long len;
    switch (r.nextInt(4)) {
      case 0:
        len = INTERESTING_LENGTHS[r.nextInt(INTERESTING_LENGTHS.length)];
        break;
      case 1:
        len = LittleEndian.getLong(out, at) + r.nextInt(9) - 4;
        break;
      case 2:
        len = r.nextInt((int) Math.min(Integer.MAX_VALUE, maxLength + 2));
        break;
      default:
        len = maxLength + r.nextInt(3) - 1;
    }
    LittleEndian.putLong(out, at, len);
    if (forge) {
      LittleEndian.putInt(out, at + 8, new Crc32c().maskedCrc(out, at, 8));
    }
    return out;
  }

  /** Rewrites the data CRC of every complete frame so mutated payloads reach the decoders. */
  static void fixDataCrc(byte[] stream, int at, int len) {
    LittleEndian.putInt(stream, at + 12 + len, new Crc32c().maskedCrc(stream, at + 12, len));
  }
}
