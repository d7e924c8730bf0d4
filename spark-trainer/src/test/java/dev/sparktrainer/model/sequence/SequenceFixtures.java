package dev.sparktrainer.model.sequence;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.collective.CommOptions;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.StepOptions;
import dev.sparktrainer.train.step.TrainStep;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.Random;

/**
 * The sequence models' test fixtures (written by {@code
 * src/test/resources/sequence/make_fixtures.py} with PyTorch) and batches as the input pipeline
 * makes them: {@code ids [B, T]} int64, {@code mask [B, T]} float32, int64 labels, in direct
 * memory.
 */
final class SequenceFixtures {
  static final double TOLERANCE = 1e-5;

  private SequenceFixtures() {}

  static JsonNode reference(String model) {
    try {
      return new ObjectMapper()
          .readTree(new File("src/test/resources/sequence/" + model + ".json"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The spec a fixture was made for (its parameters' shapes tell the sizes). */
  static ModelSpec spec(String model, JsonNode ref) {
    SequenceInput in = new SequenceInput(ref.get("vocab").asLong(), ref.get("max_length").asInt());
    int classes = ref.get("classes").asInt();
    JsonNode ps = ref.get("parameters");
    int dim = ps.get(0).get("shape").get(1).asInt();
    switch (model) {
      case "embed":
        return EmbedSpec.of(in, dim, classes);
      case "transformer":
        return new TransformerSpec(
            in.vocabSize(), in.maxLength(), 2, dim, 4, 32, classes, Activation.RELU, 0f);
      case "transformer_gelu":
        return new TransformerSpec(
            in.vocabSize(), in.maxLength(), 1, dim, 2, 64, classes, Activation.GELU, 0f);
      default:
        throw new IllegalArgumentException(model);
    }
  }

  /** The fixture's initial parameter values, in the model's order. */
  static float[][] initialValues(JsonNode ref) {
    JsonNode ps = ref.get("parameters");
    float[][] out = new float[ps.size()][];
    for (int i = 0; i < out.length; i++) {
      out[i] = floats(ps.get(i).get("data"));
    }
    return out;
  }

  static float[] floats(JsonNode a) {
    float[] v = new float[a.size()];
    for (int i = 0; i < v.length; i++) {
      v[i] = (float) a.get(i).asDouble();
    }
    return v;
  }

  /** The fixture's parameter names, in order. */
  static List<String> names(JsonNode ref) {
    List<String> out = new java.util.ArrayList<>();
    ref.get("parameters").forEach(p -> out.add(p.get("name").asText()));
    return out;
  }

  /**
   * Rows {@code [from, to)} of step {@code s}'s batch, padded to {@code t} positions (0: to the
   * rows' own longest sequence, at least 1); padding ids are {@code padId}.
   */
  static Batch batch(NDManager m, JsonNode ref, int s, int from, int to, int t, long padId) {
    JsonNode step = ref.get("steps").get(s);
    int rows = to - from;
    int[] lengths = new int[rows];
    int longest = 1;
    for (int i = 0; i < rows; i++) {
      JsonNode mask = step.get("mask").get(from + i);
      for (int j = 0; j < mask.size(); j++) {
        lengths[i] += mask.get(j).asDouble() > 0 ? 1 : 0;
      }
      longest = Math.max(longest, lengths[i]);
    }
    int width = t == 0 ? longest : t;
    long[][] ids = new long[rows][width];
    float[][] mask = new float[rows][width];
    for (int i = 0; i < rows; i++) {
      for (int j = 0; j < width; j++) {
        boolean real = j < lengths[i];
        ids[i][j] = real ? step.get("ids").get(from + i).get(j).asLong() : padId;
        mask[i][j] = real ? 1f : 0f;
      }
    }
    long[] labels = new long[rows];
    for (int i = 0; i < rows; i++) {
      labels[i] = step.get("labels").get(from + i).asLong();
    }
    return batch(m, ids, mask, labels);
  }

  /** A batch of these ids, mask and labels, made from direct memory. */
  static Batch batch(NDManager m, long[][] ids, float[][] mask, long[] labels) {
    int rows = ids.length;
    int t = ids[0].length;
    ByteBuffer idb = ByteBuffer.allocateDirect(8 * rows * t).order(ByteOrder.nativeOrder());
    ByteBuffer mb = ByteBuffer.allocateDirect(4 * rows * t).order(ByteOrder.nativeOrder());
    ByteBuffer yb = ByteBuffer.allocateDirect(8 * rows).order(ByteOrder.nativeOrder());
    for (int i = 0; i < rows; i++) {
      for (int j = 0; j < t; j++) {
        idb.putLong(ids[i][j]);
        mb.putFloat(mask[i][j]);
      }
      yb.putLong(labels[i]);
    }
    idb.flip();
    mb.flip();
    yb.flip();
    NDList x =
        new NDList(
            m.create(idb, new Shape(rows, t), DataType.INT64),
            m.create(mb, new Shape(rows, t), DataType.FLOAT32));
    NDArray y = m.create(yb, new Shape(rows), DataType.INT64);
    return new Batch(m, x, y, rows, null, true);
  }

  /** A random batch: lengths 0..t (one empty row, one of t), ids in [1, vocab), pad id 0. */
  static Batch randomBatch(NDManager m, int rows, int t, long vocab, int classes, long seed) {
    return randomBatch(m, rows, t, vocab, classes, seed, t);
  }

  /** As {@link #randomBatch(NDManager, int, int, long, int, long)}, padded to {@code width}. */
  static Batch randomBatch(
      NDManager m, int rows, int t, long vocab, int classes, long seed, int width) {
    Random r = new Random(seed);
    long[][] ids = new long[rows][width];
    float[][] mask = new float[rows][width];
    long[] labels = new long[rows];
    for (int i = 0; i < rows; i++) {
      int n = i == 0 ? 0 : i == 1 ? t : r.nextInt(t + 1);
      for (int j = 0; j < n; j++) {
        ids[i][j] = 1 + r.nextInt((int) vocab - 1);
        mask[i][j] = 1f;
      }
      labels[i] = r.nextInt(classes);
    }
    return batch(m, ids, mask, labels);
  }

  /**
   * A step with Adam at 1e-2 (epsilon 1e-4) on the device, with bucket size {@code bucketBytes}.
   */
  static TrainStep newStep(
      ReplicaSet replicas, Communicator comm, Precision precision, int bucketBytes) {
    // epsilon as the fixtures' (make_fixtures.py says why)
    return newStep(
        replicas,
        comm,
        precision,
        bucketBytes,
        OptimizerSpec.adam().optLearningRate(1e-2f).optEpsilon(1e-4f).build());
  }

  static TrainStep newStep(
      ReplicaSet replicas,
      Communicator comm,
      Precision precision,
      int bucketBytes,
      OptimizerSpec opt) {
    return new TrainStep(
        replicas,
        LossSpec.SOFTMAX_CROSS_ENTROPY,
        comm,
        opt.newOptimizer(replicas.trainableSizes()),
        OptimizerPlacement.DEVICE,
        2,
        new CommOptions(
            Duration.ofSeconds(30), Duration.ofSeconds(60), WirePrecision.FP32, null, false),
        new StepOptions(bucketBytes, true),
        precision);
  }

  /** Sets the fixture's initial parameters (optimizer state zero, step 0). */
  static void start(TrainStep step, ReplicaSet replicas, JsonNode ref) {
    assertThat(replicas.parameterNames()).as("parameters, in order").isEqualTo(names(ref));
    step.restore(initialValues(ref), step.optimizerSlots(), 0);
  }

  static void assertLosses(String what, double[] got, JsonNode expected) {
    for (int s = 0; s < got.length; s++) {
      double r = expected.get(s).asDouble();
      assertThat(Math.abs(got[s] - r))
          .as(what + ": loss of step " + s + " = " + got[s] + ", PyTorch " + r)
          .isLessThanOrEqualTo(TOLERANCE * Math.max(1, Math.abs(r)));
    }
  }

  static void assertParameters(String what, ReplicaSet replicas, JsonNode ref) {
    float[][] values = replicas.readValues();
    List<String> names = replicas.parameterNames();
    JsonNode fin = ref.get("final");
    assertThat(values.length).isEqualTo(fin.size());
    for (int i = 0; i < values.length; i++) {
      JsonNode r = fin.get(i);
      assertThat(values[i]).as(what + ": size of " + names.get(i)).hasSize(r.size());
      for (int j = 0; j < values[i].length; j++) {
        double e = r.get(j).asDouble();
        assertThat(Math.abs(values[i][j] - e))
            .as(what + ": " + names.get(i) + "[" + j + "] = " + values[i][j] + ", PyTorch " + e)
            .isLessThanOrEqualTo(TOLERANCE * Math.max(1, Math.abs(e)));
      }
    }
  }
}
