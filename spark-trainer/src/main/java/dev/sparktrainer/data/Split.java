package dev.sparktrainer.data;

import java.io.Serializable;
import org.apache.hadoop.fs.EtagSource;
import org.apache.hadoop.fs.FileStatus;

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
  private final String fileVersion;

  Split(int index, String path, long start, long length, long records, String fileVersion) {
    this.index = index;
    this.path = path;
    this.start = start;
    this.length = length;
    this.records = records;
    this.fileVersion = fileVersion;
  }

  /**
   * What identifies the content of {@code file} as listed: its length, modification time and, where
   * the store has one (S3A, ABFS: {@link EtagSource}), its etag — what a cache of its records is
   * keyed by, so that a file rewritten in place is never served from a stale cache.
   */
  static String fileVersion(FileStatus file) {
    String etag = file instanceof EtagSource e ? e.getEtag() : null;
    return "len="
        + file.getLen()
        + " mtime="
        + file.getModificationTime()
        + (etag == null || etag.isEmpty() ? "" : " etag=" + etag);
  }

  /** The listed version of the split's file ({@link #fileVersion(FileStatus)}). */
  public String fileVersion() {
    return fileVersion;
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
    return new Split(newIndex, path, start, length, count, fileVersion);
  }

  @Override
  public String toString() {
    return path
        + (start == 0 && length == Long.MAX_VALUE
            ? ""
            : " [" + start + ", " + (start + length) + ")")
        + " ("
        + records
        + " records)";
  }
}
