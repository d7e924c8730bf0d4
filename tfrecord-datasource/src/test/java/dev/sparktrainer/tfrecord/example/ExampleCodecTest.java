package dev.sparktrainer.tfrecord.example;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.LittleEndian;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ExampleCodecTest {

  // --- hand-made wire encodings, as other protobuf writers may emit them ---

  private static byte[] bytesOf(ProtoWriter w) {
    return Arrays.copyOf(w.buf, w.size);
  }

  private static void lenField(ProtoWriter w, int field, byte[] payload) {
    w.tag(field, ProtoReader.LEN);
    w.varint(payload.length);
    w.bytes(payload, 0, payload.length);
  }

  /**
   * An Example with one map entry per (key, featureBytes) pair, entry fields in the given order.
   */
  private static byte[] example(boolean valueFirst, Object... keyAndFeature) {
    ProtoWriter features = new ProtoWriter(64);
    for (int i = 0; i < keyAndFeature.length; i += 2) {
      ProtoWriter entry = new ProtoWriter(64);
      byte[] key = ((String) keyAndFeature[i]).getBytes(StandardCharsets.UTF_8);
      byte[] feature = (byte[]) keyAndFeature[i + 1];
      if (valueFirst) {
        lenField(entry, 2, feature);
        lenField(entry, 1, key);
      } else {
        lenField(entry, 1, key);
        lenField(entry, 2, feature);
      }
      lenField(features, 1, bytesOf(entry));
    }
    ProtoWriter ex = new ProtoWriter(64);
    lenField(ex, 1, bytesOf(features));
    return bytesOf(ex);
  }

  private static byte[] unpackedInt64(long... v) {
    ProtoWriter list = new ProtoWriter(64);
    for (long x : v) {
      list.tag(1, ProtoReader.VARINT);
      list.varint(x);
    }
    ProtoWriter f = new ProtoWriter(64);
    lenField(f, 3, bytesOf(list));
    return bytesOf(f);
  }

  private static byte[] unpackedFloats(float... v) {
    ProtoWriter list = new ProtoWriter(64);
    for (float x : v) {
      list.tag(1, ProtoReader.FIXED32);
      list.fixed32(Float.floatToRawIntBits(x));
    }
    ProtoWriter f = new ProtoWriter(64);
    lenField(f, 2, bytesOf(list));
    return bytesOf(f);
  }

  private static byte[] packedFloats(float... v) {
    ProtoWriter list = new ProtoWriter(64);
    ProtoWriter packed = new ProtoWriter(64);
    for (float x : v) {
      packed.fixed32(Float.floatToRawIntBits(x));
    }
    lenField(list, 1, bytesOf(packed));
    ProtoWriter f = new ProtoWriter(64);
    lenField(f, 2, bytesOf(list));
    return bytesOf(f);
  }

  private static byte[] concat(byte[]... parts) {
    ProtoWriter w = new ProtoWriter(64);
    for (byte[] p : parts) {
      w.bytes(p, 0, p.length);
    }
    return bytesOf(w);
  }

  @Test
  void roundTripsEveryKind() {
    Map<String, Feature> in = new LinkedHashMap<>();
    in.put("label", Feature.ofInt64(7));
    in.put("ids", Feature.ofInt64(-1, 0, Long.MAX_VALUE, Long.MIN_VALUE, 300));
    in.put("pixels", Feature.ofFloats(0.5f, -0.0f, Float.NaN, Float.POSITIVE_INFINITY));
    in.put("text", Feature.ofStrings("héllo", ""));
    in.put("raw", Feature.ofBytes(new byte[] {0, (byte) 0xFF}));
    in.put("emptyList", Feature.ofFloats());
    in.put("noKind", Feature.empty());
    Map<String, Feature> back = Examples.parseExample(Examples.encodeExample(in));
    assertThat(back).isEqualTo(in);
  }

  @Test
  void readsUnpackedAndMixedEncodings() {
    byte[] rec =
        example(
            false,
            "a",
            unpackedInt64(1, -2, 3),
            "b",
            unpackedFloats(1.5f, 2.5f),
            // a packed run followed by an unpacked value in the same list
            "c",
            concat(packedFloats(1f, 2f), unpackedFloats(3f)));
    Map<String, Feature> m = Examples.parseExample(rec);
    assertThat(m.get("a")).isEqualTo(Feature.ofInt64(1, -2, 3));
    assertThat(m.get("b")).isEqualTo(Feature.ofFloats(1.5f, 2.5f));
    assertThat(m.get("c")).isEqualTo(Feature.ofFloats(1f, 2f, 3f));
  }

  @Test
  void followsProtobufMergeRules() {
    byte[] rec =
        example(
            true, // value before key inside the map entry
            "dup",
            unpackedInt64(1),
            "x",
            concat(unpackedFloats(9f), unpackedInt64(4)), // oneof: the last kind wins
            "dup",
            unpackedInt64(2)); // map: the last entry wins
    Map<String, Feature> m = Examples.parseExample(rec);
    assertThat(m.get("dup")).isEqualTo(Feature.ofInt64(2));
    assertThat(m.get("x")).isEqualTo(Feature.ofInt64(4));
  }

  @Test
  void mergesAMapEntryValueGivenTwiceAsProtobufDoes() {
    ProtoWriter entry = new ProtoWriter(64);
    lenField(entry, 1, "m".getBytes(StandardCharsets.UTF_8));
    lenField(entry, 2, unpackedInt64(1, 2));
    lenField(entry, 2, unpackedInt64(3)); // the same field again: merged, lists appended
    ProtoWriter features = new ProtoWriter(64);
    lenField(features, 1, bytesOf(entry));
    ProtoWriter ex = new ProtoWriter(64);
    lenField(ex, 1, bytesOf(features));
    byte[] rec = bytesOf(ex);
    assertThat(Examples.parseExample(rec).get("m")).isEqualTo(Feature.ofInt64(1, 2, 3));
    // the reader's path: the scanner's copy holds the merged value
    ExampleScanner scanner = new ExampleScanner(new FeatureLookup(List.of("m")), null);
    scanner.scanExample(rec, 0, rec.length);
    assertThat(scanner.buffer()).isNotSameAs(rec);
    assertThat(
            new FeatureValues()
                .decode(scanner.buffer(), scanner.featureOffset[0], scanner.featureLength[0])
                .toFeature())
        .isEqualTo(Feature.ofInt64(1, 2, 3));
  }

  @Test
  void skipsUnknownFields() {
    ProtoWriter extra = new ProtoWriter(16);
    extra.tag(15, ProtoReader.VARINT);
    extra.varint(123);
    extra.tag(16, ProtoReader.FIXED32);
    extra.fixed32(5);
    extra.tag(17, ProtoReader.FIXED64);
    extra.fixed32(1);
    extra.fixed32(2);
    byte[] rec = concat(bytesOf(extra), example(false, "a", unpackedInt64(5)), bytesOf(extra));
    assertThat(Examples.parseExample(rec).get("a")).isEqualTo(Feature.ofInt64(5));
  }

  @Test
  void scannerFindsOnlyWantedFeaturesAndDecoderReusesArrays() {
    byte[] rec =
        Examples.encodeExample(
            new LinkedHashMap<>(
                Map.of(
                    "a", Feature.ofFloats(1f, 2f),
                    "b", Feature.ofInt64(3),
                    "c", Feature.ofStrings("z"))));
    ExampleScanner s = new ExampleScanner(new FeatureLookup(List.of("c", "a", "missing")), null);
    s.scanExample(rec, 0, rec.length);
    assertThat(s.featureOffset[2]).isEqualTo(-1);
    FeatureValues v = new FeatureValues();
    v.decode(rec, s.featureOffset[1], s.featureLength[1]);
    assertThat(v.kind()).isEqualTo(FeatureKind.FLOAT);
    assertThat(v.count()).isEqualTo(2);
    assertThat(v.floatAt(1)).isEqualTo(2f);
    v.decode(rec, s.featureOffset[0], s.featureLength[0]);
    assertThat(v.stringAt(0)).isEqualTo("z");
  }

  @Test
  void sequenceExampleRoundTrips() {
    Map<String, Feature> ctx = new LinkedHashMap<>();
    ctx.put("length", Feature.ofInt64(3));
    Map<String, List<Feature>> lists = new LinkedHashMap<>();
    lists.put(
        "tokens",
        List.of(Feature.ofStrings("a"), Feature.ofStrings("b", "c"), Feature.ofStrings()));
    lists.put("frames", List.of(Feature.ofFloats(1f, 2f), Feature.ofFloats(3f)));
    lists.put("none", List.of());
    Examples.Sequence s = Examples.parseSequenceExample(Examples.encodeSequenceExample(ctx, lists));
    assertThat(s.context).isEqualTo(ctx);
    assertThat(s.featureLists).isEqualTo(lists);
  }

  @Test
  void malformedBytesThrowTheDocumentedException() {
    byte[] good = Examples.encodeExample(Map.of("a", Feature.ofFloats(1f, 2f, 3f)));
    for (int cut = 1; cut < good.length; cut++) {
      byte[] truncated = Arrays.copyOf(good, cut);
      assertThatThrownBy(() -> Examples.parseExample(truncated))
          .as("cut at " + cut)
          .isInstanceOf(MalformedRecordException.class);
    }
    byte[] badVarint = new byte[12];
    Arrays.fill(badVarint, (byte) 0x80);
    assertThatThrownBy(() -> Examples.parseExample(badVarint))
        .isInstanceOf(MalformedRecordException.class);
    byte[] badWire = {(byte) ((1 << 3) | 7)};
    assertThatThrownBy(() -> Examples.parseExample(badWire))
        .hasMessageContaining("invalid wire type 7");
    byte[] oddPacked =
        example(false, "f", concat(new byte[] {(2 << 3) | 2, 3, (1 << 3) | 2, 1, 0}));
    assertThatThrownBy(() -> Examples.parseExample(oddPacked))
        .hasMessageContaining("packed float list of 1 bytes");
  }

  @Test
  void packedFloatFastPathOnlyMatchesTensorFlowsOwnLayout() {
    byte[] packed = packedFloats(1f, 2f, 3f);
    int at = FeatureValues.packedFloatsAt(packed, 0, packed.length, 3);
    assertThat(at).isPositive();
    assertThat(LittleEndian.getFloat(packed, at + 8)).isEqualTo(3f);
    assertThat(FeatureValues.packedFloatsAt(packed, 0, packed.length, 2)).isEqualTo(-1);
    byte[] unpacked = unpackedFloats(1f, 2f, 3f);
    assertThat(FeatureValues.packedFloatsAt(unpacked, 0, unpacked.length, 3)).isEqualTo(-1);
    byte[] twoRuns = concat(packedFloats(1f), packedFloats(2f, 3f));
    assertThat(FeatureValues.packedFloatsAt(twoRuns, 0, twoRuns.length, 3)).isEqualTo(-1);
    byte[] ints = unpackedInt64(1, 2, 3);
    assertThat(FeatureValues.packedFloatsAt(ints, 0, ints.length, 3)).isEqualTo(-1);
    assertThat(FeatureValues.packedFloatsAt(new byte[0], 0, 0, 0)).isEqualTo(-1);
  }
}
