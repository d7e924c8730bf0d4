package dev.sparktrainer.train;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.jni.JniUtils;
import dev.sparktrainer.optim.Optimizer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * {@link OptimizerPlacement#DEVICE}: parameters and optimizer state stay tensors on each replica's
 * device and are updated there with tensor ops. Only the gradients leave the device (into the
 * arena); each reduced bucket comes back into a gradient tensor per parameter ({@code set} from the
 * arena: a host-to-device copy on a GPU; on the CPU the tensor simply reads the arena's memory).
 */
final class DeviceUpdater extends ParameterUpdater {
  /** Per device and trainable j: the reduced gradient. */
  private final NDArray[][] grads;

  /** Per device, trainable j and slot: the optimizer state. */
  private final NDArray[][][] state;

  /** Per trainable j and statistic: the arena slice it is read from (made once). */
  private final ByteBuffer[] gradSlices;

  private final ByteBuffer[] statSlices;

  DeviceUpdater(ReplicaSet replicas, GradientBuckets buckets, Optimizer optimizer) {
    super(replicas, buckets, optimizer);
    int k = replicas.devices().size();
    int t = replicas.trainable.length;
    grads = new NDArray[k][t];
    state = new NDArray[k][t][optimizer.slotCount()];
    gradSlices = new ByteBuffer[t];
    statSlices = new ByteBuffer[replicas.stats.length];
    for (int j = 0; j < t; j++) {
      gradSlices[j] = slice(buckets.offset[j], replicas.sizes[replicas.trainable[j]]);
    }
    for (int j = 0; j < statSlices.length; j++) {
      statSlices[j] = slice(buckets.statOffset[j], replicas.sizes[replicas.stats[j]]);
    }
    for (int d = 0; d < k; d++) {
      NDManager m = replicas.managers[d];
      for (int j = 0; j < t; j++) {
        NDArray p = replicas.params[d][replicas.trainable[j]].getArray();
        grads[d][j] = m.zeros(p.getShape(), p.getDataType(), p.getDevice());
        for (int s = 0; s < optimizer.slotCount(); s++) {
          state[d][j][s] = m.zeros(p.getShape(), p.getDataType(), p.getDevice());
        }
      }
    }
  }

  /** A view of {@code count} floats from float offset {@code at} (set() reads from the address). */
  private ByteBuffer slice(int at, int count) {
    return buckets.arena.slice(at * 4, count * 4).order(ByteOrder.LITTLE_ENDIAN);
  }

  @Override
  void apply(int b, float lr) {
    // In-place updates of parameters (leaves that require gradients) need gradient recording off.
    // PyTorch's grad mode is per thread and on by default in a new thread (a Spark task's, a
    // pool's).
    boolean recording = JniUtils.isGradMode();
    JniUtils.setGradMode(false);
    try {
      applyNoGrad(b, lr);
    } finally {
      JniUtils.setGradMode(recording);
    }
  }

  private void applyNoGrad(int b, float lr) {
    for (int d = 0; d < grads.length; d++) {
      for (int j : buckets.members[b]) {
        // One scope per parameter: the update's temporaries (each as large as the parameter) are
        // freed before the next parameter's, and the operands return to their own managers.
        try (NDManager scope = replicas.managers[d].newSubManager()) {
          NDArray p = replicas.params[d][replicas.trainable[j]].getArray();
          NDArray g = grads[d][j];
          TensorWrites.overwrite(g, gradSlices[j]);
          NDArray[] st = state[d][j];
          p.tempAttach(scope);
          g.tempAttach(scope);
          for (NDArray s : st) {
            s.tempAttach(scope);
          }
          optimizer.applyTensors(p, g, st, lr);
        }
      }
    }
  }

  @Override
  void finishStep() {
    for (int d = 0; d < grads.length; d++) {
      for (int j = 0; j < statSlices.length; j++) {
        TensorWrites.overwrite(replicas.params[d][replicas.stats[j]].getArray(), statSlices[j]);
      }
    }
  }

  @Override
  float[][] values() {
    return replicas.readValues();
  }

  @Override
  float[] slot(int s, int j) {
    return state[0][j][s].toFloatArray();
  }

  @Override
  void restore(float[][] values, float[][][] slots, long steps) {
    for (int d = 0; d < grads.length; d++) {
      for (int i = 0; i < values.length; i++) {
        TensorWrites.overwrite(replicas.params[d][i].getArray(), FloatBuffer.wrap(values[i]));
      }
      for (int j = 0; j < replicas.trainable.length; j++) {
        for (int s = 0; s < optimizer.slotCount(); s++) {
          NDArray st = state[d][j][s];
          if (slots == null || slots[s][j] == null) {
            TensorWrites.overwrite(st, FloatBuffer.wrap(new float[Math.toIntExact(st.size())]));
          } else {
            TensorWrites.overwrite(st, FloatBuffer.wrap(slots[s][j]));
          }
        }
      }
    }
    optimizer.setSteps(steps);
  }

  @Override
  public void close() {
    for (NDArray[] row : grads) {
      for (NDArray a : row) {
        a.close();
      }
    }
    for (NDArray[][] dev : state) {
      for (NDArray[] row : dev) {
        for (NDArray a : row) {
          a.close();
        }
      }
    }
  }
}
