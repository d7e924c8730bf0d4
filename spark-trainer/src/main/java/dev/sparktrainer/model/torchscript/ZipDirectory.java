package dev.sparktrainer.model.torchscript;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * The entries of a zip archive held in memory, read from its central directory (zip64 included).
 * PyTorch writes its archives' entries stored, with data descriptors, which {@code
 * java.util.zip.ZipInputStream} refuses; the central directory lists every entry's size and offset.
 */
final class ZipDirectory {
  /**
   * One entry: where its data starts, its sizes, and how it is compressed (0 stored, 8 deflate).
   */
  record Entry(String name, long localHeader, long compressedSize, long size, int method) {}

  private final ByteBuffer buf;
  final Map<String, Entry> entries = new LinkedHashMap<>();

  /**
   * @throws IllegalStateException when {@code bytes} is not a readable zip archive (the message
   *     says why)
   */
  ZipDirectory(byte[] bytes) {
    buf = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    int eocd = -1;
    for (int i = bytes.length - 22; i >= Math.max(0, bytes.length - 22 - 65535); i--) {
      if (buf.getInt(i) == 0x06054b50) {
        eocd = i;
        break;
      }
    }
    if (eocd < 0) {
      throw new IllegalStateException("no end of central directory record");
    }
    long count = buf.getShort(eocd + 10) & 0xffff;
    long dirOffset = buf.getInt(eocd + 16) & 0xffffffffL;
    if (dirOffset == 0xffffffffL || count == 0xffff) {
      int locator = eocd - 20;
      if (locator < 0 || buf.getInt(locator) != 0x07064b50) {
        throw new IllegalStateException("a zip64 archive without its locator");
      }
      long eocd64 = buf.getLong(locator + 8);
      check(eocd64, 56);
      if (buf.getInt((int) eocd64) != 0x06064b50) {
        throw new IllegalStateException("no zip64 end of central directory record");
      }
      count = buf.getLong((int) eocd64 + 32);
      dirOffset = buf.getLong((int) eocd64 + 48);
    }
    long at = dirOffset;
    for (long n = 0; n < count; n++) {
      check(at, 46);
      int p = (int) at;
      if (buf.getInt(p) != 0x02014b50) {
        throw new IllegalStateException("a broken central directory at byte " + at);
      }
      int method = buf.getShort(p + 10) & 0xffff;
      long csize = buf.getInt(p + 20) & 0xffffffffL;
      long size = buf.getInt(p + 24) & 0xffffffffL;
      int nameLen = buf.getShort(p + 28) & 0xffff;
      int extraLen = buf.getShort(p + 30) & 0xffff;
      int commentLen = buf.getShort(p + 32) & 0xffff;
      long local = buf.getInt(p + 42) & 0xffffffffL;
      check(at + 46, nameLen + extraLen);
      String name = new String(bytes, p + 46, nameLen, StandardCharsets.UTF_8);
      // zip64 extended information: the fields that read 0xffffffff, in this order
      int e = p + 46 + nameLen;
      int end = e + extraLen;
      while (e + 4 <= end) {
        int id = buf.getShort(e) & 0xffff;
        int len = buf.getShort(e + 2) & 0xffff;
        if (id == 1) {
          int q = e + 4;
          if (size == 0xffffffffL) {
            size = buf.getLong(q);
            q += 8;
          }
          if (csize == 0xffffffffL) {
            csize = buf.getLong(q);
            q += 8;
          }
          if (local == 0xffffffffL) {
            local = buf.getLong(q);
          }
        }
        e += 4 + len;
      }
      entries.put(name, new Entry(name, local, csize, size, method));
      at += 46L + nameLen + extraLen + commentLen;
    }
  }

  private void check(long at, long len) {
    if (at < 0 || at + len > buf.capacity()) {
      throw new IllegalStateException("an entry past the archive's end (byte " + at + ")");
    }
  }

  /** The content of entry {@code e} (small entries: the version, the metadata). */
  byte[] read(Entry e) {
    check(e.localHeader(), 30);
    int p = (int) e.localHeader();
    if (buf.getInt(p) != 0x04034b50) {
      throw new IllegalStateException("no local header for " + e.name());
    }
    int nameLen = buf.getShort(p + 26) & 0xffff;
    int extraLen = buf.getShort(p + 28) & 0xffff;
    long data = p + 30L + nameLen + extraLen;
    check(data, e.compressedSize());
    byte[] raw = new byte[Math.toIntExact(e.compressedSize())];
    buf.get((int) data, raw);
    if (e.method() == 0) {
      return raw;
    }
    if (e.method() != 8) {
      throw new IllegalStateException(e.name() + " uses compression method " + e.method());
    }
    Inflater inf = new Inflater(true);
    try {
      inf.setInput(raw);
      byte[] out = new byte[Math.toIntExact(e.size())];
      int n = 0;
      while (n < out.length && !inf.finished()) {
        int k = inf.inflate(out, n, out.length - n);
        if (k == 0 && (inf.needsInput() || inf.needsDictionary())) {
          break;
        }
        n += k;
      }
      return out;
    } catch (DataFormatException ex) {
      throw new IllegalStateException(e.name() + " is corrupt: " + ex.getMessage(), ex);
    } finally {
      inf.end();
    }
  }
}
