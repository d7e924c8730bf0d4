package dev.sparktrainer.tfrecord.example;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import dev.sparktrainer.tfrecord.proto.BytesList;
import dev.sparktrainer.tfrecord.proto.Example;
import dev.sparktrainer.tfrecord.proto.Features;
import dev.sparktrainer.tfrecord.proto.FloatList;
import dev.sparktrainer.tfrecord.proto.Int64List;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Differential fuzzing of the hand-written read path against protobuf-java's generated parser: on
 * 120,000 inputs — random Examples, the same with 1 to 4 random mutations (flipped, replaced,
 * inserted, deleted and duplicated bytes, truncation, spliced records) — the scanner ({@link
 * Examples#parseExample}, which is {@link ExampleScanner}'s entry walk plus {@link FeatureValues})
 * and {@code Example.parseFrom} both reject the input, or both accept it with the same features and
 * values; and when they accept it, the Spark reader's path (scanner lookup of the names, then
 * {@link FeatureValues#decode}) finds the same values. Fixed seed: a failure names the input, in
 * hex.
 */
class ScannerDifferentialTest {
  private static final int INPUTS = 120_000;

  @Test
  void scannerAndProtobufAgreeOnRandomAndMutatedExamples() {
    Random r = new Random(20261124L);
    List<byte[]> corpus = new ArrayList<>();
    int accepted = 0;
    int rejected = 0;
    for (int n = 0; n < INPUTS; n++) {
      byte[] input;
      if (n % 4 == 0 || corpus.size() < 16) {
        input = randomExample(r).toByteArray();
        corpus.add(input);
        if (corpus.size() > 256) {
          corpus.remove(r.nextInt(corpus.size()));
        }
      } else {
        input = corpus.get(r.nextInt(corpus.size()));
        int mutations = 1 + r.nextInt(4);
        for (int m = 0; m < mutations; m++) {
          input = mutate(r, input, corpus);
        }
      }
      if (check(n, input)) {
        accepted++;
      } else {
        rejected++;
      }
    }
    // both outcomes well exercised: a generator that only made garbage (or never did) would prove
    // little
    assertThat(accepted).as("inputs both accepted").isGreaterThan(INPUTS / 4);
    assertThat(rejected).as("inputs both rejected").isGreaterThan(INPUTS / 10);
  }

  /** Checks one input; returns whether it was accepted. */
  private static boolean check(int n, byte[] input) {
    Map<String, Feature> expected = null;
    String protobufError = null;
    try {
      expected = plain(Example.parseFrom(input));
    } catch (InvalidProtocolBufferException e) {
      protobufError = e.getMessage();
    }
    Map<String, Feature> actual = null;
    String scannerError = null;
    try {
      actual = Examples.parseExample(input);
    } catch (MalformedRecordException e) {
      scannerError = e.getMessage();
    }
    String hex = HexFormat.of().formatHex(input);
    if (expected == null || actual == null) {
      if (expected != null || actual != null) {
        fail(
            "input %d (%s): protobuf %s, scanner %s",
            n,
            hex,
            expected == null ? "rejects it (" + protobufError + ")" : "accepts it: " + expected,
            actual == null ? "rejects it (" + scannerError + ")" : "accepts it: " + actual);
      }
      return false;
    }
    assertThat(actual).as("input %d (%s)", n, hex).isEqualTo(expected);
    // the reader's path: look the names up, decode only those
    List<String> names = new ArrayList<>(expected.keySet());
    ExampleScanner scanner = new ExampleScanner(new FeatureLookup(names), null);
    scanner.scanExample(input, 0, input.length);
    FeatureValues values = new FeatureValues();
    for (int i = 0; i < names.size(); i++) {
      int off = scanner.featureOffset[i];
      Feature found =
          off < 0
              ? null
              : values.decode(scanner.buffer(), off, scanner.featureLength[i]).toFeature();
      assertThat(found)
          .as("input %d (%s), feature '%s' on the reader's path", n, hex, names.get(i))
          .isEqualTo(expected.get(names.get(i)));
    }
    return true;
  }

  /** protobuf-java's parse as the project's plain values. */
  private static Map<String, Feature> plain(Example e) {
    Map<String, Feature> out = new LinkedHashMap<>();
    for (Map.Entry<String, dev.sparktrainer.tfrecord.proto.Feature> f :
        e.getFeatures().getFeatureMap().entrySet()) {
      dev.sparktrainer.tfrecord.proto.Feature v = f.getValue();
      out.put(
          f.getKey(),
          switch (v.getKindCase()) {
            case BYTES_LIST ->
                Feature.ofBytes(
                    v.getBytesList().getValueList().stream()
                        .map(ByteString::toByteArray)
                        .toArray(byte[][]::new));
            case FLOAT_LIST -> {
              float[] a = new float[v.getFloatList().getValueCount()];
              for (int i = 0; i < a.length; i++) {
                a[i] = v.getFloatList().getValue(i);
              }
              yield Feature.ofFloats(a);
            }
            case INT64_LIST ->
                Feature.ofInt64(
                    v.getInt64List().getValueList().stream().mapToLong(Long::longValue).toArray());
            case KIND_NOT_SET -> Feature.empty();
          });
    }
    return out;
  }

  private static Example randomExample(Random r) {
    Features.Builder features = Features.newBuilder();
    int count = r.nextInt(5);
    for (int i = 0; i < count; i++) {
      dev.sparktrainer.tfrecord.proto.Feature.Builder f =
          dev.sparktrainer.tfrecord.proto.Feature.newBuilder();
      int n = r.nextInt(6);
      switch (r.nextInt(4)) {
        case 0 -> {
          FloatList.Builder l = f.getFloatListBuilder();
          for (int j = 0; j < n; j++) {
            l.addValue((float) r.nextGaussian());
          }
        }
        case 1 -> {
          Int64List.Builder l = f.getInt64ListBuilder();
          for (int j = 0; j < n; j++) {
            l.addValue(r.nextBoolean() ? r.nextLong() : r.nextInt(300));
          }
        }
        case 2 -> {
          BytesList.Builder l = f.getBytesListBuilder();
          for (int j = 0; j < n; j++) {
            byte[] b = new byte[r.nextInt(6)];
            r.nextBytes(b);
            l.addValue(ByteString.copyFrom(b));
          }
        }
        default -> {} // a Feature without kind
      }
      features.putFeature(NAMES[r.nextInt(NAMES.length)], f.build());
    }
    return Example.newBuilder().setFeatures(features).build();
  }

  private static final String[] NAMES = {"a", "b", "label", "image/encoded", "é", ""};

  private static byte[] mutate(Random r, byte[] in, List<byte[]> corpus) {
    if (in.length == 0) {
      return new byte[] {(byte) r.nextInt(256)};
    }
    int at = r.nextInt(in.length);
    switch (r.nextInt(8)) {
      case 0:
        { // flip one bit
          byte[] out = in.clone();
          out[at] ^= (byte) (1 << r.nextInt(8));
          return out;
        }
      case 1:
        { // replace a byte with an interesting value
          byte[] out = in.clone();
          byte[] interesting = {
            0, 1, 0x7f, (byte) 0x80, (byte) 0xff, 0x08, 0x0a, 0x12, 0x1a, 0x0d, 0x0b, 0x0c, 0x0f
          };
          out[at] =
              r.nextBoolean() ? interesting[r.nextInt(interesting.length)] : (byte) r.nextInt(256);
          return out;
        }
      case 2:
        { // insert random bytes
          byte[] ins = new byte[1 + r.nextInt(3)];
          r.nextBytes(ins);
          return splice(in, at, 0, ins);
        }
      case 3: // delete bytes
        return splice(in, at, Math.min(in.length - at, 1 + r.nextInt(3)), new byte[0]);
      case 4: // truncate
        return Arrays.copyOf(in, at);
      case 5:
        { // duplicate a slice in place
          int len = Math.min(in.length - at, 1 + r.nextInt(16));
          return splice(in, at, 0, Arrays.copyOfRange(in, at, at + len));
        }
      case 6:
        { // splice in part of another record
          byte[] other = corpus.get(r.nextInt(corpus.size()));
          if (other.length == 0) {
            return in;
          }
          int from = r.nextInt(other.length);
          return splice(
              in,
              at,
              r.nextInt(Math.min(8, in.length - at) + 1),
              Arrays.copyOfRange(other, from, Math.min(other.length, from + 1 + r.nextInt(24))));
        }
      default:
        { // append another whole record: protobuf merges concatenated messages
          byte[] other = corpus.get(r.nextInt(corpus.size()));
          return splice(in, in.length, 0, other);
        }
    }
  }

  private static byte[] splice(byte[] in, int at, int remove, byte[] insert) {
    byte[] out = new byte[in.length - remove + insert.length];
    System.arraycopy(in, 0, out, 0, at);
    System.arraycopy(insert, 0, out, at, insert.length);
    System.arraycopy(in, at + remove, out, at + insert.length, in.length - at - remove);
    return out;
  }
}
