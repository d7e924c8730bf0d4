package dev.sparktrainer.optim;

/**
 * Adam and AdamW, as {@code torch.optim.Adam} / {@code AdamW}: {@code m = b1 m + (1 - b1) g}, {@code
 * v = b2 v + (1 - b2) g^2}, {@code p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)}.
 */
final class Adam extends Optimizer {
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

  @Override
  void apply(int index, float[] p, float[] g, float lr) {
    float[] m = slots[0][index];
    float[] v = slots[1][index];
    float b1 = beta1;
    float b2 = beta2;
    float c1 = 1 - b1;
    float c2 = 1 - b2;
    float stepSize = (float) (lr / (1 - Math.pow(b1, steps)));
    float bc2Sqrt = (float) Math.sqrt(1 - Math.pow(b2, steps));
    float eps = epsilon;
    float l2 = decoupled ? 0f : weightDecay;
    float shrink = decoupled ? 1 - lr * weightDecay : 1f;
    for (int j = 0; j < p.length; j++) {
      float pj = p[j] * shrink;
      float gj = g[j] + l2 * p[j];
      float mj = b1 * m[j] + c1 * gj;
      float vj = b2 * v[j] + c2 * gj * gj;
      m[j] = mj;
      v[j] = vj;
      p[j] = pj - stepSize * mj / ((float) Math.sqrt(vj) / bc2Sqrt + eps);
    }
  }

  @Override
  public String name() {
    return decoupled ? "adamw" : "adam";
  }
}
