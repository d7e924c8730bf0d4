package dev.sparktrainer.tfrecord.example;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.WireFormat;
import dev.sparktrainer.tfrecord.proto.Example;
import dev.sparktrainer.tfrecord.proto.FeatureList;
import dev.sparktrainer.tfrecord.proto.FeatureLists;
import dev.sparktrainer.tfrecord.proto.Features;
import dev.sparktrainer.tfrecord.proto.FloatList;
import dev.sparktrainer.tfrecord.proto.SequenceExample;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Writes {@code tf.train.Example} and {@code tf.train.SequenceExample} records one feature at a
 * time — the Spark writer's hot path — with protobuf-java's {@link CodedOutputStream} and the field
 * numbers of the classes protoc generates from TensorFlow's {@code example.proto} and {@code
 * feature.proto} ({@link dev.sparktrainer.tfrecord.proto}). The bytes are exactly what those
 * classes' {@code toByteArray()} writes for the same message (packed float and int64 lists, as
 * TensorFlow writes them; ExampleEncoderTest checks it on random records); building the messages
 * with their builders instead costs a boxed-free but per-value copy into a growable list and a
 * second pass to serialize, several times this encoder's time for dense float features. Values are
 * kept in primitive arrays until {@link #finishExample()}, which sizes the record exactly and
 * writes it once. Reused across records: {@link #reset()}, add features, then finish.
 *
 * <pre>{@code
 * enc.reset();
 * enc.beginFeature("x", FeatureKind.FLOAT); enc.addFloat(1f); enc.endFeature();
 * byte[] record = enc.finishExample();
 * }</pre>
 */
public final class ExampleEncoder {
  private static final int LEN = WireFormat.WIRETYPE_LENGTH_DELIMITED;
  // map<K, V> entries: key = 1, value = 2 (protobuf's map encoding)
  private static final int MAP_KEY = 1;
  private static final int MAP_VALUE = 2;

  // Values of every feature of the record, appended in order.
  private float[] floats = new float[1024];
  private int nFloats;
  // The floats as little-endian bytes, converted in bulk when finishing: CodedOutputStream's
  // per-value writeFixed32NoTag costs ~10x a bulk conversion and copy.
  private byte[] floatBytes = new byte[4096];
  private long[] longs = new long[64];
  private int nLongs;
  private byte[] bytes = new byte[1024];
  private int nBytes;
  private int[] bytesEnd = new int[64]; // end offset in `bytes` of each bytes value
  private int nBytesValues;

  // Features, in the order added: kind (-1: none), key (null inside a list), their values' range in
  // the pool of their kind, and whether they belong to the Example / SequenceExample context.
  private int[] kind = new int[16];
  private byte[][] key = new byte[16][];
  private int[] valuesStart = new int[16];
  private int[] valuesEnd = new int[16];
  private boolean[] inContext = new boolean[16];
  private int[] size = new int[16]; // Feature message size, filled when finishing
  private int nFeatures;

  // Feature lists: key and the range of their features (a list's features are added together).
  private byte[][] listKey = new byte[4][];
  private int[] listStart = new int[4];
  private int[] listEnd = new int[4];
  private int nLists;

  private FeatureKind current;
  private int currentStart;
  private byte[] currentKey;
  private byte[] currentListKey;
  private int currentListStart;

  public void reset() {
    nFloats = 0;
    nLongs = 0;
    nBytes = 0;
    nBytesValues = 0;
    nFeatures = 0;
    nLists = 0;
    current = null;
    currentKey = null;
    currentListKey = null;
  }

  /** Starts a feature of the Example (or of the SequenceExample context). */
  public void beginFeature(byte[] nameUtf8, FeatureKind kind) {
    this.currentKey = nameUtf8;
    begin(kind);
  }

  private void begin(FeatureKind kind) {
    this.current = kind;
    this.currentStart = kind == null ? 0 : poolSize(kind);
  }

  private int poolSize(FeatureKind k) {
    return switch (k) {
      case FLOAT -> nFloats;
      case INT64 -> nLongs;
      default -> nBytesValues;
    };
  }

  public void beginFeature(String name, FeatureKind kind) {
    beginFeature(name.getBytes(StandardCharsets.UTF_8), kind);
  }

  public void addInt64(long v) {
    if (nLongs == longs.length) {
      longs = Arrays.copyOf(longs, 2 * longs.length);
    }
    longs[nLongs++] = v;
  }

  public void addFloat(float v) {
    if (nFloats == floats.length) {
      floats = Arrays.copyOf(floats, 2 * floats.length);
    }
    floats[nFloats++] = v;
  }

  public void addFloats(float[] v, int off, int n) {
    if (nFloats + n > floats.length) {
      floats = Arrays.copyOf(floats, Math.max(nFloats + n, 2 * floats.length));
    }
    System.arraycopy(v, off, floats, nFloats, n);
    nFloats += n;
  }

  /** Adds a copy of {@code b[off, off+len)}. */
  public void addBytes(byte[] b, int off, int len) {
    if (nBytes + len > bytes.length) {
      bytes = Arrays.copyOf(bytes, Math.max(nBytes + len, 2 * bytes.length));
    }
    System.arraycopy(b, off, bytes, nBytes, len);
    nBytes += len;
    if (nBytesValues == bytesEnd.length) {
      bytesEnd = Arrays.copyOf(bytesEnd, 2 * bytesEnd.length);
    }
    bytesEnd[nBytesValues++] = nBytes;
  }

  public void addBytes(byte[] b) {
    addBytes(b, 0, b.length);
  }

  /** Ends the current feature of the Example / context. */
  public void endFeature() {
    addFeature(currentKey, true);
  }

  /** Starts a feature list (SequenceExample only). */
  public void beginFeatureList(byte[] nameUtf8) {
    currentListKey = nameUtf8;
    currentListStart = nFeatures;
  }

  public void beginFeatureList(String name) {
    beginFeatureList(name.getBytes(StandardCharsets.UTF_8));
  }

  /** Starts one Feature inside the current feature list. */
  public void beginListFeature(FeatureKind kind) {
    begin(kind);
  }

  /** Ends one Feature inside the current feature list. */
  public void endListFeature() {
    addFeature(null, false);
  }

  public void endFeatureList() {
    if (nLists == listKey.length) {
      listKey = Arrays.copyOf(listKey, 2 * nLists);
      listStart = Arrays.copyOf(listStart, 2 * nLists);
      listEnd = Arrays.copyOf(listEnd, 2 * nLists);
    }
    listKey[nLists] = currentListKey;
    listStart[nLists] = currentListStart;
    listEnd[nLists++] = nFeatures;
    currentListKey = null;
  }

  private void addFeature(byte[] k, boolean context) {
    if (nFeatures == kind.length) {
      int n = 2 * nFeatures;
      kind = Arrays.copyOf(kind, n);
      key = Arrays.copyOf(key, n);
      valuesStart = Arrays.copyOf(valuesStart, n);
      valuesEnd = Arrays.copyOf(valuesEnd, n);
      inContext = Arrays.copyOf(inContext, n);
      size = Arrays.copyOf(size, n);
    }
    kind[nFeatures] = current == null ? -1 : current.ordinal();
    key[nFeatures] = k;
    valuesStart[nFeatures] = currentStart;
    valuesEnd[nFeatures] = current == null ? 0 : poolSize(current);
    inContext[nFeatures] = context;
    nFeatures++;
  }

  /** The serialized Example. */
  public byte[] finishExample() {
    convertFloats();
    int features = contextSize();
    byte[] out = new byte[lenFieldSize(features)];
    CodedOutputStream o = CodedOutputStream.newInstance(out);
    try {
      o.writeTag(Example.FEATURES_FIELD_NUMBER, LEN);
      o.writeUInt32NoTag(features);
      writeContext(o);
      o.checkNoSpaceLeft();
    } catch (IOException e) {
      throw new UncheckedIOException("Example size miscomputed", e); // a bug here, not bad input
    }
    return out;
  }

  /** The serialized SequenceExample. */
  public byte[] finishSequenceExample() {
    convertFloats();
    int context = contextSize();
    int lists = featureListsSize();
    byte[] out = new byte[lenFieldSize(context) + lenFieldSize(lists)];
    CodedOutputStream o = CodedOutputStream.newInstance(out);
    try {
      o.writeTag(SequenceExample.CONTEXT_FIELD_NUMBER, LEN);
      o.writeUInt32NoTag(context);
      writeContext(o);
      o.writeTag(SequenceExample.FEATURE_LISTS_FIELD_NUMBER, LEN);
      o.writeUInt32NoTag(lists);
      for (int l = 0; l < nLists; l++) {
        int body = featureListSize(listStart[l], listEnd[l]);
        o.writeTag(FeatureLists.FEATURE_LIST_FIELD_NUMBER, LEN);
        o.writeUInt32NoTag(entrySize(listKey[l], body));
        writeKey(o, listKey[l]);
        o.writeTag(MAP_VALUE, LEN);
        o.writeUInt32NoTag(body);
        for (int f = listStart[l]; f < listEnd[l]; f++) {
          o.writeTag(FeatureList.FEATURE_FIELD_NUMBER, LEN);
          o.writeUInt32NoTag(size[f]);
          writeFeature(o, f);
        }
      }
      o.checkNoSpaceLeft();
    } catch (IOException e) {
      throw new UncheckedIOException("SequenceExample size miscomputed", e);
    }
    return out;
  }

  private void convertFloats() {
    if (4 * nFloats > floatBytes.length) {
      floatBytes = new byte[Math.max(4 * nFloats, 2 * floatBytes.length)];
    }
    ByteViews.putFloats(floats, 0, nFloats, floatBytes, 0);
  }

  // --- sizes (and size[f] of every Feature, used again when writing) ---

  private static int lenFieldSize(int body) {
    return 1 + CodedOutputStream.computeUInt32SizeNoTag(body) + body;
  }

  private static int entrySize(byte[] k, int valueBody) {
    return lenFieldSize(k.length) + lenFieldSize(valueBody);
  }

  private int contextSize() {
    int s = 0;
    for (int f = 0; f < nFeatures; f++) {
      if (inContext[f]) {
        s += lenFieldSize(entrySize(key[f], featureSize(f)));
      }
    }
    return s;
  }

  private int featureListSize(int from, int to) {
    int s = 0;
    for (int f = from; f < to; f++) {
      s += lenFieldSize(featureSize(f));
    }
    return s;
  }

  private int featureListsSize() {
    int s = 0;
    for (int l = 0; l < nLists; l++) {
      s += lenFieldSize(entrySize(listKey[l], featureListSize(listStart[l], listEnd[l])));
    }
    return s;
  }

  /** The Feature message's size: its one list field (none for a Feature without kind). */
  private int featureSize(int f) {
    int s = kind[f] < 0 ? 0 : lenFieldSize(listSize(f));
    size[f] = s;
    return s;
  }

  /** The {Float,Int64,Bytes}List message's size. */
  private int listSize(int f) {
    int from = valuesStart[f];
    int to = valuesEnd[f];
    if (kind[f] == FeatureKind.BYTES.ordinal()) {
      int s = 0;
      for (int i = from; i < to; i++) {
        s += lenFieldSize(bytesEnd[i] - (i == 0 ? 0 : bytesEnd[i - 1]));
      }
      return s;
    }
    int packed = packedSize(f, from, to);
    return packed == 0 ? 0 : lenFieldSize(packed); // an empty packed list is omitted
  }

  private int packedSize(int f, int from, int to) {
    if (kind[f] == FeatureKind.FLOAT.ordinal()) {
      return 4 * (to - from);
    }
    int s = 0;
    for (int i = from; i < to; i++) {
      s += CodedOutputStream.computeInt64SizeNoTag(longs[i]);
    }
    return s;
  }

  // --- writing (sizes computed first) ---

  private void writeContext(CodedOutputStream o) throws IOException {
    for (int f = 0; f < nFeatures; f++) {
      if (!inContext[f]) {
        continue;
      }
      o.writeTag(Features.FEATURE_FIELD_NUMBER, LEN);
      o.writeUInt32NoTag(entrySize(key[f], size[f]));
      writeKey(o, key[f]);
      o.writeTag(MAP_VALUE, LEN);
      o.writeUInt32NoTag(size[f]);
      writeFeature(o, f);
    }
  }

  private static void writeKey(CodedOutputStream o, byte[] k) throws IOException {
    o.writeTag(MAP_KEY, LEN);
    o.writeUInt32NoTag(k.length);
    o.writeRawBytes(k);
  }

  private void writeFeature(CodedOutputStream o, int f) throws IOException {
    if (kind[f] < 0) {
      return;
    }
    FeatureKind k = FeatureKind.values()[kind[f]];
    int from = valuesStart[f];
    int to = valuesEnd[f];
    o.writeTag(k.fieldNumber(), LEN); // Feature.{BYTES,FLOAT,INT64}_LIST_FIELD_NUMBER
    o.writeUInt32NoTag(listSize(f));
    if (k == FeatureKind.BYTES) {
      for (int i = from; i < to; i++) {
        int start = i == 0 ? 0 : bytesEnd[i - 1];
        o.writeTag(FloatList.VALUE_FIELD_NUMBER, LEN);
        o.writeUInt32NoTag(bytesEnd[i] - start);
        o.writeRawBytes(bytes, start, bytesEnd[i] - start);
      }
      return;
    }
    int packed = packedSize(f, from, to);
    if (packed == 0) {
      return;
    }
    o.writeTag(FloatList.VALUE_FIELD_NUMBER, LEN);
    o.writeUInt32NoTag(packed);
    if (k == FeatureKind.FLOAT) {
      o.writeRawBytes(floatBytes, 4 * from, 4 * (to - from));
    } else {
      for (int i = from; i < to; i++) {
        o.writeInt64NoTag(longs[i]);
      }
    }
  }
}
