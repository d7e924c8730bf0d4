package dev.sparktrainer.data;

import java.io.Serializable;

/**
 * What gets sharded: a whole file, or a byte range of a big uncompressed TFRecord file, with the
 * number of records it holds (counted on the driver's side when the plan is made).
 */
public final class Split implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int index;
  private final String path;
  private final long start;
  private final long length;
  private final long records;

  Split(int index, String path, long start, long length, long records) {
    this.index = index;
    this.path = path;
    this.start = start;
    this.length = length;
    this.records = records;
  }

  /** Position in the plan's canonical order (sorted paths, then offsets). */
  public int index() {
    return index;
  }

  public String path() {
    return path;
  }

  public long start() {
    return start;
  }

  /** Bytes of the range, or {@code Long.MAX_VALUE} for a whole file read as a stream. */
  public long length() {
    return length;
  }

  public long records() {
    return records;
  }

  Split withRecords(int newIndex, long count) {
    return new Split(newIndex, path, start, length, count);
  }

  @Override
  public String toString() {
    return path + (start == 0 && length == Long.MAX_VALUE ? "" : " [" + start + ", " + (start + length) + ")")
        + " (" + records + " records)";
  }
}
