package dev.sparktrainer.tfrecord.example;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Finds where the wanted features of one serialized record are, without decoding any value: for
 * each wanted name, the offset and length of its {@code Feature} (Example, SequenceExample context)
 * or {@code FeatureList} (SequenceExample feature_lists) message in {@link #buffer()}. Absent
 * features have offset -1. Protobuf's semantics, as its generated parser has them
 * (ScannerDifferentialTest): a key seen twice keeps its last value; a map entry with its value
 * field twice merges them — the scanner then makes a copy of the record with the merged value
 * appended, which {@link #buffer()} returns (no writer emits that; the common case copies nothing).
 *
 * <p>TensorFlow keeps a hand-written parser for the same reason ({@code
 * example_proto_fast_parsing.cc}): the reader decodes only the wanted features, in place.
 */
public final class ExampleScanner {
  private final ProtoReader r = new ProtoReader();
  private final Merges merges = new Merges();
  private final FeatureLookup features;
  private final FeatureLookup featureLists;

  /** Feature (or context feature) locations, by index in the lookup. */
  public final int[] featureOffset;

  public final int[] featureLength;

  /** FeatureList locations (SequenceExample only). */
  public final int[] listOffset;

  public final int[] listLength;

  /**
   * Keep the wanted entries' locations; made once, not per record (a capturing lambda would
   * allocate).
   */
  private final EntryVisitor featureTarget;

  private final EntryVisitor listTarget;

  /**
   * @param features the Example features (or SequenceExample context features) wanted
   * @param featureLists the SequenceExample feature lists wanted, or null for Example
   */
  public ExampleScanner(FeatureLookup features, FeatureLookup featureLists) {
    this.features = features;
    this.featureLists = featureLists;
    featureOffset = new int[features.size()];
    featureLength = new int[features.size()];
    int nl = featureLists == null ? 0 : featureLists.size();
    listOffset = new int[nl];
    listLength = new int[nl];
    featureTarget = keeper(features, featureOffset, featureLength);
    listTarget = featureLists == null ? null : keeper(featureLists, listOffset, listLength);
  }

  /**
   * The bytes the offsets of the last scan refer to: the scanned buffer, or the scanner's copy of
   * the record when a map entry's value had to be merged.
   */
  public byte[] buffer() {
    return merges.buffer();
  }

  private EntryVisitor keeper(FeatureLookup lookup, int[] offs, int[] lens) {
    return (keyOff, keyLen, valOff, valLen) -> {
      int idx = lookup.find(r.buf, keyOff, keyLen);
      if (idx >= 0) {
        offs[idx] = valOff;
        lens[idx] = valLen;
      }
    };
  }

  /** Scans a serialized {@code tf.train.Example}. */
  public void scanExample(byte[] buf, int off, int len) {
    Arrays.fill(featureOffset, -1);
    r.reset(buf, off, len);
    merges.reset(buf, off + len);
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) { // Features features = 1
        int n = r.readLength();
        forEachEntry(r, r.pos + n, featureTarget, merges, false);
      } else {
        r.skip(tag);
      }
    }
  }

  /** Scans a serialized {@code tf.train.SequenceExample}. */
  public void scanSequenceExample(byte[] buf, int off, int len) {
    Arrays.fill(featureOffset, -1);
    Arrays.fill(listOffset, -1);
    r.reset(buf, off, len);
    merges.reset(buf, off + len);
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) { // Features context = 1
        int n = r.readLength();
        forEachEntry(r, r.pos + n, featureTarget, merges, false);
      } else if (tag == ((2 << 3) | ProtoReader.LEN)) { // FeatureLists feature_lists = 2
        int n = r.readLength();
        if (featureLists != null) {
          forEachEntry(r, r.pos + n, listTarget, merges, false);
        } else {
          r.pos += n;
        }
      } else {
        r.skip(tag);
      }
    }
  }

  /** Receives a map entry: the key's and the value's bytes in the reader's buffer. */
  @FunctionalInterface
  interface EntryVisitor {
    void visit(int keyOff, int keyLen, int valOff, int valLen);
  }

  /**
   * Visits the entries of a {@code map<string, V>} message body (repeated entries, field 1) that
   * ends at {@code end}, in order. Key and value may come in either order inside an entry; a
   * missing key is "" and a missing value the empty message (length 0), as protobuf defines; a
   * value given twice or more is their merge (the concatenation of their bytes, in {@code merges}).
   * With {@code checkKeys}, every key given (not only the last) must be valid UTF-8, as protobuf
   * requires of a proto3 {@code string}; the reader's lookup skips the check: a name it looks for
   * is valid UTF-8, and the bytes of any other name are never read.
   */
  static void forEachEntry(
      ProtoReader r, int end, EntryVisitor visitor, Merges merges, boolean checkKeys) {
    int outer = r.limit;
    int depth = r.messageDepth;
    r.limit = end;
    r.messageDepth = depth + 1; // inside the map message (Features, FeatureLists)
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag != ((1 << 3) | ProtoReader.LEN)) {
        r.skip(tag);
        continue;
      }
      int entryLen = r.readLength();
      int entryEnd = r.pos + entryLen;
      int saved = r.limit;
      r.limit = entryEnd;
      r.messageDepth = depth + 2; // inside the entry
      int keyOff = r.pos;
      int keyLen = 0;
      int valOff = entryEnd;
      int valLen = 0;
      int values = 0;
      while (r.hasMore()) {
        int t = r.readTag();
        if (t == ((1 << 3) | ProtoReader.LEN)) {
          keyLen = r.readLength();
          keyOff = r.pos;
          r.pos += keyLen;
          if (checkKeys && !validUtf8(r.buf, keyOff, keyLen)) {
            throw new MalformedRecordException(
                "feature name of " + keyLen + " bytes at byte " + keyOff + " is not valid UTF-8");
          }
        } else if (t == ((2 << 3) | ProtoReader.LEN)) {
          int len = r.readLength();
          if (++values == 1) {
            valOff = r.pos;
            valLen = len;
          } else {
            if (values == 2) {
              valOff = merges.start(valOff, valLen);
            }
            valLen = merges.append(r.pos, len);
          }
          r.pos += len;
        } else {
          r.skip(t);
        }
      }
      r.limit = saved;
      r.messageDepth = depth + 1;
      visitor.visit(keyOff, keyLen, valOff, valLen);
    }
    r.limit = outer;
    r.messageDepth = depth;
  }

  static boolean validUtf8(byte[] b, int off, int len) {
    int i = off;
    int end = off + len;
    while (i < end && b[i] >= 0) {
      i++;
    }
    if (i == end) {
      return true; // ASCII
    }
    try {
      StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(b, off, len));
      return true;
    } catch (CharacterCodingException e) {
      return false;
    }
  }

  /**
   * Merged map values: a copy of the record followed by the concatenated values (protobuf parses
   * concatenated messages as their merge), so every offset of the scan refers to one buffer.
   */
  static final class Merges {
    private byte[] source;
    private int sourceEnd;
    private byte[] copy = new byte[0];
    private int size = -1; // -1: nothing merged in this record
    private int valueStart;

    void reset(byte[] source, int sourceEnd) {
      this.source = source;
      this.sourceEnd = sourceEnd;
      this.size = -1;
    }

    byte[] buffer() {
      return size < 0 ? source : copy;
    }

    /** Starts a merged value with the first value's bytes; returns its offset in the copy. */
    int start(int off, int len) {
      if (size < 0) {
        ensure(sourceEnd);
        System.arraycopy(source, 0, copy, 0, sourceEnd);
        size = sourceEnd;
      }
      valueStart = size;
      append(off, len);
      return valueStart;
    }

    /** Appends another value's bytes (in the record) to the merged value; returns its length. */
    int append(int off, int len) {
      ensure(size + len);
      System.arraycopy(source, off, copy, size, len);
      size += len;
      return size - valueStart;
    }

    private void ensure(int n) {
      if (n > copy.length) {
        copy = Arrays.copyOf(copy, Math.max(n, 2 * copy.length));
      }
    }
  }

  /**
   * Iterates the Feature messages of a FeatureList at {@code buf[off, off+len)}: calls {@code
   * visitor} with each feature's bytes, in order; returns the number of features.
   */
  public int forEachInList(byte[] buf, int off, int len, FeatureVisitor visitor) {
    ProtoReader lr = listReader.reset(buf, off, len);
    lr.messageDepth = 3; // SequenceExample > FeatureLists > map entry > FeatureList
    int n = 0;
    while (lr.hasMore()) {
      int tag = lr.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) {
        int fl = lr.readLength();
        int fo = lr.pos;
        lr.pos += fl;
        visitor.visit(n++, buf, fo, fl);
      } else {
        lr.skip(tag);
      }
    }
    return n;
  }

  /** Counts the features of a FeatureList. */
  public int countInList(byte[] buf, int off, int len) {
    ProtoReader lr = listReader.reset(buf, off, len);
    lr.messageDepth = 3; // SequenceExample > FeatureLists > map entry > FeatureList
    int n = 0;
    while (lr.hasMore()) {
      int tag = lr.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) {
        n++;
      }
      lr.skip(tag);
    }
    return n;
  }

  private final ProtoReader listReader = new ProtoReader();

  /** Receives the Feature messages of a FeatureList. */
  @FunctionalInterface
  public interface FeatureVisitor {
    void visit(int index, byte[] buf, int off, int len);
  }
}
