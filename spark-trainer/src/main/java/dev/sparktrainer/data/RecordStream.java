package dev.sparktrainer.data;

import java.io.Closeable;
import java.io.IOException;

/** The decoded records a worker owns in one split, in file order. */
interface RecordStream extends Closeable {
  /** The next record, or null at the end. Errors name the file (and offset where known). */
  Record next() throws IOException;
}
