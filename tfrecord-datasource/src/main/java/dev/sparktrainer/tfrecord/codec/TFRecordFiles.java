package dev.sparktrainer.tfrecord.codec;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.ZipException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Opens TFRecord files, or byte ranges of them, on any Hadoop FileSystem: the one place that knows
 * how.
 */
public final class TFRecordFiles {
  private TFRecordFiles() {}

  /**
   * Opens the records of {@code [start, start+length)} of a file ({@code length = Long.MAX_VALUE}
   * for the rest of the file). Compressed files cannot be split: {@code start} must be 0.
   *
   * @throws TFRecordCorruptException if a compressed file's header is unreadable
   */
  public static TFRecordReader open(
      Path path,
      long start,
      long length,
      Configuration conf,
      TFRecordCompression compression,
      int maxRecordLength,
      CorruptRecordPolicy policy)
      throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    // A small stream buffer: the reader asks for large blocks, which then bypass it (one copy
    // less).
    FSDataInputStream raw = fs.open(path, 1 << 16);
    try {
      InputStream in;
      long end;
      if (compression.isSplittable()) {
        if (start > 0) {
          raw.seek(start);
        }
        in = raw;
        end = length == Long.MAX_VALUE ? Long.MAX_VALUE : start + length;
      } else {
        if (start > 0) {
          throw new IllegalArgumentException(
              "Split of compressed file "
                  + path
                  + " at "
                  + start
                  + ": compressed files are not splittable");
        }
        in = compression.decompress(raw);
        end = Long.MAX_VALUE;
      }
      return new TFRecordReader(in, path.toString(), start, end, maxRecordLength, policy);
    } catch (IOException | RuntimeException e) {
      raw.close();
      if (e instanceof EOFException || e instanceof ZipException) {
        throw new TFRecordCorruptException(
            path.toString(), 0, "unreadable " + compression + " header: " + e.getMessage(), e);
      }
      throw e;
    }
  }
}
