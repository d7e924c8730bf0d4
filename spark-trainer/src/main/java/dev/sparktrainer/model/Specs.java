package dev.sparktrainer.model;

import ai.djl.ndarray.types.Shape;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.Collectors;

/** Parsing and formatting helpers shared by the specs' properties forms. */
final class Specs {
  private Specs() {}

  /**
   * The per-example input shape of an image model whose image is {@code (channels, height, width)}:
   * that, or {@code (height, width, channels)} when the input is channels-last.
   */
  static Shape inputShape(long[] chw, boolean channelsLast) {
    return channelsLast ? new Shape(chw[1], chw[2], chw[0]) : new Shape(chw);
  }

  /**
   * The first block of an image model: the input viewed as {@code [B, c, h, w]}; a channels-last
   * input ({@code [B, h, w, c]}, decoded photos) is transposed to it.
   */
  static ai.djl.nn.Block imageInput(long c, long h, long w, boolean channelsLast) {
    return new ai.djl.nn.LambdaBlock(
        in ->
            new ai.djl.ndarray.NDList(
                channelsLast
                    ? in.singletonOrThrow().reshape(-1, h, w, c).transpose(0, 3, 1, 2)
                    : in.singletonOrThrow().reshape(-1, c, h, w)),
        "image");
  }

  /**
   * A saved image model's {@code inputLayout}: {@code hwc} (channels-last) or absent/{@code chw}.
   */
  static boolean channelsLast(Map<String, String> props) {
    String v = props.getOrDefault("inputLayout", "chw");
    if (!v.equals("hwc") && !v.equals("chw")) {
      throw new IllegalArgumentException("Invalid inputLayout '" + v + "': expected chw or hwc");
    }
    return v.equals("hwc");
  }

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
