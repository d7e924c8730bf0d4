package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.data.Batch;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.CustomSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.optim.OptimizerSpec;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import java.util.Random;

/**
 * Fixed one-worker training scenarios whose state (parameters, optimizer slots, step count: what a
 * checkpoint holds) is recorded mid-run and at the end. {@code step-states-v1.bin} under the test
 * resources was written by the per-tensor step that came before the flat one (commit 613d602, by
 * {@link #main}); {@code FlatStepTest} resumes each recorded mid-run state with today's step and
 * requires the end state bit for bit.
 */
final class StepScenarios {
  static final int MID = 3;
  static final int END = 6;

  private StepScenarios() {}

  /** The scenarios: name, model, features, optimizer, placement. */
  static List<Object[]> all() {
    ModelSpec mlp = MlpSpec.of(64, 10, 32, 16);
    ModelSpec cnn = CnnSpec.of(1, 8, 8, 10);
    ModelSpec res = CustomSpec.of(new TrainStepTest.SmallResNet(), new Shape(64));
    OptimizerSpec adamw =
        OptimizerSpec.adamW()
            .optLearningRate(1e-2f)
            .optWeightDecay(0.01f)
            .optWarmupSteps(2)
            .optCosineDecay(6, 1e-4f)
            .build();
    OptimizerSpec adam = OptimizerSpec.adam().optLearningRate(1e-2f).optWeightDecay(1e-3f).build();
    OptimizerSpec momentum =
        OptimizerSpec.sgd().optLearningRate(0.05f).optMomentum(0.9f).optWeightDecay(1e-3f).build();
    OptimizerSpec sgd = OptimizerSpec.sgd().optLearningRate(0.05f).build();
    return List.of(
        new Object[] {"mlp-adamw-device", mlp, 64, adamw, OptimizerPlacement.DEVICE},
        new Object[] {"mlp-sgd-device", mlp, 64, sgd, OptimizerPlacement.DEVICE},
        new Object[] {"cnn-adam-l2-device", cnn, 64, adam, OptimizerPlacement.DEVICE},
        new Object[] {"res-momentum-device", res, 64, momentum, OptimizerPlacement.DEVICE},
        new Object[] {"res-adamw-host", res, 64, adamw, OptimizerPlacement.HOST},
        new Object[] {"cnn-momentum-host", cnn, 64, momentum, OptimizerPlacement.HOST});
  }

  /** A batch made in direct memory, as the input pipeline makes them. */
  static Batch batch(NDManager m, int rows, int features, long seed) {
    Random r = new Random(seed);
    ByteBuffer x = ByteBuffer.allocateDirect(4 * rows * features).order(ByteOrder.nativeOrder());
    ByteBuffer y = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
    for (int i = 0; i < rows * features; i++) {
      x.putFloat(4 * i, (float) r.nextGaussian());
    }
    for (int i = 0; i < rows; i++) {
      y.putFloat(4 * i, r.nextInt(10));
    }
    return new Batch(
        m,
        new NDList(m.create(x, new Shape(rows, features), DataType.FLOAT32)),
        m.create(y, new Shape(rows), DataType.FLOAT32),
        rows,
        null,
        true);
  }

  /** A checkpoint's content: every parameter's values, each trainable one's slots, the steps. */
  record State(float[][] values, float[][][] slots, long steps) {
    void write(DataOutputStream out) throws IOException {
      writeArrays(out, values);
      out.writeInt(slots.length);
      for (float[][] s : slots) {
        writeArrays(out, s);
      }
      out.writeLong(steps);
    }

    static State read(DataInputStream in) throws IOException {
      float[][] v = readArrays(in);
      float[][][] s = new float[in.readInt()][][];
      for (int i = 0; i < s.length; i++) {
        s[i] = readArrays(in);
      }
      return new State(v, s, in.readLong());
    }
  }

  private static void writeArrays(DataOutputStream out, float[][] arrays) throws IOException {
    out.writeInt(arrays.length);
    for (float[] a : arrays) {
      out.writeInt(a.length);
      for (float f : a) {
        out.writeInt(Float.floatToRawIntBits(f));
      }
    }
  }

  private static float[][] readArrays(DataInputStream in) throws IOException {
    float[][] out = new float[in.readInt()][];
    for (int i = 0; i < out.length; i++) {
      out[i] = new float[in.readInt()];
      for (int k = 0; k < out[i].length; k++) {
        out[i][k] = Float.intBitsToFloat(in.readInt());
      }
    }
    return out;
  }

  /**
   * Runs steps {@code [from, to)} of a scenario on one worker, starting from {@code start} (null:
   * fresh); returns the state at {@code to}, and at {@link #MID} into {@code mid[0]} if passed.
   */
  static State run(Object[] scenario, State start, int from, int to, State[] mid) {
    ModelSpec spec = (ModelSpec) scenario[1];
    int features = (Integer) scenario[2];
    OptimizerSpec opt = (OptimizerSpec) scenario[3];
    OptimizerPlacement placement = (OptimizerPlacement) scenario[4];
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7)) {
      int[] sizes = new int[replicas.trainable.length];
      for (int j = 0; j < sizes.length; j++) {
        sizes[j] = replicas.sizes[replicas.trainable[j]];
      }
      Optimizer optimizer = opt.newOptimizer(sizes);
      try (TrainStep step =
          new TrainStep(
              replicas,
              LossSpec.SOFTMAX_CROSS_ENTROPY,
              null,
              optimizer,
              placement,
              2,
              4096,
              true,
              false,
              Duration.ofSeconds(30))) {
        if (start != null) {
          step.updater.restore(start.values(), start.slots(), start.steps());
        }
        double[] acc = new double[3];
        for (int s = from; s < to; s++) {
          try (Batch b = batch(replicas.manager().newSubManager(), 12, features, s)) {
            step.run(b, 1000 + s, opt.learningRate(s, 1), acc);
          }
          if (mid != null && s + 1 == MID) {
            mid[0] = state(step, replicas, optimizer);
          }
        }
        return state(step, replicas, optimizer);
      }
    }
  }

  private static State state(TrainStep step, ReplicaSet replicas, Optimizer optimizer) {
    float[][][] slots = new float[optimizer.slotCount()][replicas.trainable.length][];
    for (int s = 0; s < slots.length; s++) {
      for (int j = 0; j < replicas.trainable.length; j++) {
        slots[s][j] = step.updater.slot(s, j);
      }
    }
    return new State(step.updater.values(), slots, optimizer.steps());
  }

  /** Writes every scenario's mid-run and end states to {@code args[0]}. */
  public static void main(String[] args) throws IOException {
    try (DataOutputStream out =
        new DataOutputStream(
            new java.io.BufferedOutputStream(new java.io.FileOutputStream(args[0])))) {
      for (Object[] sc : all()) {
        State[] mid = new State[1];
        State end = run(sc, null, 0, END, mid);
        out.writeUTF((String) sc[0]);
        mid[0].write(out);
        end.write(out);
      }
    }
  }
}
