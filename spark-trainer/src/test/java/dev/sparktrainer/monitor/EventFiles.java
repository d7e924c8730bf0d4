package dev.sparktrainer.monitor;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnknownFieldSet;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;

/**
 * Reads TensorBoard event files the way TensorBoard's loader does, independently of the project's
 * codec: TFRecord framing with both masked CRC-32C checks (the JDK's CRC32C), then each record
 * parsed as an {@code Event} by Google's protobuf parser (field numbers from
 * tensorflow/core/util/event.proto and summary.proto).
 */
final class EventFiles {
  private EventFiles() {}

  /** One decoded Event. */
  record Event(double wallTime, long step, String fileVersion, Map<String, Float> scalars) {}

  static List<Event> read(Path file) throws IOException {
    List<Event> out = new ArrayList<>();
    try (InputStream raw = Files.newInputStream(file);
        DataInputStream in = new DataInputStream(raw)) {
      while (true) {
        byte[] header = new byte[12];
        try {
          in.readFully(header);
        } catch (EOFException e) {
          break;
        }
        ByteBuffer h = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN);
        long length = h.getLong(0);
        int lengthCrc = h.getInt(8);
        if (lengthCrc != maskedCrc(header, 0, 8)) {
          throw new IOException("length CRC mismatch at record " + out.size());
        }
        byte[] data = new byte[Math.toIntExact(length)];
        in.readFully(data);
        byte[] footer = new byte[4];
        in.readFully(footer);
        if (ByteBuffer.wrap(footer).order(ByteOrder.LITTLE_ENDIAN).getInt()
            != maskedCrc(data, 0, data.length)) {
          throw new IOException("data CRC mismatch at record " + out.size());
        }
        out.add(parseEvent(data));
      }
    }
    return out;
  }

  static int maskedCrc(byte[] b, int off, int len) {
    CRC32C crc = new CRC32C();
    crc.update(b, off, len);
    int c = (int) crc.getValue();
    return ((c >>> 15) | (c << 17)) + 0xa282ead8;
  }

  static Event parseEvent(byte[] data) throws IOException {
    UnknownFieldSet event = UnknownFieldSet.parseFrom(data);
    double wallTime = Double.longBitsToDouble(event.getField(1).getFixed64List().get(0));
    long step = event.hasField(2) ? event.getField(2).getVarintList().get(0) : 0;
    String version =
        event.hasField(3) ? event.getField(3).getLengthDelimitedList().get(0).toStringUtf8() : null;
    Map<String, Float> scalars = new LinkedHashMap<>();
    if (event.hasField(5)) {
      UnknownFieldSet summary =
          UnknownFieldSet.parseFrom(event.getField(5).getLengthDelimitedList().get(0));
      if (summary.hasField(1)) {
        for (ByteString v : summary.getField(1).getLengthDelimitedList()) {
          UnknownFieldSet value = UnknownFieldSet.parseFrom(v);
          String tag = value.getField(1).getLengthDelimitedList().get(0).toStringUtf8();
          float simple = Float.intBitsToFloat(value.getField(2).getFixed32List().get(0));
          scalars.put(tag, simple);
        }
      }
    }
    return new Event(wallTime, step, version, scalars);
  }
}
