package dev.sparktrainer.data;

/** One decoded example: all feature values concatenated in the spec's column order, and the label. */
final class Record {
  final float[] features;
  final double label;

  Record(float[] features, double label) {
    this.features = features;
    this.label = label;
  }
}
