package dev.sparktrainer.tfrecord.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.Iterator;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hdfs.BlockMissingException;
import org.apache.hadoop.security.AccessControlException;
import org.apache.spark.rdd.InputFileBlockHolder;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the file splits of one input partition one after another and reports the partition's
 * dropped-records task metric. It stands in for Spark's {@code FilePartitionReader} (whose
 * constructor changed between Spark lines and which reports no custom metrics) and behaves as Spark
 * 4.1's does:
 *
 * <ul>
 *   <li>{@code input_file_name()}: each split's file, start and length are set in {@link
 *       InputFileBlockHolder} before it is opened, and unset on {@link #close()}.
 *   <li>{@code ignoreMissingFiles}: a {@link FileNotFoundException} while opening a split skips it
 *       with a warning.
 *   <li>{@code ignoreCorruptFiles}: any other {@link IOException} or {@link RuntimeException} while
 *       opening or reading a split (a {@code FileNotFoundException} too, when missing files are not
 *       ignored) skips the rest of that split with a warning; the rows read before it are kept.
 *       Permission errors and missing HDFS blocks are never skipped.
 * </ul>
 */
final class TFRecordSplitsReader<T> implements PartitionReader<T> {
  private static final Logger LOG = LoggerFactory.getLogger(TFRecordSplitsReader.class);

  /** Opens one split. */
  interface Opener<T> {
    PartitionReader<T> open(PartitionedFile split) throws IOException;
  }

  private final Iterator<PartitionedFile> splits;
  private final Opener<T> opener;
  private final boolean ignoreMissingFiles;
  private final boolean ignoreCorruptFiles;
  private final AtomicLong dropped;
  private PartitionReader<T> current;
  private PartitionedFile currentSplit;

  TFRecordSplitsReader(
      Iterator<PartitionedFile> splits,
      Opener<T> opener,
      boolean ignoreMissingFiles,
      boolean ignoreCorruptFiles,
      AtomicLong dropped) {
    this.splits = splits;
    this.opener = opener;
    this.ignoreMissingFiles = ignoreMissingFiles;
    this.ignoreCorruptFiles = ignoreCorruptFiles;
    this.dropped = dropped;
  }

  @Override
  public boolean next() throws IOException {
    while (true) {
      if (current == null) {
        if (!splits.hasNext()) {
          return false;
        }
        currentSplit = splits.next();
        InputFileBlockHolder.set(
            currentSplit.urlEncodedPath(), currentSplit.start(), currentSplit.length());
        try {
          current = opener.open(currentSplit);
        } catch (FileNotFoundException e) {
          if (ignoreMissingFiles) {
            LOG.warn("Skipped missing file {} (ignoreMissingFiles)", currentSplit, e);
            continue;
          }
          skipOrThrow(e);
          continue;
        } catch (IOException | RuntimeException e) {
          skipOrThrow(e);
          continue;
        }
      }
      boolean more;
      try {
        more = current.next();
      } catch (IOException | RuntimeException e) {
        closeCurrent(e);
        skipOrThrow(e);
        continue;
      }
      if (more) {
        return true;
      }
      PartitionReader<T> done = current;
      current = null;
      done.close();
    }
  }

  /** Skips the rest of the current split under ignoreCorruptFiles, else rethrows. */
  private <E extends Exception> void skipOrThrow(E e) throws IOException {
    if (ignoreCorruptFiles
        && !(e instanceof AccessControlException)
        && !(e instanceof BlockMissingException)) {
      LOG.warn(
          "Skipped the rest of the content in the corrupted file {} (ignoreCorruptFiles)",
          currentSplit,
          e);
      return;
    }
    if (e instanceof IOException) {
      throw (IOException) e;
    }
    throw (RuntimeException) e;
  }

  /** Closes the reader of a split that failed, keeping the failure as the primary error. */
  private void closeCurrent(Exception failure) {
    PartitionReader<T> c = current;
    current = null;
    if (c != null) {
      try {
        c.close();
      } catch (IOException | RuntimeException e) {
        failure.addSuppressed(e);
      }
    }
  }

  @Override
  public T get() {
    return current.get();
  }

  @Override
  public CustomTaskMetric[] currentMetricsValues() {
    return new CustomTaskMetric[] {DroppedRecordsMetric.value(dropped.get())};
  }

  @Override
  public void close() throws IOException {
    try {
      if (current != null) {
        PartitionReader<T> c = current;
        current = null;
        c.close();
      }
    } finally {
      InputFileBlockHolder.unset();
    }
  }
}
