package dev.sparktrainer.optim;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.index.NDIndex;

/** SGD with heavy-ball momentum ({@code v = mu v + g; p -= lr v}), as {@code torch.optim.SGD}. */
final class Sgd extends Optimizer {
  /** Every element (NDArray.set rejects an empty index). */
  private static final NDIndex ALL = new NDIndex("...");

  private final float momentum;
  private final float weightDecay;

  Sgd(int[] sizes, float momentum, float weightDecay) {
    super(sizes, momentum > 0 ? 1 : 0);
    this.momentum = momentum;
    this.weightDecay = weightDecay;
  }

  @Override
  void applyRange(int index, float[] p, int pAt, float[] g, int gAt, int n, float lr) {
    float wd = weightDecay;
    if (gAt == pAt) {
      applyAligned(index, p, g, pAt, pAt + n, lr, wd);
      return;
    }
    if (momentum == 0) {
      for (int k = 0; k < n; k++) {
        int j = pAt + k;
        p[j] -= lr * (g[gAt + k] + wd * p[j]);
      }
      return;
    }
    float[] v = slot(0, index);
    float mu = momentum;
    boolean first = steps == 1;
    for (int k = 0; k < n; k++) {
      int j = pAt + k;
      float d = g[gAt + k] + wd * p[j];
      // PyTorch starts the buffer at the first gradient rather than decaying a zero buffer.
      float vj = first ? d : mu * v[j] + d;
      v[j] = vj;
      p[j] -= lr * vj;
    }
  }

  /**
   * {@link #applyRange} with every array at the same index (C2 vectorizes these loops); the same
   * float operations per element.
   */
  private void applyAligned(int index, float[] p, float[] g, int from, int to, float lr, float wd) {
    if (momentum == 0) {
      for (int j = from; j < to; j++) {
        p[j] -= lr * (g[j] + wd * p[j]);
      }
      return;
    }
    float[] v = slot(0, index);
    float mu = momentum;
    if (steps == 1) {
      // PyTorch starts the buffer at the first gradient rather than decaying a zero buffer.
      for (int j = from; j < to; j++) {
        float d = g[j] + wd * p[j];
        v[j] = d;
        p[j] -= lr * d;
      }
      return;
    }
    for (int j = from; j < to; j++) {
      float vj = mu * v[j] + (g[j] + wd * p[j]);
      v[j] = vj;
      p[j] -= lr * vj;
    }
  }

  @Override
  public int applyTensors(NDArray p, NDArray g, NDArray[] state, float lr, DeviceScalars s) {
    NDArray d = weightDecay != 0 ? g.add(p.mul(s.of(weightDecay))) : g;
    int calls = weightDecay != 0 ? 2 : 0;
    if (momentum == 0) {
      p.subi(d.mul(s.of(lr)));
      return calls + 2;
    }
    NDArray v = state[0];
    if (steps == 1) {
      // The buffer starts at the first gradient. An in-place copy: copyTo goes through
      // NDArray.set(Buffer), whose native side prints libtorch's AutoNonVariableTypeMode warning.
      v.set(ALL, d);
      calls++;
    } else {
      v.muli(s.of(momentum)).addi(d);
      calls += 2;
    }
    p.subi(v.mul(s.of(lr)));
    return calls + 2;
  }

  @Override
  public String name() {
    return "sgd";
  }

  @Override
  public String[] slotNames() {
    return momentum > 0 ? new String[] {"momentum"} : new String[0];
  }
}
