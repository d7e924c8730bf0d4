package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.GradientCollector;
import ai.djl.training.loss.Loss;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.CustomSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.optim.OptimizerSpec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Random;

/**
 * Fixed one-worker training scenarios whose state (parameters, optimizer slots, step count: what a
 * checkpoint holds) is recorded mid-run and at the end, by the flat step ({@link #run}) and by a
 * per-tensor reference computed in the same run ({@link #perTensor}: DJL ops per parameter, in the
 * order the per-tensor step before the flat one ran them). {@code FlatStepTest} requires the two
 * bit for bit, and a resume from the flat step's own mid-run state to end where the uninterrupted
 * run ends.
 *
 * <p>Why no stored states: the engine's forward and backward kernels are chosen per CPU (AVX2 or
 * AVX-512, Intel or AMD, MKL's code path), and their sums round differently in the last bit. States
 * written on one machine are not the bits another machine computes, so a bit-for-bit comparison may
 * only be against what the same run computed on the same machine.
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
  record State(float[][] values, float[][][] slots, long steps) {}

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

  /**
   * The per-tensor reference of {@link #run} from step 0 to {@code to}: the same replicas, batches
   * and seeds, one backward, then each trainable parameter's raw gradient applied by the optimizer
   * on its own — {@link Optimizer#applyTensors} per tensor on the device, or the host rule ({@link
   * Optimizer#update}, Java arithmetic) for {@link OptimizerPlacement#HOST}. Nothing flat, no
   * buckets, no aliasing: what the flat step must equal bit for bit.
   */
  static State perTensor(Object[] scenario, int to, State[] mid) {
    ModelSpec spec = (ModelSpec) scenario[1];
    int features = (Integer) scenario[2];
    OptimizerSpec opt = (OptimizerSpec) scenario[3];
    boolean host = scenario[4] == OptimizerPlacement.HOST;
    LossSpec lossSpec = LossSpec.SOFTMAX_CROSS_ENTROPY;
    Loss loss = lossSpec.newLoss();
    try (ReplicaSet r = new ReplicaSet(spec, List.of(Device.cpu()), 7)) {
      int t = r.trainable.length;
      Optimizer o = opt.newOptimizer(r.trainableSizes());
      NDManager m = r.manager();
      NDArray[][] slots = new NDArray[t][host ? 0 : o.slotCount()];
      for (int j = 0; j < t; j++) {
        for (int s = 0; s < slots[j].length; s++) {
          slots[j][s] = m.zeros(new Shape(r.sizes[r.trainable[j]]));
        }
      }
      for (int step = 0; step < to; step++) {
        float lr = opt.learningRate(step, 1);
        boolean recording = JniUtils.isGradMode();
        ReplicaSet.JVM_LOCK.lock();
        try (Batch b = batch(m.newSubManager(), 12, features, step)) {
          m.getEngine().setRandomSeed(1000 + step);
          try (GradientCollector gc = m.getEngine().newGradientCollector()) {
            NDArray pred = r.blocks[0].forward(r.stores[0], b.features(), true).head();
            gc.backward(lossSpec.evaluate(loss, b.labels(), pred));
          }
          JniUtils.setGradMode(false);
          if (host) {
            float[][] values = new float[t][];
            float[][] grads = new float[t][];
            for (int j = 0; j < t; j++) {
              PtNDArray p = (PtNDArray) r.params[0][r.trainable[j]].getArray();
              values[j] = p.toFloatArray();
              try (NDArray g = JniUtils.getGradient(p)) {
                grads[j] = g.toFloatArray();
              }
            }
            o.update(values, grads, lr);
            for (int j = 0; j < t; j++) {
              TensorWrites.overwrite(
                  r.params[0][r.trainable[j]].getArray(), FloatBuffer.wrap(values[j]));
            }
          } else {
            o.beginStep();
            for (int j = 0; j < t; j++) {
              PtNDArray p = (PtNDArray) r.params[0][r.trainable[j]].getArray();
              try (NDArray g = JniUtils.getGradient(p).reshape(-1);
                  NDArray flatP = p.reshape(-1)) {
                o.applyTensors(flatP, g, slots[j], lr);
              }
            }
          }
          for (int j = 0; j < t; j++) {
            JniUtils.zeroGrad((PtNDArray) r.params[0][r.trainable[j]].getArray());
          }
        } finally {
          JniUtils.setGradMode(recording); // grad mode is per thread: leave it as it was
          ReplicaSet.JVM_LOCK.unlock();
        }
        if (mid != null && step + 1 == MID) {
          mid[0] = referenceState(r, o, slots, host);
        }
      }
      return referenceState(r, o, slots, host);
    }
  }

  private static State referenceState(ReplicaSet r, Optimizer o, NDArray[][] slots, boolean host) {
    int t = r.trainable.length;
    float[][][] out = new float[o.slotCount()][t][];
    for (int s = 0; s < out.length; s++) {
      for (int j = 0; j < t; j++) {
        out[s][j] = host ? o.slot(s, j).clone() : slots[j][s].toFloatArray();
      }
    }
    return new State(r.readValues(), out, o.steps());
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
}
