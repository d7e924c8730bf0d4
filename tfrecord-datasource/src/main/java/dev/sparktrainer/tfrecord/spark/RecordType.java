package dev.sparktrainer.tfrecord.spark;

/** What each TFRecord record holds (the {@code recordType} option). */
public enum RecordType {
  /** {@code tf.train.Example}: one column per feature. */
  Example,
  /**
   * {@code tf.train.SequenceExample}: context features as columns, feature lists as arrays of
   * arrays.
   */
  SequenceExample,
  /** Opaque bytes: one binary column {@code byteArray}. */
  ByteArray;

  /** The column of {@link #ByteArray} records. */
  public static final String BYTE_ARRAY_COLUMN = "byteArray";

  static RecordType parse(String value) {
    for (RecordType t : values()) {
      if (t.name().equalsIgnoreCase(value.trim())) {
        return t;
      }
    }
    throw new IllegalArgumentException(
        "Invalid "
            + TFRecordOptions.RECORD_TYPE
            + " '"
            + value
            + "': expected Example, SequenceExample or ByteArray");
  }
}
