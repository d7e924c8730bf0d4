package dev.sparktrainer.tfrecord.codec;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.ZipException;

/**
 * Reads TFRecord framing from a stream, verifying both CRCs of every record.
 *
 * <p>Split-aware: a reader for the byte range {@code [start, end)} of an uncompressed file returns
 * exactly the records whose first byte lies in that range. When {@code start > 0} it first
 * resynchronises on the first offset whose length CRC and data CRC both verify; at {@code end} it
 * checks the next record boundary too, so corruption that straddles two splits is reported by the
 * split that knows where the records really are. Together every record is read exactly once,
 * whatever the split size.
 *
 * <p>The current record is a view into an internal buffer, valid until the next call to {@link
 * #next()}. Not thread-safe.
 */
public final class TFRecordReader implements Closeable {
  /** Default bound on one record's length: larger lengths are corruption, never an allocation. */
  public static final int DEFAULT_MAX_RECORD_LENGTH = 256 << 20;

  private static final int HEADER = 12;
  private static final int FOOTER = 4;
  private static final int MAX_BUFFER = Integer.MAX_VALUE - 64;

  private final InputStream in;
  private final String file;
  private final long end;
  private final int maxRecordLength;
  private final CorruptRecordPolicy policy;
  private final Crc32c crc = new Crc32c();

  private byte[] buf;
  private BufferHandoff handoff;
  private int rp; // index in buf of absolute offset pos
  private int wp; // end of valid bytes in buf
  private boolean eof;
  private long pos; // absolute offset (in the uncompressed stream) of the next candidate record
  private boolean resyncing;
  private boolean skippingCorruption; // resyncing after corruption (not at a split's start)
  private boolean finished;
  private boolean streamBroken; // the drop was already counted when the stream broke

  private int dataOff;
  private int dataLen;
  private long recordOffset;

  private long droppedRecords;
  private long droppedBytes;
  private String lastDropReason;

  /**
   * @param in the (decompressed) stream, positioned at {@code start}
   * @param file the file's name, for error messages
   * @param start the absolute offset {@code in} is positioned at
   * @param end records starting at or after this offset belong to the next split ({@code
   *     Long.MAX_VALUE} for the whole file)
   * @param maxRecordLength lengths above this are corruption
   * @param policy what to do with corrupt records
   */
  public TFRecordReader(
      InputStream in,
      String file,
      long start,
      long end,
      int maxRecordLength,
      CorruptRecordPolicy policy) {
    if (maxRecordLength <= 0 || maxRecordLength > MAX_BUFFER - HEADER - FOOTER) {
      throw new IllegalArgumentException(
          "Invalid maxRecordLength " + maxRecordLength + ": expected 1.." + (MAX_BUFFER - 16));
    }
    this.in = in;
    this.file = file;
    this.pos = start;
    this.end = end;
    this.maxRecordLength = maxRecordLength;
    this.policy = policy;
    this.resyncing = start > 0;
    // Large blocks let reads bypass the stream's own buffer; small splits need no more than 64 KiB.
    this.buf = new byte[(int) Math.min(1 << 20, Math.max(1 << 16, end - start))];
  }

  /** A reader of a whole stream with the default bound and FAILFAST. */
  public static TFRecordReader of(InputStream in, String file) {
    return new TFRecordReader(
        in, file, 0, Long.MAX_VALUE, DEFAULT_MAX_RECORD_LENGTH, CorruptRecordPolicy.FAILFAST);
  }

  /**
   * Advances to the next record of this split.
   *
   * @return false at the end of the split or the stream
   * @throws TFRecordCorruptException under FAILFAST, naming file, offset and what failed
   */
  public boolean next() throws IOException {
    if (finished) {
      return false;
    }
    while (true) {
      boolean beyondEnd = pos >= end;
      if (beyondEnd && resyncing) {
        return finish();
      }
      int avail = fill(HEADER);
      if (avail == 0) {
        return finish();
      }
      if (avail < HEADER) {
        if (resyncing) {
          return finish();
        }
        corrupt("truncated record header: " + avail + " of 12 bytes before the end of the file");
        droppedBytes += avail;
        return finish();
      }
      long len = LittleEndian.getLong(buf, rp);
      int lenCrc = LittleEndian.getInt(buf, rp + 8);
      if (crc.maskedCrc(buf, rp, 8) != lenCrc) {
        if (!resyncing) {
          corrupt("length CRC mismatch (length field " + Long.toUnsignedString(len) + ")");
          resyncing = true;
          skippingCorruption = true;
        }
        skipOneByte();
        continue;
      }
      if (len < 0 || len > maxRecordLength) {
        if (!resyncing) {
          corrupt(
              "record length "
                  + Long.toUnsignedString(len)
                  + " exceeds maxRecordLength "
                  + maxRecordLength);
          resyncing = true;
          skippingCorruption = true;
        }
        skipOneByte();
        continue;
      }
      int total = HEADER + (int) len + FOOTER;
      avail = fill(total);
      if (avail < total) {
        if (resyncing) {
          // A candidate header near the end whose record cannot fit: not a record; keep scanning.
          skipOneByte();
          continue;
        }
        corrupt(
            "truncated record: length "
                + len
                + " needs "
                + total
                + " bytes but the file ends after "
                + avail);
        droppedBytes += avail;
        return finish();
      }
      int dataCrc = LittleEndian.getInt(buf, rp + HEADER + (int) len);
      if (crc.maskedCrc(buf, rp + HEADER, (int) len) != dataCrc) {
        if (resyncing) {
          skipOneByte();
          continue;
        }
        if (beyondEnd) {
          // The boundary the next split starts from is corrupt: this split reports it.
          corrupt("data CRC mismatch (record length " + len + ")");
          droppedBytes += total;
          return finish();
        }
        corrupt("data CRC mismatch (record length " + len + ")");
        droppedBytes += total;
        advance(total);
        continue;
      }
      if (resyncing) {
        resyncing = false;
        skippingCorruption = false;
        if (pos >= end) {
          return finish();
        }
      }
      if (beyondEnd) {
        // A valid record at the boundary: it is the next split's first record.
        return finish();
      }
      recordOffset = pos;
      dataOff = rp + HEADER;
      dataLen = (int) len;
      advance(total);
      return true;
    }
  }

