package dev.sparktrainer.checkpoint;

import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;
import org.apache.hadoop.fs.ChecksumException;
import org.apache.hadoop.fs.FSDataInputStream;

/**
 * The checkpoint file format, version 2: see {@link CheckpointStore} for the layout. Everything
 * goes through one bounded buffer of {@value #BUFFER_BYTES} bytes in each direction: neither side
 * ever holds a {@code byte[]} of a whole array or of the whole state, so a checkpoint may be any
 * size.
 *
 * <p>Why this file is long: it is one binary format, written and read in the same file so that each
 * field's offset, width and checksum can be checked against its counterpart: the writer; the
 * reader, which verifies header, footer and manifest before reading any array and then every record
 * with its CRC32C, naming the byte offset of what is wrong where it can; the manifest parser, which
 * checks every entry against the file's layout; and the bounded buffer both sides stream through
 * ({@code Sink}, {@code Source}). Split into writer and reader, each field's two halves would be in
 * different files.
 */
final class CheckpointFormat {
  /** The format this class writes and reads. */
  static final int VERSION = 2;

  /** The first and the last four bytes of a file: ASCII {@code STCK}. */
  static final byte[] MAGIC = {'S', 'T', 'C', 'K'};

  /** Magic, version, step. */
  static final int HEADER_BYTES = 16;

  /** Manifest offset, manifest length, manifest CRC, magic. */
  static final int FOOTER_BYTES = 20;

  /** Step, metadata offset, length and CRC, array count. */
  static final int MANIFEST_FIXED_BYTES = 28;

  /** Name length, offset, count, CRC: an entry without its name. */
  private static final int ENTRY_FIXED_BYTES = 20;

  /** The buffer between the arrays and the stream. */
  static final int BUFFER_BYTES = 1 << 20;

  /**
   * The first eight bytes of a format 1 file (one {@code byte[]} of the whole state): magic {@code
   * 0x53544b31} and version 1, both big-endian.
   */
  private static final long V1_PREFIX = 0x53544b31_00000001L;

  private CheckpointFormat() {}

  /**
   * Writes {@code state} to {@code out} (not closed) and returns the number of bytes written.
   *
   * @throws IllegalArgumentException if the manifest would not fit in one array (billions of
   *     arrays)
   */
  static long write(OutputStream out, CheckpointState state) throws IOException {
    List<StateArray> arrays = state.arrays();
    int count = arrays.size();
    byte[][] names = new byte[count][];
    long[] offsets = new long[count];
    int[] crcs = new int[count];

    Sink sink = new Sink(out);
    sink.bytes(MAGIC, null);
    sink.int32(VERSION);
    sink.int64(state.step());

    long metadataOffset = sink.position();
    byte[] metadata = state.metadata();
    CRC32C metadataCrc = new CRC32C();
    sink.int32(metadata.length);
    sink.bytes(metadata, metadataCrc);
    sink.int32((int) metadataCrc.getValue());

    long manifestBytes = MANIFEST_FIXED_BYTES;
    for (int i = 0; i < count; i++) {
      StateArray a = arrays.get(i);
      names[i] = a.name().getBytes(StandardCharsets.UTF_8);
      manifestBytes += ENTRY_FIXED_BYTES + names[i].length;
      offsets[i] = sink.position();
      sink.int32(names[i].length);
      sink.bytes(names[i], null);
      sink.int32(a.values().length);
      crcs[i] = sink.floats(a.values());
      sink.int32(crcs[i]);
    }
    if (manifestBytes > Integer.MAX_VALUE - 16) {
      throw new IllegalArgumentException(
          "Checkpoint of step "
              + state.step()
              + " has too many arrays ("
              + count
              + ") for its manifest");
    }

    long manifestOffset = sink.position();
    ByteBuffer manifest = ByteBuffer.allocate((int) manifestBytes).order(ByteOrder.LITTLE_ENDIAN);
    manifest.putLong(state.step());
    manifest.putLong(metadataOffset);
    manifest.putInt(metadata.length);
    manifest.putInt((int) metadataCrc.getValue());
    manifest.putInt(count);
    for (int i = 0; i < count; i++) {
      manifest.putInt(names[i].length);
      manifest.put(names[i]);
      manifest.putLong(offsets[i]);
      manifest.putInt(arrays.get(i).values().length);
      manifest.putInt(crcs[i]);
    }
    CRC32C manifestCrc = new CRC32C();
    sink.bytes(manifest.array(), manifestCrc);

    sink.int64(manifestOffset);
    sink.int32(manifest.capacity());
    sink.int32((int) manifestCrc.getValue());
    sink.bytes(MAGIC, null);
    sink.flush();
    return sink.position();
  }

