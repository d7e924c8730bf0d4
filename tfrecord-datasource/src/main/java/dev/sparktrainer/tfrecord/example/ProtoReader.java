package dev.sparktrainer.tfrecord.example;

/**
 * The protobuf wire format over a byte range, just what Example needs: varints, fixed32,
 * length-delimited fields and skipping. All bounds are checked: malformed input throws {@link
 * MalformedRecordException}, never reads outside the range, never allocates.
 */
final class ProtoReader {
  static final int VARINT = 0;
  static final int FIXED64 = 1;
  static final int LEN = 2;
  static final int START_GROUP = 3;
  static final int END_GROUP = 4;
  static final int FIXED32 = 5;

  private static final int MAX_GROUP_DEPTH = 64;

  byte[] buf;
  int pos;
  int limit;
  private int groupDepth;

  ProtoReader reset(byte[] buf, int off, int len) {
    this.buf = buf;
    this.pos = off;
    this.limit = off + len;
    this.groupDepth = 0;
    return this;
  }

  boolean hasMore() {
    return pos < limit;
  }

  int readTag() {
    long tag = readVarint64();
    if (tag >>> 32 != 0 || (tag >>> 3) == 0) {
      throw new MalformedRecordException("invalid protobuf tag " + tag + " at byte " + pos);
    }
    return (int) tag;
  }

  long readVarint64() {
    long result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= limit) {
        throw new MalformedRecordException("truncated varint");
      }
      byte b = buf[pos++];
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
    int v = dev.sparktrainer.tfrecord.codec.LittleEndian.getInt(buf, pos);
    pos += 4;
    return v;
  }

  /** Reads a length prefix and checks it fits; returns the length, {@link #pos} at the payload. */
  int readLength() {
    long len = readVarint64();
    if (len < 0 || len > limit - pos) {
      throw new MalformedRecordException(
          "length-delimited field of " + len + " bytes exceeds the " + (limit - pos) + " left");
    }
    return (int) len;
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
    if (++groupDepth > MAX_GROUP_DEPTH) {
      throw new MalformedRecordException("groups nested deeper than " + MAX_GROUP_DEPTH);
    }
    while (true) {
      if (!hasMore()) {
        throw new MalformedRecordException("unterminated group " + field);
      }
      int tag = readTag();
      if ((tag & 7) == END_GROUP) {
        if ((tag >>> 3) != field) {
          throw new MalformedRecordException("mismatched end of group " + field);
        }
        groupDepth--;
        return;
      }
      skip(tag);
    }
  }

  void skipBytes(int n) {
    if (n > limit - pos) {
      throw new MalformedRecordException("truncated field: " + n + " bytes needed");
    }
    pos += n;
  }
}
