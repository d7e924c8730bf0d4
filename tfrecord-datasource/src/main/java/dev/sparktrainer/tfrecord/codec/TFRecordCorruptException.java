package dev.sparktrainer.tfrecord.codec;

import java.io.IOException;

/**
 * A TFRecord file that is not what it should be: bad CRC, impossible length, truncated data or an
 * undecodable record. The message names the file, the byte offset of the record (in the
 * uncompressed stream) and what failed.
 */
public class TFRecordCorruptException extends IOException {
  private static final long serialVersionUID = 1L;
  private final String file;
  private final long offset;
  private final String what;

  public TFRecordCorruptException(String file, long offset, String what) {
    this(file, offset, what, null);
  }

  public TFRecordCorruptException(String file, long offset, String what, Throwable cause) {
    super("Corrupt TFRecord file " + file + " at byte offset " + offset + ": " + what, cause);
    this.file = file;
    this.offset = offset;
    this.what = what;
  }

  public String file() {
    return file;
  }

  public long offset() {
    return offset;
  }

  /** What is wrong at {@link #offset()}, without the file and offset. */
  public String what() {
    return what;
  }
}
