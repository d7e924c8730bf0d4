package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one split's reader does with bad records, shared by the row and the columnar reader: under
 * FAILFAST a record that does not decode is an error naming the file and offset; under
 * DROPMALFORMED it is counted — with the framing errors the {@link TFRecordReader} skipped — into
 * the task metric as it happens, and summed up in one log line when the split is closed.
 */
final class MalformedRecords {
  private static final Logger LOG = LoggerFactory.getLogger(MalformedRecords.class);

  private final TFRecordReader reader;
  private final TFRecordOptions options;
  private final AtomicLong metric;
  private final String split;
  private long malformed;
  private long reported;
  private String firstMalformed;

  MalformedRecords(
      TFRecordReader reader, TFRecordOptions options, AtomicLong metric, String split) {
    this.reader = reader;
    this.options = options;
    this.metric = metric;
    this.split = split;
  }

  /** The current record did not decode: throws under FAILFAST, counts under DROPMALFORMED. */
  void onMalformed(RuntimeException e) throws TFRecordCorruptException {
    String what = "not a valid " + options.recordType() + " for the schema: " + e.getMessage();
    if (options.mode() == CorruptRecordPolicy.FAILFAST) {
      throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), what, e);
    }
    if (malformed++ == 0) {
      firstMalformed =
          "file " + reader.file() + " at byte offset " + reader.recordOffset() + ": " + what;
    }
  }

  /** Adds what was dropped since the last call to the task metric. */
  void report() {
    long total = reader.droppedRecords() + malformed;
    if (total > reported) {
      metric.addAndGet(total - reported);
      reported = total;
    }
  }

  /** Reports, and logs the split's total if anything was dropped. */
  void close() {
    report();
    if (reported > 0) {
      LOG.warn(
          "DROPMALFORMED: dropped {} record(s) ({} bytes of damaged framing) from {}; first: {}",
          reported,
          reader.droppedBytes(),
          split,
          reader.droppedRecords() > 0 ? reader.lastDropReason() : firstMalformed);
    }
  }
}
