package dev.sparktrainer.train.step;

/**
 * Where parameters and optimizer state live and where the update runs.
 *
 * <ul>
 *   <li>{@link #DEVICE}: on the replica's device, as tensors, updated with tensor ops there. Only
 *       the gradients go to the host (straight into the ring's buckets), and the reduced gradients
 *       come back: on a GPU the state never crosses the PCIe bus.
 *   <li>{@link #HOST}: in Java arrays on the host, updated by the optimizer's Java code spread over
 *       the task's CPUs; the new values are uploaded into every replica after the step.
 *   <li>{@link #AUTO}: {@code DEVICE} on GPUs; on CPU the faster of the two there (measured by
 *       {@code bin/bench-scaling}, see the trainer's documentation).
 * </ul>
 *
 * Both give bit-identical parameters on every replica and resume bit-identically from their own
 * checkpoints; they differ from each other by float rounding only.
 */
public enum OptimizerPlacement {
  AUTO,
  DEVICE,
  HOST;

  /** Parses a name case-insensitively; the error names the value and the allowed ones. */
  public static OptimizerPlacement parse(String option, String value) {
    for (OptimizerPlacement p : values()) {
      if (p.name().equalsIgnoreCase(value == null ? "" : value.trim())) {
        return p;
      }
    }
    throw new IllegalArgumentException(
        "Invalid " + option + " '" + value + "': expected auto, device or host");
  }
}
