package dev.sparktrainer.it.fuzz;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.management.ThreadMXBean;
import dev.sparktrainer.it.faults.ScanMetrics;
import dev.sparktrainer.tfrecord.codec.Crc32c;
import dev.sparktrainer.tfrecord.codec.LittleEndian;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Bugs in tfrecord-datasource found by fuzzing and code reading, each kept as the smallest test
 * that failed before its fix.
 */
class DataSourceRegressionIT {
  @TempDir Path tmp;

  /**
   * A decimal column read from a float feature whose value is NaN or infinite: the row decoder
   * calls {@code new BigDecimal(Float.toString(v))}, which throws NumberFormatException — not a
   * MalformedRecordException — so DROPMALFORMED fails the whole job instead of dropping the record,
   * and FAILFAST reports it without the file and offset.
   */
  @Test
  void aNaNFloatReadAsADecimalIsAMalformedRecord() throws IOException {
    Path file = tmp.resolve("nan.tfrecord");
    try (OutputStream os = Files.newOutputStream(file);
        TFRecordWriter w = new TFRecordWriter(os)) {
      w.write(Examples.encodeExample(Map.of("k", Feature.ofFloats(1.5f))));
      w.write(Examples.encodeExample(Map.of("k", Feature.ofFloats(Float.NaN))));
    }
    SparkSession spark =
        SparkSession.builder()
            .master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate();
    try {
      Dataset<Row> df =
          spark
              .read()
              .format("tfrecord")
              .schema("k decimal(10,2)")
              .option("mode", "DROPMALFORMED")
              .load(file.toString());
      List<Row> rows = df.collectAsList(); // today: SparkException caused by NumberFormatException
      assertThat(rows).hasSize(1);
      assertThat(ScanMetrics.droppedMalformedRecords(df)).isEqualTo(1);
    } finally {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  /**
   * The 12-byte header of a 16-byte file claims a 200 MiB record (with a valid length CRC, under
   * the default maxRecordLength of 256 MiB): the reader allocates a 200 MiB buffer before it finds
   * the file ends (TFRecordReader.fill grows to the claimed length at once). In a 64 MiB heap that
   * is an OutOfMemoryError instead of "truncated record"; on an executor, every task reading such a
   * file holds up to 256 MiB. Growing the buffer as bytes actually arrive would bound the
   * allocation by the file's size.
   */
  @Test
  void aForgedLengthInATinyFileAllocatesNoMoreThanTheFileHolds() {
    byte[] file = new byte[16];
    LittleEndian.putLong(file, 0, 200L << 20);
    LittleEndian.putInt(file, 8, new Crc32c().maskedCrc(file, 0, 8));
    ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    long before = mx.getThreadAllocatedBytes(Thread.currentThread().getId());
    Throwable error = null;
    try (TFRecordReader r = TFRecordReader.of(new ByteArrayInputStream(file), "forged.tfrecord")) {
      r.next();
    } catch (IOException | OutOfMemoryError e) {
      error = e;
    }
    long allocated = mx.getThreadAllocatedBytes(Thread.currentThread().getId()) - before;
    assertThat(error)
        .isInstanceOf(TFRecordCorruptException.class)
        .hasMessageContaining("truncated record");
    assertThat(allocated)
        .as("bytes allocated to read a 16-byte file")
        .isLessThan(8L << 20); // today: > 200 MiB
  }

  /**
   * FeatureValues.packedFloatsAt (the input pipeline's fast path for float features) reads the
   * Feature's length varint with at most 5 bytes. A 6-byte (over-long) varint whose last byte is
   * 0x0A is taken as length + packed-list tag, and the fast path returns a float from a Feature the
   * full decoder rejects as malformed ("length-delimited field of 343597383686 bytes exceeds the 5
   * left"): the pipeline trains on a record the data source drops.
   */
  @Test
  void theFastPathAcceptsNothingTheDecoderRejects() {
    // Feature { float_list = 2 { value = 1 [packed]: 1.0f } } with the float_list length 6 written
    // as the 6-byte varint 86 80 80 80 80 0A
    byte[] feature = {
      0x12,
      (byte) 0x86,
      (byte) 0x80,
      (byte) 0x80,
      (byte) 0x80,
      (byte) 0x80,
      0x0A,
      0x04,
      0,
      0,
      (byte) 0x80,
      0x3F
    };
    boolean decodes;
    try {
      new FeatureValues().decode(feature, 0, feature.length);
      decodes = true;
    } catch (MalformedRecordException e) {
      decodes = false; // "length-delimited field of 343597383686 bytes exceeds the 5 left"
    }
    assertThat(decodes).isFalse();
    assertThat(FeatureValues.packedFloatsAt(feature, 0, feature.length, 1))
        .isEqualTo(-1); // today: 8
  }
}
