package dev.sparktrainer.tfrecord.example;

/** The three kinds of {@code tf.train.Feature}, numbered as their fields in feature.proto. */
public enum FeatureKind {
  BYTES(1),
  FLOAT(2),
  INT64(3);

  private final int fieldNumber;

  FeatureKind(int fieldNumber) {
    this.fieldNumber = fieldNumber;
  }

  public int fieldNumber() {
    return fieldNumber;
  }

  static FeatureKind ofField(int field) {
    switch (field) {
      case 1:
        return BYTES;
      case 2:
        return FLOAT;
      case 3:
        return INT64;
      default:
        return null;
    }
  }
}
