package dev.sparktrainer.cli;

import java.io.IOException;
import java.io.OutputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;

/** Writing the command line's output files, and quieting loggers. */
final class Outputs {
  private Outputs() {}

  /**
   * Creates (overwrites) a file on any Hadoop FileSystem; on the local one without Hadoop's hidden
   * {@code .crc} side files, which only clutter an output directory people look at.
   */
  static OutputStream create(Path p, Configuration conf) throws IOException {
    return fileSystem(p, conf).create(p, true);
  }

  /** The file system of {@code p}; the local one without {@code .crc} side files. */
  static FileSystem fileSystem(Path p, Configuration conf) throws IOException {
    FileSystem fs = p.getFileSystem(conf);
    if (fs instanceof LocalFileSystem) {
      fs = ((LocalFileSystem) fs).getRawFileSystem();
    }
    return fs;
  }

  /** Raises a logger to WARN when log4j 2 is the backend (Spark's); otherwise leaves it alone. */
  static void quiet(String logger) {
    try {
      Class<?> configurator = Class.forName("org.apache.logging.log4j.core.config.Configurator");
      Class<?> level = Class.forName("org.apache.logging.log4j.Level");
      configurator
          .getMethod("setLevel", String.class, level)
          .invoke(null, logger, level.getField("WARN").get(null));
    } catch (ReflectiveOperationException | LinkageError e) {
      // another logging backend: its configuration decides
    }
  }
}
