package dev.sparktrainer.optim;

import ai.djl.ndarray.NDArray;

/**
 * Adam and AdamW, as {@code torch.optim.Adam} / {@code AdamW}: {@code m = b1 m + (1 - b1) g},
 * {@code v = b2 v + (1 - b2) g^2}, {@code p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) +
 * eps)}. The tensor form runs the same operations in the same order, unfused.
 */
final class Adam extends Optimizer {
  private static final String[] SLOTS = {"m", "v"};
  private final float beta1;
  private final float beta2;
  private final float epsilon;
  private final float weightDecay;
  private final boolean decoupled;

  Adam(int[] sizes, float beta1, float beta2, float epsilon, float weightDecay, boolean decoupled) {
    super(sizes, 2);
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.epsilon = epsilon;
    this.weightDecay = weightDecay;
    this.decoupled = decoupled;
  }

  private float stepSize(float lr) {
    return (float) (lr / (1 - Math.pow(beta1, steps)));
  }

  private float bc2Sqrt() {
    return (float) Math.sqrt(1 - Math.pow(beta2, steps));
  }

  @Override
  void applyRange(int index, float[] p, int pAt, float[] g, int gAt, int n, float lr) {
    float[] m = slot(0, index);
    float[] v = slot(1, index);
    float b1 = beta1;
    float b2 = beta2;
    float c1 = 1 - b1;
    float c2 = 1 - b2;
    float stepSize = stepSize(lr);
    float bc2Sqrt = bc2Sqrt();
    float eps = epsilon;
    float l2 = decoupled ? 0f : weightDecay;
    float shrink = decoupled ? 1 - lr * weightDecay : 1f;
    if (gAt == pAt && pAt + n <= ALIGNED_MAX) {
      // Every array at the same index, and the square roots in a pass of their own: C2 vectorizes
      // both loops, not the one loop holding both the square root and the division. The same float
      // operations in the same order per element as below: bit-identical.
      float[] root = scratch(ROOTS, pAt + n);
      int end = pAt + n;
      for (int j = pAt; j < end; j++) {
        float gj = g[j] + l2 * p[j];
        float mj = b1 * m[j] + c1 * gj;
        float vj = b2 * v[j] + c2 * gj * gj;
        m[j] = mj;
        v[j] = vj;
        root[j] = (float) Math.sqrt(vj);
      }
      for (int j = pAt; j < end; j++) {
        p[j] = p[j] * shrink - stepSize * m[j] / (root[j] / bc2Sqrt + eps);
      }
      return;
    }
    for (int k = 0; k < n; k++) {
      int j = pAt + k;
      float pj = p[j] * shrink;
      float gj = g[gAt + k] + l2 * p[j];
      float mj = b1 * m[j] + c1 * gj;
      float vj = b2 * v[j] + c2 * gj * gj;
      m[j] = mj;
      v[j] = vj;
      p[j] = pj - stepSize * mj / ((float) Math.sqrt(vj) / bc2Sqrt + eps);
    }
  }

  private static final ThreadLocal<float[][]> ROOTS =
      ThreadLocal.withInitial(() -> new float[][] {new float[0]});

  @Override
  public int applyTensors(NDArray p, NDArray g, NDArray[] state, float lr, DeviceScalars s) {
    NDArray m = state[0];
    NDArray v = state[1];
    NDArray grad = g;
    int calls = 0;
    if (!decoupled && weightDecay != 0) {
      grad = g.add(p.mul(s.of(weightDecay)));
      calls += 2;
    }
    if (decoupled && weightDecay != 0) {
      p.muli(s.of(1 - lr * weightDecay));
      calls++;
    }
    m.muli(s.of(beta1)).addi(grad.mul(s.of(1 - beta1)));
    v.muli(s.of(beta2)).addi(grad.mul(grad).muli(s.of(1 - beta2)));
    NDArray denom = v.sqrt().divi(s.of(bc2Sqrt())).addi(s.of(epsilon));
    p.subi(m.mul(s.of(stepSize(lr))).divi(denom));
    return calls + 13;
  }

  @Override
  public String name() {
    return decoupled ? "adamw" : "adam";
  }

  @Override
  public String[] slotNames() {
    return SLOTS.clone();
  }
}
