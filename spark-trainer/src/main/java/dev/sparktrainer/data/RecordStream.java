package dev.sparktrainer.data;

import java.io.Closeable;
import java.io.IOException;

/** The decoded records a worker owns in one split, in file order. */
interface RecordStream extends Closeable {
  /** The next record, or null at the end. Errors name the file (and offset where known). */
  Record next() throws IOException;

  /**
   * Where the record {@link #next} returned last starts in its file, or -1 if the stream cannot
   * tell.
   */
  default long recordOffset() {
    return -1;
  }
}
