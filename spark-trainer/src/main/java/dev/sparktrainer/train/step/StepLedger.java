package dev.sparktrainer.train.step;

/**
 * What a training step pays an accelerator for, counted at the project's own call sites into DJL's
 * NDArray and engine API: engine calls by purpose, bytes crossing between a replica's device and
 * the host arena, and device allocations the step makes. The model's own forward and backward
 * operations are not counted (they are the model's, the same in any framework); everything the step
 * adds around them is.
 *
 * <p>On a CPU the counts are those the same code pays on a GPU: the crossings are the copies
 * between the replicas' tensors and the all-reduce arena, and an engine call costs a JNI crossing
 * and, on a GPU, a kernel launch. Multiplied by a GPU's per-call cost and copy rates they estimate
 * the step there ({@code docs/trainer.md}).
 *
 * <p>One ledger per {@link TrainStep}, written by the training thread only; {@link #snapshot} is
 * read by the same thread (benchmarks, tests) between steps.
 */
public final class StepLedger {
  /** The optimizer's arithmetic (per bucket on flat tensors). */
  long optimizerCalls;

  /** New values written into the blocks' parameters (none where they are views of flat state). */
  long writebackCalls;

  /** Gathering gradients into flat buckets, zeroing the engine's, bringing reduced ones back. */
  long gradientCalls;

  /** Everything else the step adds: batch slicing and moves, statistics, gradient-mode toggles. */
  long otherCalls;

  long bytesToDevice;
  long bytesToHost;

  /** Uploads that started from Java heap memory (the slow path; zero is the target). */
  long heapUploads;

  long deviceAllocations;

  /** Optimizer steps counted (the divisor of the per-step figures). */
  long steps;

  /** An immutable copy of the totals so far. */
  public Totals snapshot() {
    return new Totals(
        optimizerCalls,
        writebackCalls,
        gradientCalls,
        otherCalls,
        bytesToDevice,
        bytesToHost,
        heapUploads,
        deviceAllocations,
        steps);
  }

  /** Totals at one moment; {@link #minus} gives what happened between two snapshots. */
  public record Totals(
      long optimizerCalls,
      long writebackCalls,
      long gradientCalls,
      long otherCalls,
      long bytesToDevice,
      long bytesToHost,
      long heapUploads,
      long deviceAllocations,
      long steps) {

    public Totals minus(Totals before) {
      return new Totals(
          optimizerCalls - before.optimizerCalls,
          writebackCalls - before.writebackCalls,
          gradientCalls - before.gradientCalls,
          otherCalls - before.otherCalls,
          bytesToDevice - before.bytesToDevice,
          bytesToHost - before.bytesToHost,
          heapUploads - before.heapUploads,
          deviceAllocations - before.deviceAllocations,
          steps - before.steps);
    }

    /** Every engine call the step added. */
    long engineCalls() {
      return optimizerCalls + writebackCalls + gradientCalls + otherCalls;
    }

    /** {@code value} per optimizer step (0 before the first). */
    public double perStep(long value) {
      return steps == 0 ? 0 : (double) value / steps;
    }
  }
}
