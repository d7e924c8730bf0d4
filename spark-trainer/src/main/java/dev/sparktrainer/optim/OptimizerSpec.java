package dev.sparktrainer.optim;

import java.io.Serializable;
import java.util.Locale;

/**
 * An optimizer and its learning-rate schedule, as a small serializable value; {@link
 * #newOptimizer(int[])} creates the stateful optimizer inside a task.
 *
 * <p>The learning rate at update {@code t} (0-based) is the base rate, times the number of replicas
 * when the linear scaling rule is on, times {@code (t + 1) / warmupSteps} during warm-up, then
 * decayed (step or cosine) over the updates after warm-up.
 *
 * <pre>{@code
 * OptimizerSpec adam = OptimizerSpec.adam().optLearningRate(1e-3f).optWarmupSteps(100)
 *     .optCosineDecay(10_000, 1e-5f).build();
 * }</pre>
 */
public final class OptimizerSpec implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The update rule. */
  public enum Kind {
    /** SGD with (heavy-ball) momentum and L2 weight decay added to the gradient, as PyTorch's. */
    SGD,
    /** Adam (Kingma and Ba), L2 weight decay added to the gradient, as PyTorch's. */
    ADAM,
    /** Adam with decoupled weight decay (Loshchilov and Hutter), as PyTorch's AdamW. */
    ADAMW
  }

  /** Learning-rate decay after warm-up. */
  public enum Decay {
    /** Constant. */
    NONE,
    /** Multiplied by {@code gamma} every {@code decaySteps} updates. */
    STEP,
    /** Cosine from the base rate to {@code minLearningRate} over {@code decaySteps} updates. */
    COSINE
  }

  private final Kind kind;
  private final float learningRate;
  private final float momentum;
  private final float beta1;
  private final float beta2;
  private final float epsilon;
  private final float weightDecay;
  private final long warmupSteps;
  private final Decay decay;
  private final long decaySteps;
  private final float gamma;
  private final float minLearningRate;
  private final boolean linearScaling;

  private OptimizerSpec(Builder b) {
    kind = b.kind;
    learningRate = b.learningRate;
    momentum = b.momentum;
    beta1 = b.beta1;
    beta2 = b.beta2;
    epsilon = b.epsilon;
    weightDecay = b.weightDecay;
    warmupSteps = b.warmupSteps;
    decay = b.decay;
    decaySteps = b.decaySteps;
    gamma = b.gamma;
    minLearningRate = b.minLearningRate;
    linearScaling = b.linearScaling;
  }

  /** SGD; momentum 0 unless {@link Builder#optMomentum(float)}. Default learning rate 0.01. */
  public static Builder sgd() {
    return new Builder(Kind.SGD, 0.01f);
  }

  /** Adam; default learning rate 1e-3, betas 0.9 / 0.999, epsilon 1e-8. */
  public static Builder adam() {
    return new Builder(Kind.ADAM, 1e-3f);
  }

  /** AdamW; default learning rate 1e-3, weight decay 0.01. */
  public static Builder adamW() {
    return new Builder(Kind.ADAMW, 1e-3f).optWeightDecay(0.01f);
  }

  /** The update rule. */
  public Kind kind() {
    return kind;
  }

  /** The base learning rate. */
  public float baseLearningRate() {
    return learningRate;
  }

  /**
   * The learning rate of update {@code t} (0-based) with {@code replicas} replicas (the linear
   * scaling rule multiplies by it when enabled).
   */
  public float learningRate(long t, int replicas) {
    double lr = learningRate * (linearScaling ? replicas : 1);
    if (t < warmupSteps) {
      return (float) (lr * (t + 1) / warmupSteps);
    }
    long u = t - warmupSteps;
    switch (decay) {
      case STEP:
        return (float) (lr * Math.pow(gamma, (double) (u / decaySteps)));
      case COSINE:
        double min = minLearningRate * (linearScaling ? replicas : 1);
        double progress = Math.min(u, decaySteps) / (double) decaySteps;
        return (float) (min + (lr - min) * 0.5 * (1 + Math.cos(Math.PI * progress)));
      default:
        return (float) lr;
    }
  }

  /** A new optimizer, with zeroed state, for parameters of these sizes (in order). */
  public Optimizer newOptimizer(int[] parameterSizes) {
    switch (kind) {
      case SGD:
        return new Sgd(parameterSizes, momentum, weightDecay);
      case ADAM:
        return new Adam(parameterSizes, beta1, beta2, epsilon, weightDecay, false);
      case ADAMW:
        return new Adam(parameterSizes, beta1, beta2, epsilon, weightDecay, true);
      default:
        throw new AssertionError(kind);
    }
  }

  @Override
  public String toString() {
    return kind.name().toLowerCase(Locale.ROOT)
        + "(lr="
        + learningRate
        + (kind == Kind.SGD
            ? ", momentum=" + momentum
            : ", betas=" + beta1 + "/" + beta2 + ", eps=" + epsilon)
        + ", weightDecay="
        + weightDecay
        + ", warmup="
        + warmupSteps
        + ", decay="
        + decay
        + (decay == Decay.NONE ? "" : "/" + decaySteps)
        + (linearScaling ? ", linearScaling" : "")
        + ")";
  }

  /** Builder for {@link OptimizerSpec}: every value is optional; validation in {@link #build()}. */
  public static final class Builder {
    private final Kind kind;
    private float learningRate;
    private float momentum;
    private float beta1 = 0.9f;
    private float beta2 = 0.999f;
    private float epsilon = 1e-8f;
    private float weightDecay;
    private long warmupSteps;
    private Decay decay = Decay.NONE;
    private long decaySteps = 1;
    private float gamma = 0.1f;
    private float minLearningRate;
    private boolean linearScaling;

    private Builder(Kind kind, float learningRate) {
      this.kind = kind;
      this.learningRate = learningRate;
    }

    /** Base learning rate (> 0). */
    public Builder optLearningRate(float learningRate) {
      this.learningRate = learningRate;
      return this;
    }

    /** SGD momentum in [0, 1). */
    public Builder optMomentum(float momentum) {
      this.momentum = momentum;
      return this;
    }

    /** Adam's beta1 and beta2, each in [0, 1). */
    public Builder optBetas(float beta1, float beta2) {
      this.beta1 = beta1;
      this.beta2 = beta2;
      return this;
    }

    /** Adam's epsilon (> 0). */
    public Builder optEpsilon(float epsilon) {
      this.epsilon = epsilon;
      return this;
    }

    /** Weight decay (>= 0): L2 added to the gradient for SGD and Adam, decoupled for AdamW. */
    public Builder optWeightDecay(float weightDecay) {
      this.weightDecay = weightDecay;
      return this;
    }

    /**
     * Linear warm-up from {@code lr / steps} to {@code lr} over the first {@code steps} updates.
     */
    public Builder optWarmupSteps(long steps) {
      this.warmupSteps = steps;
      return this;
    }

    /** Multiply the rate by {@code gamma} every {@code everySteps} updates after warm-up. */
    public Builder optStepDecay(long everySteps, float gamma) {
      this.decay = Decay.STEP;
      this.decaySteps = everySteps;
      this.gamma = gamma;
      return this;
    }

    /** Cosine decay to {@code minLearningRate} over {@code steps} updates after warm-up. */
    public Builder optCosineDecay(long steps, float minLearningRate) {
      this.decay = Decay.COSINE;
      this.decaySteps = steps;
      this.minLearningRate = minLearningRate;
      return this;
    }

    /**
     * The linear scaling rule (Goyal et al.): multiply the rates by the number of replicas, since
     * the global batch grows with it. Default off.
     */
    public Builder optLinearScaling(boolean enabled) {
      this.linearScaling = enabled;
      return this;
    }

    /** Validates and builds. */
    public OptimizerSpec build() {
      check(learningRate > 0 && Float.isFinite(learningRate), "learningRate", learningRate, "> 0");
      check(momentum >= 0 && momentum < 1, "momentum", momentum, "in [0, 1)");
      check(beta1 >= 0 && beta1 < 1, "beta1", beta1, "in [0, 1)");
      check(beta2 >= 0 && beta2 < 1, "beta2", beta2, "in [0, 1)");
      check(epsilon > 0, "epsilon", epsilon, "> 0");
      check(weightDecay >= 0, "weightDecay", weightDecay, ">= 0");
      check(warmupSteps >= 0, "warmupSteps", warmupSteps, ">= 0");
      check(decaySteps > 0, "decaySteps", decaySteps, "> 0");
      check(gamma > 0 && gamma <= 1, "gamma", gamma, "in (0, 1]");
      check(
          minLearningRate >= 0 && minLearningRate <= learningRate,
          "minLearningRate",
          minLearningRate,
          "in [0, learningRate]");
      return new OptimizerSpec(this);
    }

    private static void check(boolean ok, String name, Object value, String expected) {
      if (!ok) {
        throw new IllegalArgumentException(
            "Invalid " + name + " " + value + ": expected " + expected);
      }
    }
  }
}