  /**
   * Reads and verifies the checkpoint in {@code in}, a file of {@code length} bytes named {@code
   * file} whose name says it holds {@code expectedStep}: first the header, the footer and the
   * manifest (a truncated file fails there, without reading its arrays), then every record from the
   * start.
   *
   * @throws CorruptCheckpointException if the file is provably bad (reading it again cannot help)
   * @throws IncompatibleCheckpointException if it was written in format 1
   * @throws IOException if the stream fails otherwise (not proof of anything)
   */
  static CheckpointState read(FSDataInputStream in, long length, String file, long expectedStep)
      throws IOException {
    try {
      return readVerified(in, length, file, expectedStep);
    } catch (EOFException e) {
      // The file is shorter than its length said (it changed under us) or than its records say.
      throw new CorruptCheckpointException(
          file, -1, "truncated: end of file reached early (" + e.getMessage() + ")", e);
    } catch (ChecksumException e) {
      // Hadoop's own checksum (the .crc side file of LocalFileSystem, HDFS block checksums on every
      // replica).
      throw new CorruptCheckpointException(
          file,
          e.getPos(),
          "the file system's checksum does not verify (" + e.getMessage() + ")",
          e);
    }
  }

  private static CheckpointState readVerified(
      FSDataInputStream in, long length, String file, long expectedStep) throws IOException {
    if (length < 8) {
      throw new CorruptCheckpointException(
          file, -1, "truncated: " + length + " bytes, shorter than a header");
    }
    byte[] header = new byte[(int) Math.min(HEADER_BYTES, length)];
    in.readFully(0, header, 0, header.length);
    ByteBuffer h = ByteBuffer.wrap(header);
    if (h.getLong(0) == V1_PREFIX) {
      throw new IncompatibleCheckpointException(
          "Checkpoint "
              + file
              + " was written by an older version of "
              + "spark-trainer (checkpoint format 1), which this version (format "
              + VERSION
              + ") cannot read. "
              + "Resume with the version that wrote it, or delete the checkpoints in its directory to start afresh.");
    }
    if (!Arrays.equals(header, 0, MAGIC.length, MAGIC, 0, MAGIC.length)) {
      throw new CorruptCheckpointException(file, 0, "bad magic number: not a checkpoint file");
    }
    h.order(ByteOrder.LITTLE_ENDIAN);
    int version = h.getInt(4);
    if (version != VERSION) {
      throw new CorruptCheckpointException(
          file,
          4,
          "unsupported format version " + version + " (this version reads " + VERSION + ")");
    }
    long minimum = HEADER_BYTES + 8L + MANIFEST_FIXED_BYTES + FOOTER_BYTES;
    if (length < minimum) {
      throw new CorruptCheckpointException(
          file,
          -1,
          "truncated: "
              + length
              + " bytes, shorter than the smallest "
              + "checkpoint ("
              + minimum
              + ")");
    }
    long step = h.getLong(8);
    if (step != expectedStep) {
      throw new CorruptCheckpointException(
          file, 8, "the header says step " + step + ", the file name step " + expectedStep);
    }

    long footerOffset = length - FOOTER_BYTES;
    byte[] footerBytes = new byte[FOOTER_BYTES];
    in.readFully(footerOffset, footerBytes, 0, FOOTER_BYTES);
    if (!Arrays.equals(
        footerBytes, FOOTER_BYTES - MAGIC.length, FOOTER_BYTES, MAGIC, 0, MAGIC.length)) {
      throw new CorruptCheckpointException(
          file,
          footerOffset,
          "no footer: the write did not complete or the file " + "was truncated");
    }
    ByteBuffer footer = ByteBuffer.wrap(footerBytes).order(ByteOrder.LITTLE_ENDIAN);
    long manifestOffset = footer.getLong();
    int manifestLength = footer.getInt();
    int manifestCrc = footer.getInt();
    if (manifestLength < MANIFEST_FIXED_BYTES
        || manifestOffset < HEADER_BYTES
        || manifestOffset != footerOffset - manifestLength) {
      throw new CorruptCheckpointException(
          file,
          footerOffset,
          "the footer puts a manifest of "
              + manifestLength
              + " bytes at byte "
              + manifestOffset
              + ", which does not end where the footer starts");
    }
    byte[] manifestBytes = new byte[manifestLength];
    in.readFully(manifestOffset, manifestBytes, 0, manifestLength);
    CRC32C crc = new CRC32C();
    crc.update(manifestBytes);
    if ((int) crc.getValue() != manifestCrc) {
      throw new CorruptCheckpointException(file, manifestOffset, "manifest CRC-32C mismatch");
    }
    Manifest manifest = Manifest.parse(manifestBytes, manifestOffset, step, file);

    // The manifest is consistent with the file's length: every allocation below is bounded by it.
    in.seek(0);
    Source src = new Source(in, file);
    byte[] again = new byte[HEADER_BYTES];
    src.bytes(again, null);
    if (!Arrays.equals(again, header)) {
      throw new CorruptCheckpointException(file, 0, "the header changed while it was read");
    }
    long at = src.position();
    int metadataLength = src.int32();
    if (metadataLength != manifest.metadataLength) {
      throw new CorruptCheckpointException(
          file,
          at,
          "metadata length " + metadataLength + ", the manifest says " + manifest.metadataLength);
    }
    byte[] metadata = new byte[metadataLength];
    CRC32C metadataCrc = new CRC32C();
    src.bytes(metadata, metadataCrc);
    at = src.position();
    int storedMetadataCrc = src.int32();
    if ((int) metadataCrc.getValue() != manifest.metadataCrc
        || storedMetadataCrc != manifest.metadataCrc) {
      throw new CorruptCheckpointException(file, HEADER_BYTES + 4, "metadata CRC-32C mismatch");
    }

    List<StateArray> arrays = new ArrayList<>(manifest.names.length);
    for (int i = 0; i < manifest.names.length; i++) {
      String what =
          "array " + i + " ('" + new String(manifest.names[i], StandardCharsets.UTF_8) + "')";
      at = src.position();
      if (at != manifest.offsets[i]) {
        throw new CorruptCheckpointException(
            file, at, what + " is at byte " + manifest.offsets[i] + " in the manifest");
      }
      int nameLength = src.int32();
      if (nameLength != manifest.names[i].length) {
        throw new CorruptCheckpointException(
            file,
            at,
            what
                + ": its record has a name of "
                + nameLength
                + " bytes, the manifest of "
                + manifest.names[i].length);
      }
      byte[] name = new byte[nameLength];
      src.bytes(name, null);
      if (!Arrays.equals(name, manifest.names[i])) {
        throw new CorruptCheckpointException(
            file,
            at + 4,
            what + ": its record names it '" + new String(name, StandardCharsets.UTF_8) + "'");
      }
      at = src.position();
      int count = src.int32();
      if (count != manifest.counts[i]) {
        throw new CorruptCheckpointException(
            file,
            at,
            what
                + ": its record has "
                + count
                + " floats, the "
                + "manifest "
                + manifest.counts[i]);
      }
      float[] values = new float[count];
      long dataOffset = src.position();
      int dataCrc = src.floats(values);
      at = src.position();
      int storedCrc = src.int32();
      if (dataCrc != manifest.crcs[i]) {
        throw new CorruptCheckpointException(
            file, dataOffset, what + ": data CRC-32C mismatch (" + count + " floats)");
      }
      if (storedCrc != manifest.crcs[i]) {
        throw new CorruptCheckpointException(
            file, at, what + ": the record's CRC differs from the manifest's");
      }
      arrays.add(new StateArray(new String(name, StandardCharsets.UTF_8), values));
    }
    if (src.position() != manifestOffset) {
      throw new CorruptCheckpointException(
          file,
          src.position(),
          "the records end here, the manifest starts at byte " + manifestOffset);
    }
    return new CheckpointState(step, metadata, arrays);
  }

