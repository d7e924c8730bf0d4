package dev.sparktrainer.monitor;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.PrettyPrinter;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.Map;

/**
 * JSON text for the reports (metrics.json, evaluate's output), written by Jackson — the version
 * Spark ships — from plain values: numbers, booleans, strings, maps (in their order) and iterables.
 * Numbers as the reports have always had them: a double that is a whole number is written without a
 * fraction ({@code 3}, not {@code 3.0}), and NaN or infinity, which JSON lacks, as {@code null}.
 * The layout is {@code "key": value} with {@code ", "} between items; {@link #report} breaks lines
 * at the top level and between the elements of top-level arrays (one epoch per line).
 */
public final class Json {
  private static final JsonFactory FACTORY = new JsonFactory();

  private Json() {}

  /** A finite number, or {@code null}. */
  public static String num(double v) {
    return value(v);
  }

  /** A quoted, escaped string, or {@code null}. */
  public static String quote(String s) {
    return value(s);
  }

  /**
   * Numbers, booleans, strings, maps and iterables, recursively, on one line; anything else as its
   * string.
   */
  public static String value(Object v) {
    return write(v, new Layout(0));
  }

  /**
   * {@code v} with a line per top-level entry and per element of a top-level array, and a final
   * newline.
   */
  public static String report(Object v) {
    return write(v, new Layout(2)) + "\n";
  }

  private static String write(Object v, PrettyPrinter layout) {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      g.setPrettyPrinter(layout);
      write(g, v);
    } catch (IOException e) {
      throw new UncheckedIOException(e); // a StringWriter does not fail
    }
    return out.toString();
  }

  private static void write(JsonGenerator g, Object v) throws IOException {
    if (v == null) {
      g.writeNull();
    } else if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();
      if (!Double.isFinite(d)) {
        g.writeNull();
      } else if (d == Math.rint(d) && Math.abs(d) < 1e15) {
        g.writeNumber((long) d);
      } else {
        g.writeNumber(d);
      }
    } else if (v instanceof Long
        || v instanceof Integer
        || v instanceof Short
        || v instanceof Byte) {
      g.writeNumber(((Number) v).longValue());
    } else if (v instanceof Number) {
      g.writeNumber(v.toString());
    } else if (v instanceof Boolean) {
      g.writeBoolean((Boolean) v);
    } else if (v instanceof Map<?, ?> m) {
      g.writeStartObject();
      for (Map.Entry<?, ?> e : m.entrySet()) {
        g.writeFieldName(String.valueOf(e.getKey()));
        write(g, e.getValue());
      }
      g.writeEndObject();
    } else if (v instanceof Iterable<?> list) {
      g.writeStartArray();
      for (Object o : list) {
        write(g, o);
      }
      g.writeEndArray();
    } else {
      g.writeString(v.toString());
    }
  }

  /**
   * {@code "key": value} and {@code ", "} separators; with {@code broken} 2, the top-level object
   * and the arrays directly in it put each entry on its own line, indented two spaces a level.
   */
  private static final class Layout implements PrettyPrinter {
    private final int broken;
    private int depth;

    Layout(int broken) {
      this.broken = broken;
    }

    /** Whether the container being written puts its entries on their own lines. */
    private boolean breaks() {
      // the top-level object, and arrays directly in it
      return depth > 0
          && depth < inArray.length
          && (depth < broken || depth == broken && inArray[depth]);
    }

    private final boolean[] inArray = new boolean[64];

    private void enter(boolean array) {
      depth++;
      if (depth < inArray.length) {
        inArray[depth] = array;
      }
    }

    private void newline(JsonGenerator g, int level) throws IOException {
      g.writeRaw('\n');
      for (int i = 0; i < level; i++) {
        g.writeRaw("  ");
      }
    }

    @Override
    public void writeRootValueSeparator(JsonGenerator g) throws IOException {
      g.writeRaw(' ');
    }

    @Override
    public void writeStartObject(JsonGenerator g) throws IOException {
      g.writeRaw('{');
      enter(false);
    }

    @Override
    public void beforeObjectEntries(JsonGenerator g) throws IOException {
      if (breaks()) {
        newline(g, depth);
      }
    }

    @Override
    public void writeObjectFieldValueSeparator(JsonGenerator g) throws IOException {
      g.writeRaw(": ");
    }

    @Override
    public void writeObjectEntrySeparator(JsonGenerator g) throws IOException {
      g.writeRaw(',');
      if (breaks()) {
        newline(g, depth);
      } else {
        g.writeRaw(' ');
      }
    }

    @Override
    public void writeEndObject(JsonGenerator g, int entries) throws IOException {
      if (breaks() && entries > 0) {
        newline(g, depth - 1);
      }
      depth--;
      g.writeRaw('}');
    }

    @Override
    public void writeStartArray(JsonGenerator g) throws IOException {
      g.writeRaw('[');
      enter(true);
    }

    @Override
    public void beforeArrayValues(JsonGenerator g) throws IOException {
      if (breaks()) {
        newline(g, depth);
      }
    }

    @Override
    public void writeArrayValueSeparator(JsonGenerator g) throws IOException {
      g.writeRaw(',');
      if (breaks()) {
        newline(g, depth);
      } else {
        g.writeRaw(' ');
      }
    }

    @Override
    public void writeEndArray(JsonGenerator g, int values) throws IOException {
      if (breaks() && values > 0) {
        newline(g, depth - 1);
      }
      depth--;
      g.writeRaw(']');
    }
  }
}
