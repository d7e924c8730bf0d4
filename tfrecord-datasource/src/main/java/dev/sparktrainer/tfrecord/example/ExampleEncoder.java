package dev.sparktrainer.tfrecord.example;

import java.nio.charset.StandardCharsets;

/**
 * Writes {@code tf.train.Example} and {@code tf.train.SequenceExample} records, with the encodings
 * TensorFlow itself emits (packed float and int64 lists). Reused across records: {@link #reset()},
 * add features, then {@link #finishExample()} or {@link #finishSequenceExample()}.
 *
 * <pre>{@code
 * enc.reset();
 * enc.beginFeature(nameUtf8, FeatureKind.FLOAT); enc.addFloat(1f); enc.endFeature();
 * byte[] record = enc.finishExample();
 * }</pre>
 */
public final class ExampleEncoder {
  private final ProtoWriter context = new ProtoWriter(1 << 12); // Features body (map entries)
  private final ProtoWriter lists = new ProtoWriter(1 << 10); // FeatureLists body
  private final ProtoWriter list = new ProtoWriter(1 << 10); // current FeatureList body
  private final ProtoWriter values = new ProtoWriter(1 << 12); // current feature's list body
  private final ProtoWriter out = new ProtoWriter(1 << 12);
  private FeatureKind kind;
  private byte[] key;
  private byte[] listKey;

  public void reset() {
    context.reset();
    lists.reset();
    list.reset();
    values.reset();
    kind = null;
    key = null;
    listKey = null;
  }

  /** Starts a feature of the Example (or of the SequenceExample context). */
  public void beginFeature(byte[] nameUtf8, FeatureKind kind) {
    this.key = nameUtf8;
    this.kind = kind;
    values.reset();
  }

  public void beginFeature(String name, FeatureKind kind) {
    beginFeature(name.getBytes(StandardCharsets.UTF_8), kind);
  }

  public void addInt64(long v) {
    values.varint(v);
  }

  public void addFloat(float v) {
    values.fixed32(Float.floatToRawIntBits(v));
  }

  public void addFloats(float[] v, int off, int n) {
    values.ensure(n * 4);
    ByteViews.putFloats(v, off, n, values.buf, values.size);
    values.size += n * 4;
  }

  public void addBytes(byte[] b, int off, int len) {
    values.tag(1, ProtoReader.LEN);
    values.varint(len);
    values.bytes(b, off, len);
  }

  public void addBytes(byte[] b) {
    addBytes(b, 0, b.length);
  }

  /** Ends the current feature of the Example / context. */
  public void endFeature() {
    writeEntry(context, key, writeFeatureInto(out));
  }

  /** Starts a feature list (SequenceExample only). */
  public void beginFeatureList(byte[] nameUtf8) {
    listKey = nameUtf8;
    list.reset();
  }

  public void beginFeatureList(String name) {
    beginFeatureList(name.getBytes(StandardCharsets.UTF_8));
  }

  /** Starts one Feature inside the current feature list. */
  public void beginListFeature(FeatureKind kind) {
    this.kind = kind;
    values.reset();
  }

  /** Ends one Feature inside the current feature list. */
  public void endListFeature() {
    ProtoWriter f = writeFeatureInto(out);
    list.tag(1, ProtoReader.LEN);
    list.varint(f.size);
    list.append(f);
  }

  public void endFeatureList() {
    writeEntry(lists, listKey, list);
  }

  /** The serialized Example. */
  public byte[] finishExample() {
    out.reset();
    out.tag(1, ProtoReader.LEN);
    out.varint(context.size);
    out.append(context);
    return java.util.Arrays.copyOf(out.buf, out.size);
  }

  /** The serialized SequenceExample. */
  public byte[] finishSequenceExample() {
    out.reset();
    out.tag(1, ProtoReader.LEN);
    out.varint(context.size);
    out.append(context);
    out.tag(2, ProtoReader.LEN);
    out.varint(lists.size);
    out.append(lists);
    return java.util.Arrays.copyOf(out.buf, out.size);
  }

  /** Writes the Feature message for {@link #kind} and {@link #values} into {@code w}. */
  private ProtoWriter writeFeatureInto(ProtoWriter w) {
    w.reset();
    if (kind == null) {
      return w; // present but empty Feature
    }
    int listSize;
    if (kind == FeatureKind.BYTES) {
      listSize = values.size;
    } else {
      // packed field 1; omitted when empty, as protobuf does
      listSize = values.size == 0 ? 0 : 1 + ProtoWriter.varintSize(values.size) + values.size;
    }
    w.tag(kind.fieldNumber(), ProtoReader.LEN);
    w.varint(listSize);
    if (kind != FeatureKind.BYTES && values.size > 0) {
      w.tag(1, ProtoReader.LEN);
      w.varint(values.size);
    }
    w.append(values);
    return w;
  }

  private static void writeEntry(ProtoWriter body, byte[] key, ProtoWriter value) {
    int entrySize =
        1 + ProtoWriter.varintSize(key.length) + key.length
            + 1 + ProtoWriter.varintSize(value.size) + value.size;
    body.tag(1, ProtoReader.LEN);
    body.varint(entrySize);
    body.tag(1, ProtoReader.LEN);
    body.varint(key.length);
    body.bytes(key, 0, key.length);
    body.tag(2, ProtoReader.LEN);
    body.varint(value.size);
    body.append(value);
  }
}