  /** The manifest, parsed and checked against the file's layout. */
  private static final class Manifest {
    int metadataLength;
    int metadataCrc;
    byte[][] names;
    long[] offsets;
    int[] counts;
    int[] crcs;

    static Manifest parse(byte[] bytes, long manifestOffset, long step, String file)
        throws CorruptCheckpointException {
      ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
      Manifest m = new Manifest();
      try {
        long manifestStep = b.getLong();
        if (manifestStep != step) {
          throw bad(
              file,
              manifestOffset,
              "the manifest says step " + manifestStep + ", the header step " + step);
        }
        long metadataOffset = b.getLong();
        m.metadataLength = b.getInt();
        m.metadataCrc = b.getInt();
        int count = b.getInt();
        if (metadataOffset != HEADER_BYTES || m.metadataLength < 0) {
          throw bad(
              file,
              manifestOffset,
              "the manifest puts "
                  + m.metadataLength
                  + " metadata bytes at byte "
                  + metadataOffset);
        }
        if (count < 0 || count > b.remaining() / ENTRY_FIXED_BYTES) {
          throw bad(
              file,
              manifestOffset,
              "the manifest lists " + count + " arrays in " + bytes.length + " bytes");
        }
        m.names = new byte[count][];
        m.offsets = new long[count];
        m.counts = new int[count];
        m.crcs = new int[count];
        // Where the next record must start: records follow each other without gaps.
        long next = metadataOffset + 4 + m.metadataLength + 4;
        for (int i = 0; i < count; i++) {
          int nameLength = b.getInt();
          if (nameLength < 0 || nameLength > b.remaining()) {
            throw bad(
                file,
                manifestOffset,
                "manifest entry " + i + " has a name of " + nameLength + " bytes");
          }
          m.names[i] = new byte[nameLength];
          b.get(m.names[i]);
          m.offsets[i] = b.getLong();
          m.counts[i] = b.getInt();
          m.crcs[i] = b.getInt();
          if (m.offsets[i] != next || m.counts[i] < 0) {
            throw bad(
                file,
                manifestOffset,
                "manifest entry "
                    + i
                    + " puts "
                    + m.counts[i]
                    + " floats at byte "
                    + m.offsets[i]
                    + ", the previous record ends at byte "
                    + next);
          }
          next = m.offsets[i] + 4 + nameLength + 4 + 4L * m.counts[i] + 4;
        }
        if (b.hasRemaining()) {
          throw bad(file, manifestOffset, b.remaining() + " bytes after the last manifest entry");
        }
        if (next != manifestOffset) {
          throw bad(
              file,
              manifestOffset,
              "the manifest's records end at byte " + next + ", not where the manifest starts");
        }
      } catch (BufferUnderflowException e) {
        throw bad(file, manifestOffset, "the manifest ends in the middle of an entry");
      }
      return m;
    }

