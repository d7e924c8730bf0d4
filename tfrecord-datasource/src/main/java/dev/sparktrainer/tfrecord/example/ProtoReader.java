package dev.sparktrainer.tfrecord.example;

import dev.sparktrainer.tfrecord.codec.LittleEndian;

/**
 * The protobuf wire format over a byte range, just what Example needs: varints, fixed32,
 * length-delimited fields and skipping. All bounds are checked: malformed input throws {@link
 * MalformedRecordException}, never reads outside the range, never allocates. What it accepts and
 * rejects is what protobuf-java's {@code CodedInputStream} does (ScannerDifferentialTest): tags and
 * lengths are 32-bit varints of up to 10 bytes whose high bits are dropped, field number 0 and
 * negative lengths are invalid, and groups nest at most {@value #RECURSION_LIMIT} deep counting the
 * messages around them ({@link #messageDepth}).
 */
final class ProtoReader {
  static final int VARINT = 0;
  static final int FIXED64 = 1;
  static final int LEN = 2;
  static final int START_GROUP = 3;
  static final int END_GROUP = 4;
  static final int FIXED32 = 5;

  /** protobuf-java's default recursion limit: message nesting plus group nesting. */
  static final int RECURSION_LIMIT = 100;

  byte[] buf;
  int pos;
  int limit;

  /**
   * How deep in messages the bytes being read are, as protobuf-java counts for its recursion limit.
   */
  int messageDepth;

  private int groupDepth;

  ProtoReader reset(byte[] buf, int off, int len) {
    this.buf = buf;
    this.pos = off;
    this.limit = off + len;
    this.groupDepth = 0;
    this.messageDepth = 0;
    return this;
  }

  boolean hasMore() {
    return pos < limit;
  }

  int readTag() {
    int tag = (int) readVarint64(); // a 32-bit varint: protobuf drops the high bits
    if ((tag >>> 3) == 0) {
      throw new MalformedRecordException(
          "invalid protobuf tag (field number 0) before byte " + pos);
    }
    return tag;
  }

  long readVarint64() {
    int start = pos;
    long result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= limit) {
        throw new MalformedRecordException("truncated varint");
      }
      byte b = buf[pos++];
      if (shift == 63 && b >= 0 && limit - start >= 10) {
        // A 10-byte varint: protobuf-java's fast path (taken when 10 bytes are left) sets bit 63
        // whatever the last byte holds; its slow path, like the line below, takes the last byte's
        // low bit. They differ only on non-canonical input; match the one protobuf would take.
        return result | (1L << 63);
      }
      result |= (long) (b & 0x7f) << shift;
      if (b >= 0) {
        return result;
      }
    }
    throw new MalformedRecordException("varint longer than 10 bytes");
  }

  int readFixed32() {
    if (limit - pos < 4) {
      throw new MalformedRecordException("truncated fixed32");
    }
    int v = LittleEndian.getInt(buf, pos);
    pos += 4;
    return v;
  }

  /** Reads a length prefix and checks it fits; returns the length, {@link #pos} at the payload. */
  int readLength() {
    int len = (int) readVarint64(); // a 32-bit varint, as protobuf reads lengths
    if (len < 0 || len > limit - pos) {
      throw new MalformedRecordException(
          "length-delimited field of " + len + " bytes exceeds the " + (limit - pos) + " left");
    }
    return len;
  }

  void skip(int tag) {
    switch (tag & 7) {
      case VARINT:
        readVarint64();
        break;
      case FIXED64:
        skipBytes(8);
        break;
      case LEN:
        skipBytes(readLength());
        break;
      case FIXED32:
        skipBytes(4);
        break;
      case START_GROUP:
        skipGroup(tag >>> 3);
        break;
      default:
        throw new MalformedRecordException("invalid wire type " + (tag & 7));
    }
  }

  private void skipGroup(int field) {
    while (true) {
      if (!hasMore()) {
        throw new MalformedRecordException("unterminated group " + field);
      }
      int tag = readTag();
      if (messageDepth + groupDepth >= RECURSION_LIMIT) {
        throw new MalformedRecordException(
            "messages and groups nested deeper than " + RECURSION_LIMIT);
      }
      if ((tag & 7) == END_GROUP) {
        if ((tag >>> 3) != field) {
          throw new MalformedRecordException("mismatched end of group " + field);
        }
        return;
      }
      groupDepth++;
      skip(tag);
      groupDepth--;
    }
  }

  void skipBytes(int n) {
    if (n > limit - pos) {
      throw new MalformedRecordException("truncated field: " + n + " bytes needed");
    }
    pos += n;
  }
}
