package dev.sparktrainer.tfrecord.example;

import java.util.Arrays;

/**
 * Finds where the wanted features of one serialized record are, without decoding any value: for
 * each wanted name, the offset and length of its {@code Feature} (Example, SequenceExample
 * context) or {@code FeatureList} (SequenceExample feature_lists) message. Absent features have
 * offset -1. A key seen twice keeps its last value, as protobuf map parsing does.
 */
public final class ExampleScanner {
  private final ProtoReader r = new ProtoReader();
  private final FeatureLookup features;
  private final FeatureLookup featureLists;
  /** Feature (or context feature) locations, by index in the lookup. */
  public final int[] featureOffset;

  public final int[] featureLength;
  /** FeatureList locations (SequenceExample only). */
  public final int[] listOffset;

  public final int[] listLength;

  /** Keep the wanted entries' locations; made once, not per record (a capturing lambda would allocate). */
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
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) { // Features features = 1
        int n = r.readLength();
        forEachEntry(r, r.pos + n, featureTarget);
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
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) { // Features context = 1
        int n = r.readLength();
        forEachEntry(r, r.pos + n, featureTarget);
      } else if (tag == ((2 << 3) | ProtoReader.LEN)) { // FeatureLists feature_lists = 2
        int n = r.readLength();
        if (featureLists != null) {
          forEachEntry(r, r.pos + n, listTarget);
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
   * missing key is "" and a missing value the empty message (length 0), as protobuf defines.
   */
  static void forEachEntry(ProtoReader r, int end, EntryVisitor visitor) {
    int outer = r.limit;
    r.limit = end;
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
      int keyOff = r.pos;
      int keyLen = 0;
      int valOff = entryEnd;
      int valLen = 0;
      while (r.hasMore()) {
        int t = r.readTag();
        if (t == ((1 << 3) | ProtoReader.LEN)) {
          keyLen = r.readLength();
          keyOff = r.pos;
          r.pos += keyLen;
        } else if (t == ((2 << 3) | ProtoReader.LEN)) {
          valLen = r.readLength();
          valOff = r.pos;
          r.pos += valLen;
        } else {
          r.skip(t);
        }
      }
      r.limit = saved;
      visitor.visit(keyOff, keyLen, valOff, valLen);
    }
    r.limit = outer;
  }

  /**
   * Iterates the Feature messages of a FeatureList at {@code buf[off, off+len)}: calls {@code
   * visitor} with each feature's bytes, in order; returns the number of features.
   */
  public int forEachInList(byte[] buf, int off, int len, FeatureVisitor visitor) {
    ProtoReader lr = listReader.reset(buf, off, len);
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
