package dev.sparktrainer.train;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32C;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The completion marker of a saved model, {@code _COMPLETE}: JSON listing every file with its size
 * and CRC-32C, written after all of them. Its presence says the save finished; its entries let a
 * load name the file that is missing, truncated or corrupt.
 *
 * <pre>{"format": 1, "files": [
 *   {"name": "model.properties", "size": 231, "crc32c": "1f2e3d4c"},
 *   ...
 * ]}</pre>
 */
final class ModelMarker {
  /** The marker's file name in a saved model's directory. */
  static final String NAME = "_COMPLETE";

  private static final Pattern FORMAT = Pattern.compile("\"format\"\\s*:\\s*1\\b");
  private static final Pattern ENTRY =
      Pattern.compile(
          "\\{\\s*\"name\"\\s*:\\s*\"([A-Za-z0-9._-]+)\"\\s*,\\s*\"size\"\\s*:\\s*(\\d+)\\s*,\\s*\"crc32c\"\\s*:\\s*\"([0-9a-f]{8})\"\\s*}");

  private ModelMarker() {}

  /** What the marker records of one file. */
  record Entry(long size, String crc32c) {}

  static String crc32c(byte[] bytes) {
    CRC32C crc = new CRC32C();
    crc.update(bytes);
    return String.format(Locale.ROOT, "%08x", crc.getValue());
  }

  /** The marker of {@code files} (name to content), in their order. */
  static byte[] encode(Map<String, byte[]> files) {
    StringBuilder sb = new StringBuilder("{\"format\": 1, \"files\": [");
    String sep = "\n";
    for (Map.Entry<String, byte[]> f : files.entrySet()) {
      sb.append(sep)
          .append("  {\"name\": \"")
          .append(f.getKey())
          .append("\", \"size\": ")
          .append(f.getValue().length)
          .append(", \"crc32c\": \"")
          .append(crc32c(f.getValue()))
          .append("\"}");
      sep = ",\n";
    }
    return sb.append("\n]}\n").toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The entries of {@code dir}'s marker.
   *
   * @throws FileNotFoundException naming the marker when there is none: the save did not finish
   * @throws IOException if the marker cannot be read or is not one
   */
  static Map<String, Entry> read(FileSystem fs, Path dir) throws IOException {
    Path m = new Path(dir, NAME);
    byte[] bytes;
    try (InputStream in = fs.open(m)) {
      bytes = in.readAllBytes();
    } catch (FileNotFoundException e) {
      throw new FileNotFoundException(
          "No complete model at "
              + dir
              + ": "
              + NAME
              + " is missing (a"
              + " save that did not finish, a directory that is not a model, or a model saved by a spark-trainer"
              + " version before completion markers)");
    }
    String text = new String(bytes, StandardCharsets.UTF_8);
    Map<String, Entry> entries = new LinkedHashMap<>();
    Matcher e = ENTRY.matcher(text);
    while (e.find()) {
      entries.put(e.group(1), new Entry(Long.parseLong(e.group(2)), e.group(3)));
    }
    if (!FORMAT.matcher(text).find() || entries.isEmpty()) {
      throw new IOException(
          "The completion marker " + m + " is not valid (expected format 1 with a list of files)");
    }
    return entries;
  }

  /**
   * Every file the marker of {@code dir} lists, read and checked against it.
   *
   * @throws IOException naming the missing marker, or the file that is missing, has another size,
   *     or another CRC-32C than the marker records
   */
  static Map<String, byte[]> readVerified(FileSystem fs, Path dir) throws IOException {
    Map<String, byte[]> files = new LinkedHashMap<>();
    for (Map.Entry<String, Entry> e : read(fs, dir).entrySet()) {
      String name = e.getKey();
      Entry want = e.getValue();
      Path f = new Path(dir, name);
      FileStatus st;
      try {
        st = fs.getFileStatus(f);
      } catch (FileNotFoundException missing) {
        throw new FileNotFoundException(
            "The model at "
                + dir
                + " is incomplete: "
                + name
                + ", listed in "
                + NAME
                + ", is missing");
      }
      if (st.getLen() != want.size()) {
        throw new IOException(
            "The model at "
                + dir
                + " is corrupt: "
                + name
                + " has "
                + st.getLen()
                + " bytes, "
                + NAME
                + " records "
                + want.size());
      }
      byte[] bytes;
      try (InputStream in = fs.open(f)) {
        bytes = in.readAllBytes();
      } catch (IOException unreadable) { // e.g. a ChecksumException of the local file system
        throw new IOException(
            "Cannot read " + name + " of the model at " + dir + ": " + unreadable.getMessage(),
            unreadable);
      }
      String crc = crc32c(bytes);
      if (bytes.length != want.size() || !crc.equals(want.crc32c())) {
        throw new IOException(
            "The model at "
                + dir
                + " is corrupt: "
                + name
                + " has CRC-32C "
                + crc
                + " ("
                + bytes.length
                + " bytes), "
                + NAME
                + " records "
                + want.crc32c()
                + " ("
                + want.size()
                + " bytes)");
      }
      files.put(name, bytes);
    }
    return files;
  }
}
