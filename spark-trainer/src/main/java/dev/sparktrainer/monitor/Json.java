package dev.sparktrainer.monitor;

import java.util.Iterator;
import java.util.Map;

/** Minimal JSON writing for the reports (numbers, strings, maps, lists): no library needed. */
public final class Json {
  private Json() {}

  /** A finite number, or {@code null}. */
  public static String num(double v) {
    if (!Double.isFinite(v)) {
      return "null";
    }
    if (v == Math.rint(v) && Math.abs(v) < 1e15) {
      return Long.toString((long) v);
    }
    return Double.toString(v); // shortest round-trip form; "1.0E-5" is valid JSON
  }

  /** A quoted, escaped string, or {@code null}. */
  public static String quote(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder sb = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        default -> {
          if (c < 0x20) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    return sb.append('"').toString();
  }

  /** Numbers, booleans, strings, maps and iterables, recursively; anything else as its string. */
  public static String value(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof Number n) {
      return n instanceof Double || n instanceof Float ? num(n.doubleValue()) : n.toString();
    }
    if (v instanceof Boolean) {
      return v.toString();
    }
    if (v instanceof Map<?, ?> m) {
      StringBuilder sb = new StringBuilder("{");
      Iterator<? extends Map.Entry<?, ?>> it = m.entrySet().iterator();
      while (it.hasNext()) {
        Map.Entry<?, ?> e = it.next();
        sb.append(quote(String.valueOf(e.getKey()))).append(": ").append(value(e.getValue()));
        if (it.hasNext()) {
          sb.append(", ");
        }
      }
      return sb.append('}').toString();
    }
    if (v instanceof Iterable<?> list) {
      StringBuilder sb = new StringBuilder("[");
      Iterator<?> it = list.iterator();
      while (it.hasNext()) {
        sb.append(value(it.next()));
        if (it.hasNext()) {
          sb.append(", ");
        }
      }
      return sb.append(']').toString();
    }
    return quote(v.toString());
  }
}
