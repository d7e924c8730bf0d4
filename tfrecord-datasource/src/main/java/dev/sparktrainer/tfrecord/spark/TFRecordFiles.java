package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/** The data source's options applied to {@link dev.sparktrainer.tfrecord.codec.TFRecordFiles}. */
final class TFRecordFiles {
  private TFRecordFiles() {}

  static TFRecordReader open(
      Path path, long start, long length, Configuration conf, TFRecordOptions options)
      throws IOException {
    return dev.sparktrainer.tfrecord.codec.TFRecordFiles.open(
        path, start, length, conf, options.compressionOf(path.getName()),
        options.maxRecordLength(), options.mode());
  }

  static boolean isSplittable(Path path, TFRecordOptions options) {
    return options.compressionOf(path.getName()).isSplittable();
  }
}
