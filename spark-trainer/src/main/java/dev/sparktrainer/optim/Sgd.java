package dev.sparktrainer.optim;

/** SGD with heavy-ball momentum ({@code v = mu v + g; p -= lr v}), as {@code torch.optim.SGD}. */
final class Sgd extends Optimizer {
  private final float momentum;
  private final float weightDecay;

  Sgd(int[] sizes, float momentum, float weightDecay) {
    super(sizes, momentum > 0 ? 1 : 0);
    this.momentum = momentum;
    this.weightDecay = weightDecay;
  }

  @Override
  void apply(int index, float[] p, float[] g, float lr) {
    float wd = weightDecay;
    if (momentum == 0) {
      for (int j = 0; j < p.length; j++) {
        p[j] -= lr * (g[j] + wd * p[j]);
      }
      return;
    }
    float[] v = slots[0][index];
    float mu = momentum;
    boolean first = steps == 1;
    for (int j = 0; j < p.length; j++) {
      float d = g[j] + wd * p[j];
      // PyTorch starts the buffer at the first gradient rather than decaying a zero buffer.
      float vj = first ? d : mu * v[j] + d;
      v[j] = vj;
      p[j] -= lr * vj;
    }
  }

  @Override
  public String name() {
    return "sgd";
  }
}
