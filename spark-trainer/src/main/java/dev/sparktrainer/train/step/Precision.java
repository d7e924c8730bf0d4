package dev.sparktrainer.train.step;

/**
 * The arithmetic of the training step's forward and backward passes.
 *
 * <ul>
 *   <li>{@link #FP32}: everything in float32 (the default).
 *   <li>{@link #BF16}: mixed precision. Forward and backward run on a bfloat16 copy of the
 *       parameters, refreshed from the float32 master weights before each step; gradients are cast
 *       back into the float32 buckets, where the optimizer and its state stay. Normalization
 *       layers' scale and shift, batch-norm running statistics and the loss stay float32.
 *       Checkpoints, validation and the trained model use the float32 master weights, so a run
 *       resumes in either precision.
 * </ul>
 */
public enum Precision {
  FP32,
  BF16;

  /**
   * Parses a name case-insensitively; the error names the option, the value and the allowed ones.
   */
  public static Precision parse(String option, String value) {
    for (Precision p : values()) {
      if (p.name().equalsIgnoreCase(value == null ? "" : value.trim())) {
        return p;
      }
    }
    throw new IllegalArgumentException(
        "Invalid " + option + " '" + value + "': expected fp32 or bf16");
  }
}
