package dev.sparktrainer.tfrecord.example;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * One decoded {@code tf.train.Feature}, in reusable arrays: the reader decodes every selected
 * feature of every record into the same instance, so the hot loop does not allocate. Bytes values
 * are views (offset, length) into the record's buffer.
 *
 * <p>Protobuf semantics: packed and unpacked encodings (even mixed) are accepted; a second list of
 * the same kind is appended (message merge), a list of another kind replaces the first (oneof). A
 * present Feature with no kind is valid: {@link #kind()} is null and {@link #count()} 0.
 */
public final class FeatureValues {
  private final ProtoReader in = new ProtoReader();
  private FeatureKind kind;
  private int count;
  private long[] longs = new long[16];
  private float[] floats = new float[16];
  private byte[] bytesBuf;
  private int[] byteOffs = new int[4];
  private int[] byteLens = new int[4];

  /** Decodes the Feature message in {@code buf[off, off+len)}. */
  public FeatureValues decode(byte[] buf, int off, int len) {
    kind = null;
    count = 0;
    bytesBuf = buf;
    ProtoReader r = in.reset(buf, off, len);
    r.messageDepth = 3; // Example > Features > map entry > Feature, for protobuf's recursion limit
    while (r.hasMore()) {
      int tag = r.readTag();
      FeatureKind k = FeatureKind.ofField(tag >>> 3);
      if (k == null || (tag & 7) != ProtoReader.LEN) {
        r.skip(tag);
        continue;
      }
      int listLen = r.readLength();
      int listEnd = r.pos + listLen;
      if (k != kind) {
        kind = k;
        count = 0;
      }
      decodeList(r, k, listEnd);
    }
    return this;
  }

  /**
   * The fast path for the commonest feature: if the Feature message in {@code buf[off, off+len)} is
   * exactly one packed float list of {@code count} values — what TensorFlow writes — the offset of
   * the little-endian values in {@code buf}; otherwise -1 (use {@link #decode}).
   */
  public static int packedFloatsAt(byte[] buf, int off, int len, int count) {
    int end = off + len;
    int p = off;
    if (p >= end || buf[p++] != (byte) ((2 << 3) | ProtoReader.LEN)) {
      return -1;
    }
    long outer = -1; // stays -1 unless the varint ends within 5 bytes
    long acc = 0;
    for (int shift = 0; p < end && shift < 35; shift += 7) {
      byte b = buf[p++];
      acc |= (long) (b & 0x7f) << shift;
      if (b >= 0) {
        outer = acc;
        break;
      }
    }
    if (outer != end - p || p >= end || buf[p++] != (byte) ((1 << 3) | ProtoReader.LEN)) {
      return -1;
    }
    long inner = -1;
    acc = 0;
    for (int shift = 0; p < end && shift < 35; shift += 7) {
      byte b = buf[p++];
      acc |= (long) (b & 0x7f) << shift;
      if (b >= 0) {
        inner = acc;
        break;
      }
    }
    return inner == 4L * count && inner == end - p ? p : -1;
  }

  /** Clears to "feature absent / empty". */
  public FeatureValues clear() {
    kind = null;
    count = 0;
    return this;
  }

  private void decodeList(ProtoReader r, FeatureKind k, int listEnd) {
    int outerLimit = r.limit;
    r.limit = listEnd;
    r.messageDepth++;
    try {
      while (r.hasMore()) {
        int tag = r.readTag();
        if ((tag >>> 3) != 1) {
          r.skip(tag);
          continue;
        }
        int wire = tag & 7;
        switch (k) {
          case FLOAT:
            if (wire == ProtoReader.LEN) {
              int n = r.readLength();
              if ((n & 3) != 0) {
                throw new MalformedRecordException("packed float list of " + n + " bytes");
              }
              int m = n >> 2;
              ensureFloats(count + m);
              ByteViews.copyFloats(r.buf, r.pos, floats, count, m);
              count += m;
              r.pos += n;
            } else if (wire == ProtoReader.FIXED32) {
              ensureFloats(count + 1);
              floats[count++] = Float.intBitsToFloat(r.readFixed32());
            } else {
              r.skip(tag);
            }
            break;
          case INT64:
            if (wire == ProtoReader.LEN) {
              int n = r.readLength();
              int end = r.pos + n;
              int saved = r.limit;
              r.limit = end;
              while (r.pos < end) {
                ensureLongs(count + 1);
                longs[count++] = r.readVarint64();
              }
              r.limit = saved;
            } else if (wire == ProtoReader.VARINT) {
              ensureLongs(count + 1);
              longs[count++] = r.readVarint64();
            } else {
              r.skip(tag);
            }
            break;
          default: // BYTES
            if (wire == ProtoReader.LEN) {
              int n = r.readLength();
              ensureBytes(count + 1);
              byteOffs[count] = r.pos;
              byteLens[count] = n;
              count++;
              r.pos += n;
            } else {
              r.skip(tag);
            }
        }
      }
    } finally {
      r.limit = outerLimit;
      r.messageDepth--;
    }
  }

  /** The kind, or null for a present Feature with no kind set. */
  public FeatureKind kind() {
    return kind;
  }

  /** Number of values. */
  public int count() {
    return count;
  }

  public long longAt(int i) {
    return longs[i];
  }

  public float floatAt(int i) {
    return floats[i];
  }

  /** The backing array of float values (valid up to {@link #count()}). */
  public float[] floatArray() {
    return floats;
  }

  /** The backing array of int64 values (valid up to {@link #count()}). */
  public long[] longArray() {
    return longs;
  }

  /** Buffer holding the bytes values. */
  public byte[] bytesBuffer() {
    return bytesBuf;
  }

  public int bytesOffset(int i) {
    return byteOffs[i];
  }

  public int bytesLength(int i) {
    return byteLens[i];
  }

  public byte[] bytesCopy(int i) {
    return Arrays.copyOfRange(bytesBuf, byteOffs[i], byteOffs[i] + byteLens[i]);
  }

  public String stringAt(int i) {
    return new String(bytesBuf, byteOffs[i], byteLens[i], StandardCharsets.UTF_8);
  }

  /** A copy as a plain value. */
  public Feature toFeature() {
    if (kind == null) {
      return Feature.empty();
    }
    switch (kind) {
      case INT64:
        return Feature.ofInt64(Arrays.copyOf(longs, count));
      case FLOAT:
        return Feature.ofFloats(Arrays.copyOf(floats, count));
      default:
        byte[][] v = new byte[count][];
        for (int i = 0; i < count; i++) {
          v[i] = bytesCopy(i);
        }
        return Feature.ofBytes(v);
    }
  }

  private void ensureFloats(int n) {
    if (n > floats.length) {
      floats = Arrays.copyOf(floats, Math.max(n, floats.length * 2));
    }
  }

  private void ensureLongs(int n) {
    if (n > longs.length) {
      longs = Arrays.copyOf(longs, Math.max(n, longs.length * 2));
    }
  }

  private void ensureBytes(int n) {
    if (n > byteOffs.length) {
      int m = Math.max(n, byteOffs.length * 2);
      byteOffs = Arrays.copyOf(byteOffs, m);
      byteLens = Arrays.copyOf(byteLens, m);
    }
  }
}
