package dev.sparktrainer.checkpoint;

import java.util.Objects;

/**
 * One named float array of the training state: a parameter, an optimizer slot.
 *
 * <p>The name is an opaque label (stored as UTF-8) that the trainer uses to match arrays to its
 * model on restore. An array holds at most {@code Integer.MAX_VALUE} floats, the limit of a Java
 * array (about 8 GiB); a checkpoint holds any number of them, with no limit on its total size.
 *
 * <p>Like any record holding an array, equality is that of the array's identity, not its contents.
 *
 * @param name the name, not null
 * @param values the values, not null (may be empty); not copied
 */
public record StateArray(String name, float[] values) {
  /** Checks that neither component is null. */
  public StateArray {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(values, "values");
  }

  @Override
  public String toString() {
    return "StateArray[" + name + ", " + values.length + " floats]";
  }
}
