package dev.sparktrainer.train.step;

import dev.sparktrainer.optim.Optimizer;

/**
 * The optimizer step in one {@link OptimizerPlacement placement}: applies each reduced gradient
 * bucket to its parameters as it comes back from the ring, writes the averaged statistics into
 * every replica, and gives the state (parameters, optimizer slots, step count) to checkpoints and
 * takes it back on resume. Both placements keep every replica bit-identical: they run the same
 * operations on the same reduced bits. The parameters live in {@link FlatState}'s flat tensors (the
 * blocks' parameters are views of them); the gradients come from {@link FlatGradients}.
 */
public abstract class ParameterUpdater implements AutoCloseable {
  final ReplicaSet replicas;
  final GradientBuckets buckets;
  final FlatState flat;
  final FlatGradients grads;
  final Optimizer optimizer;
  final StepLedger ledger;

  ParameterUpdater(
      ReplicaSet replicas,
      GradientBuckets buckets,
      FlatState flat,
      FlatGradients grads,
      Optimizer optimizer,
      StepLedger ledger) {
    this.replicas = replicas;
    this.buckets = buckets;
    this.flat = flat;
    this.grads = grads;
    this.optimizer = optimizer;
    this.ledger = ledger;
  }

  /** Creates the updater of {@code placement} (AUTO must be resolved by the caller). */
  static ParameterUpdater create(
      OptimizerPlacement placement,
      ReplicaSet replicas,
      GradientBuckets buckets,
      FlatState flat,
      FlatGradients grads,
      Optimizer optimizer,
      StepLedger ledger,
      int threads) {
    switch (placement) {
      case HOST:
        return new HostUpdater(replicas, buckets, flat, grads, optimizer, ledger, threads);
      case DEVICE:
        return new DeviceUpdater(replicas, buckets, flat, grads, optimizer, ledger);
      default:
        throw new IllegalArgumentException("Unresolved optimizer placement " + placement);
    }
  }

  /** Starts an optimizer step (before the first {@link #apply}). */
  final void beginStep() {
    optimizer.beginStep();
  }

  /**
   * Applies the optimizer to the parameters of gradient bucket {@code b}; {@code reduced}: its
   * gradient was all-reduced in the arena (else it is the local one). Runs with gradient recording
   * off.
   */
  abstract void apply(int b, boolean reduced, float lr);

  /** Writes the statistics bucket (reduced) into every replica; ends the step. */
  abstract void finishStep();

  /** Every parameter's current values (copies), in the model's parameter order. */
  abstract float[][] values();

  /** A copy of optimizer slot {@code s} of trainable parameter {@code j}. */
  abstract float[] slot(int s, int j);

  /**
   * Restores the state: {@code values} of every parameter, {@code slots[s][j]} of each trainable
   * one (null: zero, a fresh start), and the optimizer's step count.
   */
  abstract void restore(float[][] values, float[][][] slots, long steps);

  @Override
  public void close() {}
}