  /**
   * Takes over the reader's buffers: from now on the reader never overwrites bytes of a record it
   * has returned. Where it would (moving unread bytes to the front, or growing), it takes a fresh
   * buffer from {@code handoff} instead, copies the unread bytes over, and retires the old one to
   * {@code handoff}: its records stay valid for whoever owns it now. For readers whose records are
   * decoded later, elsewhere, without a copy.
   */
  public void setBufferHandoff(BufferHandoff handoff) {
    this.handoff = handoff;
  }

  /**
   * Supplies fresh buffers to a reader that hands its full ones over ({@link #setBufferHandoff}).
   */
  public interface BufferHandoff {
    /** A buffer of at least {@code minLength} bytes (what the reader needs next) to continue in. */
    byte[] take(int minLength);

    /**
     * Takes ownership of {@code retired}: the reader has copied what it still needed out of it and
     * never touches it again. Called after the {@link #take} that replaces it.
     */
    void retire(byte[] retired);
  }

  /** Buffer holding the current record's data. */
  public byte[] buffer() {
    return buf;
  }

  /** Offset of the current record's data in {@link #buffer()}. */
  public int dataOffset() {
    return dataOff;
  }

  /** Length of the current record's data. */
  public int dataLength() {
    return dataLen;
  }

  /** Absolute offset of the current record's header in the (uncompressed) stream. */
  public long recordOffset() {
    return recordOffset;
  }

  /** The current record's data, copied. */
  public byte[] copyData() {
    byte[] out = new byte[dataLen];
    System.arraycopy(buf, dataOff, out, 0, dataLen);
    return out;
  }

  /** Records (or unreadable regions) dropped under DROPMALFORMED. */
  public long droppedRecords() {
    return droppedRecords;
  }

  /** Bytes skipped under DROPMALFORMED. */
  public long droppedBytes() {
    return droppedBytes;
  }

  /** Why the last record was dropped, or null. */
  public String lastDropReason() {
    return lastDropReason;
  }

  public String file() {
    return file;
  }

  @Override
  public void close() throws IOException {
    finished = true;
    in.close();
  }

  private boolean finish() {
    finished = true;
    return false;
  }

  private void corrupt(String what) throws TFRecordCorruptException {
    if (policy == CorruptRecordPolicy.FAILFAST) {
      throw new TFRecordCorruptException(file, pos, what);
    }
    if (streamBroken) {
      return;
    }
    droppedRecords++;
    lastDropReason = "file " + file + " at byte offset " + pos + ": " + what;
  }

  private void skipOneByte() {
    if (skippingCorruption) {
      droppedBytes++;
    }
    advance(1);
  }

  private void advance(int n) {
    rp += n;
    pos += n;
  }

  /**
   * Ensures {@code n} bytes from {@code rp} are buffered if the stream has them; returns how many.
   * The buffer grows geometrically as bytes actually arrive, so a forged length in a short file
   * allocates about what the file holds, not what the length claims.
   */
  private int fill(int n) throws IOException {
    int have = wp - rp;
    if (have >= n || eof) {
      return Math.min(have, n);
    }
    if (rp > 0 && rp + n > buf.length) {
      if (handoff != null) {
        // The records returned so far stay where they are: continue in a fresh buffer.
        byte[] fresh = handoff.take(n);
        System.arraycopy(buf, rp, fresh, 0, have);
        handoff.retire(buf);
        buf = fresh;
      } else {
        System.arraycopy(buf, rp, buf, 0, have);
      }
      rp = 0;
      wp = have;
    }
    while (wp - rp < n) {
      if (wp == buf.length) {
        int size = (int) Math.min(MAX_BUFFER, Math.min((long) rp + n, 2L * buf.length));
        byte[] grown = handoff != null ? handoff.take(size) : new byte[size];
        System.arraycopy(buf, 0, grown, 0, wp);
        if (handoff != null) {
          handoff.retire(buf);
        }
        buf = grown;
      }
      int r;
      try {
        r = in.read(buf, wp, buf.length - wp);
      } catch (EOFException | ZipException e) {
        // A truncated or damaged compressed stream: corruption at the first byte not read.
        long at = pos + (wp - rp);
        String what = "compressed stream is truncated or damaged (" + e.getMessage() + ")";
        if (policy == CorruptRecordPolicy.FAILFAST) {
          throw new TFRecordCorruptException(file, at, what, e);
        }
        droppedRecords++;
        lastDropReason = "file " + file + " at byte offset " + at + ": " + what;
        streamBroken = true;
        eof = true;
        break;
      }
      if (r < 0) {
        eof = true;
        break;
      }
      wp += r;
    }
    return Math.min(wp - rp, n);
  }
}
