package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the rows of one file split: framing and CRCs by {@link TFRecordReader}, records decoded by
 * {@link TFRecordRowDecoder}. Under DROPMALFORMED, what was dropped is added to {@code dropped}
 * (the task metric) and logged when the split is closed.
 */
final class TFRecordPartitionReader implements PartitionReader<InternalRow> {
  private static final Logger LOG = LoggerFactory.getLogger(TFRecordPartitionReader.class);

  private final TFRecordReader reader;
  private final TFRecordRowDecoder decoder;
  private final TFRecordOptions options;
  private final AtomicLong dropped;
  private final String split;
  private long malformed;
  private long reported; // dropped records already added to the task metric
  private String firstMalformed;
  private InternalRow row;

  TFRecordPartitionReader(
      Path path,
      long start,
      long length,
      Configuration conf,
      StructType required,
      TFRecordOptions options,
      AtomicLong dropped)
      throws IOException {
    this.options = options;
    this.dropped = dropped;
    this.split = path + " [" + start + ", " + (start + length) + ")";
    this.decoder = new TFRecordRowDecoder(required, options.recordType());
    this.reader = TFRecordFiles.open(path, start, length, conf, options);
  }

  @Override
  public boolean next() throws IOException {
    try {
      return advance();
    } finally {
      long total = droppedSoFar();
      if (total > reported) {
        dropped.addAndGet(total - reported);
        reported = total;
      }
    }
  }

  private boolean advance() throws IOException {
    while (reader.next()) {
      try {
        row = decoder.decode(reader.buffer(), reader.dataOffset(), reader.dataLength());
        return true;
      } catch (MalformedRecordException | IndexOutOfBoundsException e) {
        String what = "not a valid " + options.recordType() + " for the schema: " + e.getMessage();
        if (options.mode() == CorruptRecordPolicy.FAILFAST) {
          throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), what, e);
        }
        if (malformed++ == 0) {
          firstMalformed = "file " + reader.file() + " at byte offset " + reader.recordOffset() + ": " + what;
        }
      }
    }
    return false;
  }

  @Override
  public InternalRow get() {
    return row;
  }

  /** Records dropped so far in this split (corrupt framing and malformed records). */
  long droppedSoFar() {
    return reader.droppedRecords() + malformed;
  }

  @Override
  public void close() throws IOException {
    long total = droppedSoFar();
    if (total > reported) {
      dropped.addAndGet(total - reported);
      reported = total;
    }
    if (total > 0) {
      LOG.warn(
          "DROPMALFORMED: dropped {} record(s) ({} bytes of damaged framing) from {}; first: {}",
          total,
          reader.droppedBytes(),
          split,
          reader.droppedRecords() > 0 ? reader.lastDropReason() : firstMalformed);
    }
    reader.close();
  }
}