    private static CorruptCheckpointException bad(String file, long offset, String reason) {
      return new CorruptCheckpointException(file, offset, reason);
    }
  }

  /** The writing side of the buffer, counting the bytes written (long: a file may exceed 2 GiB). */
  private static final class Sink {
    private final OutputStream out;
    private final ByteBuffer buf = ByteBuffer.allocate(BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private long flushed;

    Sink(OutputStream out) {
      this.out = out;
    }

    long position() {
      return flushed + buf.position();
    }

    void int32(int v) throws IOException {
      room(4);
      buf.putInt(v);
    }

    void int64(long v) throws IOException {
      room(8);
      buf.putLong(v);
    }

    void bytes(byte[] b, Checksum crc) throws IOException {
      int off = 0;
      while (off < b.length) {
        if (!buf.hasRemaining()) {
          flush();
        }
        int n = Math.min(buf.remaining(), b.length - off);
        buf.put(b, off, n);
        if (crc != null) {
          crc.update(b, off, n);
        }
        off += n;
      }
    }

    /** Writes the values little-endian and returns the CRC-32C of their bytes. */
    int floats(float[] values) throws IOException {
      CRC32C crc = new CRC32C();
      int off = 0;
      while (off < values.length) {
        int n = Math.min(buf.remaining() / 4, values.length - off);
        if (n == 0) {
          flush();
          continue;
        }
        int p = buf.position();
        buf.asFloatBuffer().put(values, off, n); // a view in the buffer's (little-endian) order
        crc.update(buf.array(), p, 4 * n);
        buf.position(p + 4 * n);
        off += n;
      }
      return (int) crc.getValue();
    }

    private void room(int n) throws IOException {
      if (buf.remaining() < n) {
        flush();
      }
    }

    void flush() throws IOException {
      out.write(buf.array(), 0, buf.position());
      flushed += buf.position();
      buf.clear();
    }
  }

