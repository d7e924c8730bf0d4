package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.IOException;
import java.io.InputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** Opening TFRecord files on any Hadoop FileSystem, the one place that knows how. */
final class TFRecordFiles {
  private TFRecordFiles() {}

  /**
   * Opens the records of {@code [start, start+length)} of a file. Compressed files are read whole
   * (they are never split: Spark asks {@code isSplitable} first).
   */
  static TFRecordReader open(
      Path path, long start, long length, Configuration conf, TFRecordOptions options)
      throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    TFRecordCompression compression = options.compressionOf(path.getName());
    FSDataInputStream raw = fs.open(path, 1 << 20);
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
          throw new IllegalStateException(
              "Split of compressed file " + path + " at " + start + ": compressed files are not splittable");
        }
        in = compression.decompress(raw);
        end = Long.MAX_VALUE;
      }
      return new TFRecordReader(
          in, path.toString(), start, end, options.maxRecordLength(), options.mode());
    } catch (IOException | RuntimeException e) {
      raw.close();
      if (e instanceof java.io.EOFException || e instanceof java.util.zip.ZipException) {
        throw new dev.sparktrainer.tfrecord.codec.TFRecordCorruptException(
            path.toString(), 0, "unreadable " + compression + " header: " + e.getMessage(), e);
      }
      throw e;
    }
  }

  static boolean isSplittable(Path path, TFRecordOptions options) {
    return options.compressionOf(path.getName()).isSplittable();
  }
}
