package dev.sparktrainer.tfrecord.codec;

import java.util.Locale;

/** What a reader does with corrupt input (Spark's {@code mode} option). */
public enum CorruptRecordPolicy {
  /** Fail at the first corrupt record, naming file, byte offset and what failed (the default). */
  FAILFAST,
  /** Skip the corrupt record (or the unreadable rest of the file) and count what was dropped. */
  DROPMALFORMED;

  /**
   * Parses the {@code mode} option; Spark's PERMISSIVE is not offered (no corrupt-record column).
   */
  public static CorruptRecordPolicy parse(String option, String value) {
    if (value == null || value.isBlank()) {
      return FAILFAST;
    }
    try {
      return valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "Invalid " + option + " '" + value + "': expected FAILFAST or DROPMALFORMED");
    }
  }
}
