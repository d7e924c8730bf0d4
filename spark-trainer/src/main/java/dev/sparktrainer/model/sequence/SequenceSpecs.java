package dev.sparktrainer.model.sequence;

import ai.djl.ndarray.types.Shape;
import java.util.Map;

/** What the sequence models' specs share: their input shapes and properties helpers. */
final class SequenceSpecs {
  private SequenceSpecs() {}

  /** The per-example shapes of the two tensors of a sequence column: ids and mask, {@code [L]}. */
  static Shape[] inputShapes(int maxLength) {
    return new Shape[] {new Shape(maxLength), new Shape(maxLength)};
  }

  static String required(Map<String, String> props, String key) {
    String v = props.get(key);
    if (v == null || v.isBlank()) {
      throw new IllegalArgumentException(
          "Invalid model spec: missing key '" + key + "' in " + props);
    }
    return v.trim();
  }

  static int requiredInt(Map<String, String> props, String key) {
    return Integer.parseInt(required(props, key));
  }

  static void positive(String what, long value) {
    if (value <= 0) {
      throw new IllegalArgumentException("Invalid " + what + " " + value + ": expected > 0");
    }
  }

  static void dropout(float dropout) {
    if (!(dropout >= 0 && dropout < 1)) {
      throw new IllegalArgumentException(
          "Invalid dropout " + dropout + ": expected 0 <= dropout < 1");
    }
  }
}
