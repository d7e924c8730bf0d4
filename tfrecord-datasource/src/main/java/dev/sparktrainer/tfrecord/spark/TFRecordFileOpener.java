package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * Opens a TFRecord file, or a split of it, with the data source's options (compression from the
 * option or the file name, record length limit, corrupt-record mode), and says whether a file can
 * be split under them. The opening itself is {@link TFRecordFiles#open}.
 */
final class TFRecordFileOpener {
  private TFRecordFileOpener() {}

  static TFRecordReader open(
      Path path, long start, long length, Configuration conf, TFRecordOptions options)
      throws IOException {
    return TFRecordFiles.open(
        path,
        start,
        length,
        conf,
        options.compressionOf(path.getName()),
        options.maxRecordLength(),
        options.mode());
  }

  static boolean isSplittable(Path path, TFRecordOptions options) {
    return options.compressionOf(path.getName()).isSplittable();
  }
}
