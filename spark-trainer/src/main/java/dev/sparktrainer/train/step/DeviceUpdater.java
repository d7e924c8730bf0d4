package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import dev.sparktrainer.optim.DeviceScalars;
import dev.sparktrainer.optim.Optimizer;
import java.nio.FloatBuffer;

/**
 * {@link OptimizerPlacement#DEVICE}: parameters and optimizer state stay flat tensors on each
 * replica's device, one per gradient bucket, and the optimizer runs there over a whole bucket at a
 * time: a fixed number of engine calls per bucket, whatever the number of parameters in it. The
 * parameters are views of the flat tensors ({@link FlatState}), so nothing is written back. Only
 * the ring moves gradients: one copy of a bucket to the host and one back ({@link FlatGradients}).
 */
final class DeviceUpdater extends ParameterUpdater {
  /** [replica][gradient bucket][slot]: the optimizer state, flat like the bucket. */
  private final NDArray[][][] state;

  /** [replica]: the optimizer's scalars on that replica's device (no host copy to wait for). */
  private final DeviceScalars[] scalars;

  DeviceUpdater(
      ReplicaSet replicas,
      GradientBuckets buckets,
      FlatState flat,
      FlatGradients grads,
      Optimizer optimizer,
      StepLedger ledger) {
    super(replicas, buckets, flat, grads, optimizer, ledger);
    int k = replicas.devices().size();
    int nb = buckets.gradientBuckets();
    state = new NDArray[k][nb][optimizer.slotCount()];
    scalars = new DeviceScalars[k];
    try {
      for (int d = 0; d < k; d++) {
        NDManager m = replicas.managers[d];
        scalars[d] = new DeviceScalars(m);
        for (int b = 0; b < nb; b++) {
          NDArray p = flat.values[d][b];
          for (int s = 0; s < optimizer.slotCount(); s++) {
            state[d][b][s] = m.zeros(p.getShape(), p.getDataType(), p.getDevice());
          }
        }
      }
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    }
  }

  @Override
  void apply(int b, boolean reduced, float lr) {
    for (int d = 0; d < state.length; d++) {
      NDArray g = grads.reduced(b, d, reduced);
      // One scope per bucket and replica: the update's temporaries (each as large as the bucket)
      // are freed before the next bucket's, and the operands return to their own managers.
      try (NDManager scope = replicas.managers[d].newSubManager()) {
        NDArray p = flat.values[d][b];
        NDArray[] st = state[d][b];
        p.tempAttach(scope);
        g.tempAttach(scope);
        for (NDArray s : st) {
          s.tempAttach(scope);
        }
        long made = scalars[d].made();
        ledger.optimizerCalls += optimizer.applyTensors(p, g, st, lr, scalars[d]);
        // the scalars' fills: once per value in use (the step size changes every step)
        ledger.optimizerCalls += scalars[d].made() - made;
        ledger.deviceAllocations += scalars[d].made() - made;
        // The scope lists the operands attached for the update too; the rest it made.
        ledger.deviceAllocations += scope.getManagedArrays().size() - 2 - st.length;
      }
    }
  }

  @Override
  void finishStep() {
    for (DeviceScalars s : scalars) {
      s.endStep();
    }
    if (grads.viaArena) {
      grads.statsFromArena();
    }
  }

  @Override
  float[][] values() {
    return replicas.readValues();
  }

  @Override
  float[] slot(int s, int j) {
    int b = buckets.bucketOf[j];
    int n = replicas.sizes[replicas.trainable[j]];
    try (NDArray v = FlatState.slice(state[0][b][s], buckets.offset[j] - buckets.start[b], n)) {
      return v.toFloatArray();
    }
  }

  @Override
  void restore(float[][] values, float[][][] slots, long steps) {
    replicas.useFloat32(); // the values are written through the parameters' arrays
    for (int d = 0; d < state.length; d++) {
      for (int i = 0; i < values.length; i++) {
        TensorWrites.overwrite(replicas.params[d][i].getArray(), FloatBuffer.wrap(values[i]));
      }
      for (int j = 0; j < replicas.trainable.length; j++) {
        int b = buckets.bucketOf[j];
        int n = replicas.sizes[replicas.trainable[j]];
        for (int s = 0; s < optimizer.slotCount(); s++) {
          float[] v = slots == null || slots[s][j] == null ? new float[n] : slots[s][j];
          try (NDArray slice =
              FlatState.slice(state[d][b][s], buckets.offset[j] - buckets.start[b], n)) {
            TensorWrites.overwrite(slice, FloatBuffer.wrap(v));
          }
        }
      }
    }
    optimizer.setSteps(steps);
  }

  @Override
  public void close() {
    for (DeviceScalars s : scalars) {
      if (s != null) {
        s.close();
      }
    }
    for (NDArray[][] dev : state) {
      for (NDArray[] row : dev) {
        for (NDArray a : row) {
          if (a != null) {
            a.close();
          }
        }
      }
    }
  }
}
