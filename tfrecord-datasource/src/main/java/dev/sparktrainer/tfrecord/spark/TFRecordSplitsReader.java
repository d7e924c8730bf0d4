package dev.sparktrainer.tfrecord.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.Iterator;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the file splits of one input partition one after another and reports the partition's
 * dropped-records task metric. (Spark's own FilePartitionReader changed its constructor between
 * Spark lines and reports no custom metrics, hence this small equivalent.)
 */
final class TFRecordSplitsReader<S, T> implements PartitionReader<T> {
  private static final Logger LOG = LoggerFactory.getLogger(TFRecordSplitsReader.class);

  /** Opens one split. */
  interface Opener<S, T> {
    PartitionReader<T> open(S split) throws IOException;
  }

  private final Iterator<S> splits;
  private final Opener<S, T> opener;
  private final Function<S, String> describe;
  private final boolean ignoreMissingFiles;
  private final AtomicLong dropped;
  private PartitionReader<T> current;
  private S currentSplit;

  TFRecordSplitsReader(
      Iterator<S> splits,
      Opener<S, T> opener,
      Function<S, String> describe,
      boolean ignoreMissingFiles,
      AtomicLong dropped) {
    this.splits = splits;
    this.opener = opener;
    this.describe = describe;
    this.ignoreMissingFiles = ignoreMissingFiles;
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
        try {
          current = opener.open(currentSplit);
        } catch (FileNotFoundException e) {
          if (!ignoreMissingFiles) {
            throw e;
          }
          LOG.warn("Skipped missing file {} (ignoreMissingFiles)", describe.apply(currentSplit));
          continue;
        }
      }
      if (current.next()) {
        return true;
      }
      PartitionReader<T> done = current;
      current = null;
      done.close();
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
    if (current != null) {
      PartitionReader<T> c = current;
      current = null;
      c.close();
    }
  }
}
