package dev.sparktrainer.data;

/**
 * One example. Decoded: all feature values concatenated in the spec's column order, and the label.
 * Or not decoded yet ({@link #raw} set): the serialized example where a reader read it, to be
 * decoded straight into its batch (no shuffle buffer: the copy into a record array would be one
 * copy too many).
 */
final class Record {
  final float[] features;
  final double label;

  /**
   * The example's random draws for the built-in augmentation on the device (image transfer uint8),
   * packed by the device package's {@code DeviceImages}; 0 when there are none.
   */
  final long draws;

  /** The reader's buffer holding the serialized example, or null for a decoded record. */
  final ReadBuffers.Handed raw;

  final int rawOffset;
  final int rawLength;

  /** Where the example's record starts in its file (for errors). */
  final long fileOffset;

  Record(float[] features, double label) {
    this(features, label, 0);
  }

  Record(float[] features, double label, long draws) {
    this.features = features;
    this.label = label;
    this.draws = draws;
    this.raw = null;
    this.rawOffset = 0;
    this.rawLength = 0;
    this.fileOffset = -1;
  }

  Record(ReadBuffers.Handed raw, int offset, int length, long fileOffset) {
    this.features = null;
    this.label = 0;
    this.draws = 0;
    this.raw = raw;
    this.rawOffset = offset;
    this.rawLength = length;
    this.fileOffset = fileOffset;
  }
}
