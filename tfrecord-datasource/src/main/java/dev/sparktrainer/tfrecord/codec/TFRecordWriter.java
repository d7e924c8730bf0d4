package dev.sparktrainer.tfrecord.codec;

import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;

/**
 * Writes TFRecord framing to a stream: {@code uint64 length (LE), uint32 masked crc(length), data,
 * uint32 masked crc(data)}. Not thread-safe. Closing closes the underlying stream.
 */
public final class TFRecordWriter implements Closeable {
  private final OutputStream out;
  private final Crc32c crc = new Crc32c();
  private final byte[] header = new byte[12];
  private final byte[] footer = new byte[4];
  private long bytesWritten;
  private long records;

  public TFRecordWriter(OutputStream out) {
    this.out = out;
  }

  public void write(byte[] data) throws IOException {
    write(data, 0, data.length);
  }

  public void write(byte[] data, int off, int len) throws IOException {
    LittleEndian.putLong(header, 0, len);
    LittleEndian.putInt(header, 8, crc.maskedCrc(header, 0, 8));
    LittleEndian.putInt(footer, 0, crc.maskedCrc(data, off, len));
    out.write(header);
    out.write(data, off, len);
    out.write(footer);
    bytesWritten += 16L + len;
    records++;
  }

  public long bytesWritten() {
    return bytesWritten;
  }

  public long records() {
    return records;
  }

  public void flush() throws IOException {
    out.flush();
  }

  @Override
  public void close() throws IOException {
    out.close();
  }
}
