package dev.sparktrainer.train.metrics;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.UncheckedIOException;

/**
 * Jackson (the version Spark ships) for the history's JSON: compact objects, NaN and infinity as
 * null.
 */
final class JsonText {
  static final ObjectMapper MAPPER = new ObjectMapper();

  private JsonText() {}

  /** A double, or {@code null} where JSON has no number for it. */
  static void put(ObjectNode o, String field, double v) {
    if (Double.isFinite(v)) {
      o.put(field, v);
    } else {
      o.putNull(field);
    }
  }

  static String write(JsonNode n) {
    try {
      return MAPPER.writeValueAsString(n);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e); // a tree of plain nodes always serializes
    }
  }
}
