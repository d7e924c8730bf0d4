package dev.sparktrainer.model;

import ai.djl.ndarray.types.Shape;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.Collectors;

/** Parsing and formatting helpers shared by the specs' properties forms. */
final class Specs {
  private Specs() {}

  static String required(Map<String, String> props, String key) {
    String v = props.get(key);
    if (v == null || v.isBlank()) {
      throw new IllegalArgumentException(
          "Invalid model spec: missing key '" + key + "' in " + props);
    }
    return v.trim();
  }

  /** {@code 1x28x28;64} for shapes (1,28,28) and (64). */
  static String formatShapes(Shape[] shapes) {
    return Arrays.stream(shapes)
        .map(
            s ->
                Arrays.stream(s.getShape())
                    .mapToObj(Long::toString)
                    .collect(Collectors.joining("x")))
        .collect(Collectors.joining(";"));
  }

  static Shape[] parseShapes(String s) {
    String[] parts = s.split(";");
    Shape[] out = new Shape[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = new Shape(parseLongs(parts[i], "x"));
    }
    return out;
  }

  static long[] parseLongs(String s, String sep) {
    if (s.isBlank()) {
      return new long[0];
    }
    return Arrays.stream(s.trim().split(sep))
        .map(String::trim)
        .mapToLong(Long::parseLong)
        .toArray();
  }

  static String formatInts(int[] a) {
    return Arrays.stream(a).mapToObj(Integer::toString).collect(Collectors.joining(","));
  }

  static int[] parseInts(String s) {
    return Arrays.stream(parseLongs(s, ",")).mapToInt(Math::toIntExact).toArray();
  }

  static Shape[] toShapes(long[][] dims) {
    Shape[] out = new Shape[dims.length];
    for (int i = 0; i < dims.length; i++) {
      out[i] = new Shape(dims[i]);
    }
    return out;
  }

  static long[][] toDims(Shape[] shapes) {
    long[][] out = new long[shapes.length][];
    for (int i = 0; i < shapes.length; i++) {
      out[i] = shapes[i].getShape();
    }
    return out;
  }

  static long[][] copy(long[][] dims) {
    long[][] out = new long[dims.length][];
    for (int i = 0; i < dims.length; i++) {
      out[i] = dims[i].clone();
    }
    return out;
  }

  static void checkShapes(Shape[] shapes) {
    if (shapes == null || shapes.length == 0) {
      throw new IllegalArgumentException(
          "Invalid inputShapes: at least one feature shape is required");
    }
    for (Shape s : shapes) {
      if (s == null || s.size() <= 0) {
        throw new IllegalArgumentException(
            "Invalid input shape " + s + ": every dimension must be positive");
      }
    }
  }
}