  /** The reading side of the buffer, counting the bytes consumed. */
  private static final class Source {
    private final FSDataInputStream in;
    private final String file;
    private final ByteBuffer buf = ByteBuffer.allocate(BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);

    /** Bytes read from the stream into the buffer so far. */
    private long filled;

    Source(FSDataInputStream in, String file) {
      this.in = in;
      this.file = file;
      buf.limit(0);
    }

    long position() {
      return filled - buf.remaining();
    }

    int int32() throws IOException {
      need(4);
      return buf.getInt();
    }

    void bytes(byte[] dst, Checksum crc) throws IOException {
      int off = 0;
      while (off < dst.length) {
        if (!buf.hasRemaining()) {
          need(1);
        }
        int n = Math.min(buf.remaining(), dst.length - off);
        buf.get(dst, off, n);
        if (crc != null) {
          crc.update(dst, off, n);
        }
        off += n;
      }
    }

    /** Reads little-endian values into {@code dst} and returns the CRC-32C of their bytes. */
    int floats(float[] dst) throws IOException {
      CRC32C crc = new CRC32C();
      int off = 0;
      while (off < dst.length) {
        int n = Math.min(buf.remaining() / 4, dst.length - off);
        if (n == 0) {
          need(4);
          continue;
        }
        int p = buf.position();
        crc.update(buf.array(), p, 4 * n);
        buf.asFloatBuffer().get(dst, off, n);
        buf.position(p + 4 * n);
        off += n;
      }
      return (int) crc.getValue();
    }

    /** Makes at least {@code n} bytes available, reading as many as the buffer holds. */
    private void need(int n) throws IOException {
      if (buf.remaining() >= n) {
        return;
      }
      buf.compact();
      while (buf.position() < n) {
        int r = in.read(buf.array(), buf.position(), buf.capacity() - buf.position());
        if (r < 0) {
          throw new CorruptCheckpointException(file, filled, "truncated: the file ends here");
        }
        filled += r;
        buf.position(buf.position() + r);
      }
      buf.flip();
    }
  }
}
