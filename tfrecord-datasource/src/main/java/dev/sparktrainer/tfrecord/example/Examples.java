package dev.sparktrainer.tfrecord.example;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Whole-record conversions between serialized records and plain values ({@link Feature} maps), for
 * schema inference, tools and tests. The Spark reader uses the allocation-free scanner instead.
 */
public final class Examples {
  private Examples() {}

  /** Parses a {@code tf.train.Example} into feature name to value, in first-seen order. */
  public static Map<String, Feature> parseExample(byte[] buf, int off, int len) {
    Map<String, Feature> out = new LinkedHashMap<>();
    ProtoReader r = new ProtoReader().reset(buf, off, len);
    ExampleScanner.Merges merges = new ExampleScanner.Merges();
    merges.reset(buf, off + len);
    FeatureValues fv = new FeatureValues();
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) {
        int n = r.readLength();
        parseFeatureMap(
            r,
            r.pos + n,
            merges,
            (k, o, l) -> out.put(k, fv.decode(merges.buffer(), o, l).toFeature()));
      } else {
        r.skip(tag);
      }
    }
    return out;
  }

  public static Map<String, Feature> parseExample(byte[] record) {
    return parseExample(record, 0, record.length);
  }

  /** A parsed SequenceExample: context features and feature lists. */
  public static final class Sequence {
    public final Map<String, Feature> context = new LinkedHashMap<>();
    public final Map<String, List<Feature>> featureLists = new LinkedHashMap<>();
  }

  public static Sequence parseSequenceExample(byte[] buf, int off, int len) {
    Sequence s = new Sequence();
    ProtoReader r = new ProtoReader().reset(buf, off, len);
    ExampleScanner.Merges merges = new ExampleScanner.Merges();
    merges.reset(buf, off + len);
    FeatureValues fv = new FeatureValues();
    while (r.hasMore()) {
      int tag = r.readTag();
      if (tag == ((1 << 3) | ProtoReader.LEN)) {
        int n = r.readLength();
        parseFeatureMap(
            r,
            r.pos + n,
            merges,
            (k, o, l) -> s.context.put(k, fv.decode(merges.buffer(), o, l).toFeature()));
      } else if (tag == ((2 << 3) | ProtoReader.LEN)) {
        int n = r.readLength();
        parseFeatureMap(
            r,
            r.pos + n,
            merges,
            (k, o, l) -> {
              List<Feature> features = new ArrayList<>();
              byte[] b = merges.buffer();
              ProtoReader lr = new ProtoReader().reset(b, o, l);
              lr.messageDepth = 3; // SequenceExample > FeatureLists > entry > FeatureList
              while (lr.hasMore()) {
                int t = lr.readTag();
                if (t == ((1 << 3) | ProtoReader.LEN)) {
                  int fl = lr.readLength();
                  features.add(new FeatureValues().decode(b, lr.pos, fl).toFeature());
                  lr.pos += fl;
                } else {
                  lr.skip(t);
                }
              }
              s.featureLists.put(k, features);
            });
      } else {
        r.skip(tag);
      }
    }
    return s;
  }

  public static Sequence parseSequenceExample(byte[] record) {
    return parseSequenceExample(record, 0, record.length);
  }

  /** Serializes features as a {@code tf.train.Example}. */
  public static byte[] encodeExample(Map<String, Feature> features) {
    ExampleEncoder enc = new ExampleEncoder();
    enc.reset();
    for (Map.Entry<String, Feature> e : features.entrySet()) {
      enc.beginFeature(e.getKey(), e.getValue().kind());
      addValues(enc, e.getValue());
      enc.endFeature();
    }
    return enc.finishExample();
  }

  /** Serializes a {@code tf.train.SequenceExample}. */
  public static byte[] encodeSequenceExample(
      Map<String, Feature> context, Map<String, List<Feature>> featureLists) {
    ExampleEncoder enc = new ExampleEncoder();
    enc.reset();
    for (Map.Entry<String, Feature> e : context.entrySet()) {
      enc.beginFeature(e.getKey(), e.getValue().kind());
      addValues(enc, e.getValue());
      enc.endFeature();
    }
    for (Map.Entry<String, List<Feature>> e : featureLists.entrySet()) {
      enc.beginFeatureList(e.getKey());
      for (Feature f : e.getValue()) {
        enc.beginListFeature(f.kind());
        addValues(enc, f);
        enc.endListFeature();
      }
      enc.endFeatureList();
    }
    return enc.finishSequenceExample();
  }

  private static void addValues(ExampleEncoder enc, Feature f) {
    if (f.kind() == null) {
      return;
    }
    switch (f.kind()) {
      case INT64:
        for (long v : f.int64s()) {
          enc.addInt64(v);
        }
        break;
      case FLOAT:
        float[] fl = f.floats();
        enc.addFloats(fl, 0, fl.length);
        break;
      default:
        for (byte[] b : f.bytes()) {
          enc.addBytes(b);
        }
    }
  }

  @FunctionalInterface
  private interface EntryVisitor {
    void visit(String key, int valueOffset, int valueLength);
  }

  private static void parseFeatureMap(
      ProtoReader r, int end, ExampleScanner.Merges merges, EntryVisitor visitor) {
    // keys checked: a proto3 string, which protobuf rejects when it is not valid UTF-8
    ExampleScanner.forEachEntry(
        r,
        end,
        (keyOff, keyLen, valOff, valLen) ->
            visitor.visit(
                new String(r.buf, keyOff, keyLen, StandardCharsets.UTF_8), valOff, valLen),
        merges,
        true);
  }
}
