package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;

/**
 * Reads the rows of one file split: framing and CRCs by {@link TFRecordReader}, records decoded by
 * {@link TFRecordRowDecoder}, bad records handled by {@link MalformedRecords}.
 */
final class TFRecordPartitionReader implements PartitionReader<InternalRow> {
  private final TFRecordReader reader;
  private final TFRecordRowDecoder decoder;
  private final MalformedRecords malformed;
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
    this.decoder = new TFRecordRowDecoder(required, options.recordType());
    this.reader = TFRecordFileOpener.open(path, start, length, conf, options);
    this.malformed =
        new MalformedRecords(
            reader, options, dropped, path + " [" + start + ", " + (start + length) + ")");
  }

  @Override
  public boolean next() throws IOException {
    try {
      while (reader.next()) {
        try {
          row = decoder.decode(reader.buffer(), reader.dataOffset(), reader.dataLength());
          return true;
        } catch (MalformedRecordException | IndexOutOfBoundsException e) {
          malformed.onMalformed(e);
        }
      }
      return false;
    } finally {
      malformed.report();
    }
  }

  @Override
  public InternalRow get() {
    return row;
  }

  @Override
  public void close() throws IOException {
    malformed.close();
    reader.close();
  }
}
