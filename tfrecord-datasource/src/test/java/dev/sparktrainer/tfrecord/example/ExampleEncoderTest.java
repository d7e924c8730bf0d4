package dev.sparktrainer.tfrecord.example;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import dev.sparktrainer.tfrecord.proto.BytesList;
import dev.sparktrainer.tfrecord.proto.Example;
import dev.sparktrainer.tfrecord.proto.FeatureList;
import dev.sparktrainer.tfrecord.proto.FeatureLists;
import dev.sparktrainer.tfrecord.proto.Features;
import dev.sparktrainer.tfrecord.proto.FloatList;
import dev.sparktrainer.tfrecord.proto.Int64List;
import dev.sparktrainer.tfrecord.proto.SequenceExample;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The streaming encoder writes exactly the bytes of the protoc-generated classes' {@code
 * toByteArray()} for the same message: random Examples and SequenceExamples (every kind, empty
 * lists, features without kind, large and negative int64s, context features between feature lists).
 */
class ExampleEncoderTest {
  private static final FeatureKind[] KINDS = {
    FeatureKind.BYTES, FeatureKind.FLOAT, FeatureKind.INT64, null
  };

  @Test
  void examplesAreTheGeneratedClassesBytes() {
    Random r = new Random(42);
    ExampleEncoder enc = new ExampleEncoder();
    for (int n = 0; n < 2000; n++) {
      enc.reset();
      Features.Builder features = Features.newBuilder();
      int count = r.nextInt(6);
      for (int i = 0; i < count; i++) {
        String name = "f" + i + (r.nextBoolean() ? "é" : "");
        features.putFeature(name, randomFeature(r, enc, name, true));
      }
      byte[] expected = Example.newBuilder().setFeatures(features).build().toByteArray();
      assertThat(enc.finishExample()).as("example %d", n).isEqualTo(expected);
    }
  }

  @Test
  void sequenceExamplesAreTheGeneratedClassesBytes() {
    Random r = new Random(7);
    ExampleEncoder enc = new ExampleEncoder();
    for (int n = 0; n < 2000; n++) {
      enc.reset();
      Features.Builder context = Features.newBuilder();
      FeatureLists.Builder lists = FeatureLists.newBuilder();
      int count = r.nextInt(6);
      for (int i = 0; i < count; i++) {
        String name = "c" + i;
        if (r.nextBoolean()) {
          context.putFeature(name, randomFeature(r, enc, name, true));
        } else {
          enc.beginFeatureList(name);
          FeatureList.Builder list = FeatureList.newBuilder();
          int steps = r.nextInt(4);
          for (int s = 0; s < steps; s++) {
            list.addFeature(randomFeature(r, enc, null, false));
          }
          enc.endFeatureList();
          lists.putFeatureList(name, list.build());
        }
      }
      byte[] expected =
          SequenceExample.newBuilder()
              .setContext(context)
              .setFeatureLists(lists)
              .build()
              .toByteArray();
      assertThat(enc.finishSequenceExample()).as("sequence example %d", n).isEqualTo(expected);
    }
  }

  /**
   * Adds a random feature to {@code enc} (a context feature, or one step of the open list) and
   * returns it.
   */
  private static dev.sparktrainer.tfrecord.proto.Feature randomFeature(
      Random r, ExampleEncoder enc, String name, boolean context) {
    FeatureKind kind = KINDS[r.nextInt(KINDS.length)];
    if (context) {
      enc.beginFeature(name, kind);
    } else {
      enc.beginListFeature(kind);
    }
    dev.sparktrainer.tfrecord.proto.Feature.Builder f =
        dev.sparktrainer.tfrecord.proto.Feature.newBuilder();
    int n = r.nextInt(4) == 0 ? 0 : r.nextInt(300);
    if (kind == FeatureKind.FLOAT) {
      FloatList.Builder l = FloatList.newBuilder();
      float[] v = new float[n];
      for (int i = 0; i < n; i++) {
        v[i] = r.nextInt(10) == 0 ? Float.NaN : (float) r.nextGaussian();
        l.addValue(v[i]);
      }
      if (r.nextBoolean()) {
        enc.addFloats(v, 0, n);
      } else {
        for (float x : v) {
          enc.addFloat(x);
        }
      }
      f.setFloatList(l);
    } else if (kind == FeatureKind.INT64) {
      Int64List.Builder l = Int64List.newBuilder();
      for (int i = 0; i < n; i++) {
        long x = r.nextInt(3) == 0 ? r.nextLong() : r.nextInt(200) - 100;
        l.addValue(x);
        enc.addInt64(x);
      }
      f.setInt64List(l);
    } else if (kind == FeatureKind.BYTES) {
      BytesList.Builder l = BytesList.newBuilder();
      for (int i = 0; i < n % 20; i++) {
        byte[] b = new byte[r.nextInt(r.nextInt(10) == 0 ? 300 : 12)];
        r.nextBytes(b);
        l.addValue(ByteString.copyFrom(b));
        enc.addBytes(b);
      }
      f.setBytesList(l);
    }
    if (context) {
      enc.endFeature();
    } else {
      enc.endListFeature();
    }
    return f.build();
  }
}
