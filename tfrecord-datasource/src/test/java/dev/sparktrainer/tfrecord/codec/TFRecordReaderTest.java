package dev.sparktrainer.tfrecord.codec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class TFRecordReaderTest {

  static byte[] frame(List<byte[]> records, TFRecordCompression c) throws IOException {
    ByteArrayOutputStream bos = new ByteArrayOutputStream();
    try (TFRecordWriter w = new TFRecordWriter(c.compress(bos))) {
      for (byte[] r : records) {
        w.write(r);
      }
    }
    return bos.toByteArray();
  }

  static List<byte[]> randomRecords(Random rnd, int n, int maxLen) {
    List<byte[]> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      byte[] b = new byte[rnd.nextInt(maxLen + 1)];
      rnd.nextBytes(b);
      out.add(b);
    }
    return out;
  }

  static List<byte[]> readAll(TFRecordReader r) throws IOException {
    List<byte[]> out = new ArrayList<>();
    while (r.next()) {
      out.add(r.copyData());
    }
    return out;
  }

  private static TFRecordReader reader(byte[] file, CorruptRecordPolicy p) {
    return new TFRecordReader(
        new ByteArrayInputStream(file), "f.tfrecord", 0, Long.MAX_VALUE, 1 << 20, p);
  }

  @Test
  void framingIsLengthCrcDataCrc() throws IOException {
    byte[] data = "hello".getBytes();
    byte[] f = frame(List.of(data), TFRecordCompression.NONE);
    assertThat(f).hasSize(8 + 4 + 5 + 4);
    assertThat(LittleEndian.getLong(f, 0)).isEqualTo(5);
    Crc32c crc = new Crc32c();
    assertThat(LittleEndian.getInt(f, 8)).isEqualTo(crc.maskedCrc(f, 0, 8));
    assertThat(Arrays.copyOfRange(f, 12, 17)).isEqualTo(data);
    assertThat(LittleEndian.getInt(f, 17)).isEqualTo(crc.maskedCrc(data, 0, 5));
  }

  @Test
  void roundTripsEveryCompression() throws IOException {
    List<byte[]> recs = randomRecords(new Random(1), 500, 3000);
    for (TFRecordCompression c : TFRecordCompression.values()) {
      byte[] f = frame(recs, c);
      List<byte[]> back =
          readAll(
              new TFRecordReader(
                  c.decompress(new ByteArrayInputStream(f)),
                  "f",
                  0,
                  Long.MAX_VALUE,
                  1 << 20,
                  CorruptRecordPolicy.FAILFAST));
      assertThat(back).as(c.name()).hasSize(recs.size());
      for (int i = 0; i < recs.size(); i++) {
        assertThat(back.get(i)).isEqualTo(recs.get(i));
      }
    }
  }

  /**
   * With a buffer handoff, every record returned stays valid where it was read, however far the
   * reader goes on; and the reader never reads a buffer once it has retired it (scribbling over
   * retired buffers changes nothing it returns).
   */
  @Test
  void handedOffBuffersKeepEveryRecordInPlace() throws IOException {
    Random rnd = new Random(5);
    List<byte[]> recs = randomRecords(rnd, 80, 200_000);
    recs.add(40, new byte[2_500_000]); // larger than the reader's buffer: the growth path
    rnd.nextBytes(recs.get(40));
    for (TFRecordCompression c : TFRecordCompression.values()) {
      for (boolean scribble : new boolean[] {false, true}) {
        TFRecordReader r =
            new TFRecordReader(
                c.decompress(new ByteArrayInputStream(frame(recs, c))),
                "f.tfrecord",
                0,
                Long.MAX_VALUE,
                4 << 20,
                CorruptRecordPolicy.FAILFAST);
        List<byte[]> retired = new ArrayList<>();
        r.setBufferHandoff(
            new TFRecordReader.BufferHandoff() {
              @Override
              public byte[] take(int minLength) {
                return new byte[minLength + rnd.nextInt(100_000)];
              }

              @Override
              public void retire(byte[] old) {
                assertThat(retired).as("a buffer is handed over once").doesNotContain(old);
                retired.add(old);
                if (scribble) {
                  Arrays.fill(old, (byte) 0x5a);
                }
              }
            });
        List<byte[]> bufs = new ArrayList<>();
        List<int[]> where = new ArrayList<>();
        List<byte[]> copies = new ArrayList<>();
        while (r.next()) {
          bufs.add(r.buffer());
          where.add(new int[] {r.dataOffset(), r.dataLength()});
          copies.add(r.copyData());
        }
        assertThat(retired).as(c + ": buffers handed over").hasSizeGreaterThan(5);
        assertThat(copies).as(c + " scribble " + scribble).hasSize(recs.size());
        for (int i = 0; i < recs.size(); i++) {
          assertThat(copies.get(i)).as(c + " record " + i + " as read").isEqualTo(recs.get(i));
          if (!scribble) {
            int[] w = where.get(i);
            assertThat(Arrays.copyOfRange(bufs.get(i), w[0], w[0] + w[1]))
                .as(c + " record " + i + " in place")
                .isEqualTo(recs.get(i));
          }
        }
      }
    }
  }

  @Test
  void emptyFileAndEmptyRecords() throws IOException {
    assertThat(readAll(reader(new byte[0], CorruptRecordPolicy.FAILFAST))).isEmpty();
    List<byte[]> back =
        readAll(
            reader(
                frame(List.of(new byte[0], new byte[0]), TFRecordCompression.NONE),
                CorruptRecordPolicy.FAILFAST));
    assertThat(back).hasSize(2).allSatisfy(b -> assertThat(b).isEmpty());
  }

  @Test
  void extensionAndOptionNames() {
    assertThat(TFRecordCompression.fromFileName("part-0.tfrecord.gz"))
        .isEqualTo(TFRecordCompression.GZIP);
    assertThat(TFRecordCompression.fromFileName("x.ZLIB")).isEqualTo(TFRecordCompression.ZLIB);
    assertThat(TFRecordCompression.fromFileName("x.tfrecord")).isEqualTo(TFRecordCompression.NONE);
    assertThat(TFRecordCompression.parse("compression", "GZIP"))
        .isEqualTo(TFRecordCompression.GZIP);
    assertThatThrownBy(() -> TFRecordCompression.parse("compression", "snappy"))
        .hasMessage("Invalid compression 'snappy': expected none, gzip or zlib");
  }

  /** Every split of every size reads each record exactly once. */
  @Test
  void splitsReadEveryRecordExactlyOnce() throws IOException {
    Random rnd = new Random(42);
    List<byte[]> recs = randomRecords(rnd, 300, 700);
    recs.add(150, new byte[0]);
    recs.add(151, new byte[0]);
    byte[] f = frame(recs, TFRecordCompression.NONE);
    for (int splitSize :
        new int[] {1, 7, 16, 17, 100, 333, 1024, 4096, 65536, f.length, f.length + 5}) {
      List<byte[]> all = new ArrayList<>();
      for (long start = 0; start < f.length; start += splitSize) {
        long len = Math.min(splitSize, f.length - start);
        TFRecordReader r =
            new TFRecordReader(
                new ByteArrayInputStream(f, (int) start, f.length - (int) start),
                "f",
                start,
                start + len,
                1 << 20,
                CorruptRecordPolicy.FAILFAST);
        all.addAll(readAll(r));
      }
      assertThat(all).as("split size " + splitSize).hasSize(recs.size());
      for (int i = 0; i < recs.size(); i++) {
        assertThat(all.get(i))
            .as("record " + i + " split size " + splitSize)
            .isEqualTo(recs.get(i));
      }
    }
  }

  private static byte[] threeRecords() throws IOException {
    return frame(
        List.of(new byte[] {1, 1, 1}, new byte[] {2, 2, 2, 2}, new byte[] {3}),
        TFRecordCompression.NONE);
  }

  @Test
  void badDataCrcFailsFastNamingFileAndOffset() throws IOException {
    byte[] f = threeRecords();
    f[19 + 12] ^= 1; // a data byte of the second record (which starts at offset 19)
    assertThatThrownBy(() -> readAll(reader(f, CorruptRecordPolicy.FAILFAST)))
        .isInstanceOf(TFRecordCorruptException.class)
        .hasMessage(
            "Corrupt TFRecord file f.tfrecord at byte offset 19: data CRC mismatch (record length 4)");
    TFRecordReader r = reader(f, CorruptRecordPolicy.DROPMALFORMED);
    List<byte[]> back = readAll(r);
    assertThat(back).containsExactly(new byte[] {1, 1, 1}, new byte[] {3});
    assertThat(r.droppedRecords()).isEqualTo(1);
  }

  @Test
  void badLengthCrcResyncsUnderDropMalformed() throws IOException {
    byte[] f = threeRecords();
    f[19] = 9; // the second record's length byte: its CRC no longer matches
    assertThatThrownBy(() -> readAll(reader(f, CorruptRecordPolicy.FAILFAST)))
        .hasMessageStartingWith(
            "Corrupt TFRecord file f.tfrecord at byte offset 19: length CRC mismatch");
    TFRecordReader r = reader(f, CorruptRecordPolicy.DROPMALFORMED);
    assertThat(readAll(r)).containsExactly(new byte[] {1, 1, 1}, new byte[] {3});
    assertThat(r.droppedRecords()).isEqualTo(1);
    assertThat(r.droppedBytes()).isEqualTo(20);
  }

  @Test
  void hugeLengthIsCorruptionNotAnAllocation() throws IOException {
    byte[] f = new byte[12];
    LittleEndian.putLong(f, 0, Long.MAX_VALUE);
    LittleEndian.putInt(f, 8, new Crc32c().maskedCrc(f, 0, 8));
    assertThatThrownBy(() -> readAll(reader(f, CorruptRecordPolicy.FAILFAST)))
        .hasMessageContaining(
            "at byte offset 0: record length 9223372036854775807 exceeds maxRecordLength 1048576");
    byte[] neg = f.clone();
    LittleEndian.putLong(neg, 0, -1);
    LittleEndian.putInt(neg, 8, new Crc32c().maskedCrc(neg, 0, 8));
    assertThatThrownBy(() -> readAll(reader(neg, CorruptRecordPolicy.FAILFAST)))
        .hasMessageContaining("record length 18446744073709551615 exceeds maxRecordLength");
  }

  @Test
  void truncatedFilesAreCorruption() throws IOException {
    byte[] f = threeRecords();
    byte[] cutHeader = Arrays.copyOf(f, 19 + 5);
    assertThatThrownBy(() -> readAll(reader(cutHeader, CorruptRecordPolicy.FAILFAST)))
        .hasMessage(
            "Corrupt TFRecord file f.tfrecord at byte offset 19: truncated record header: 5 of 12 bytes before the end of the file");
    byte[] cutData = Arrays.copyOf(f, 19 + 14);
    assertThatThrownBy(() -> readAll(reader(cutData, CorruptRecordPolicy.FAILFAST)))
        .hasMessage(
            "Corrupt TFRecord file f.tfrecord at byte offset 19: truncated record: length 4 needs 20 bytes but the file ends after 14");
    TFRecordReader r = reader(cutData, CorruptRecordPolicy.DROPMALFORMED);
    assertThat(readAll(r)).containsExactly(new byte[] {1, 1, 1});
    assertThat(r.droppedRecords()).isEqualTo(1);
  }

  @Test
  void truncatedAndDamagedCompressedStreamsAreCorruption() throws IOException {
    List<byte[]> recs = randomRecords(new Random(3), 200, 500);
    for (TFRecordCompression c :
        new TFRecordCompression[] {TFRecordCompression.GZIP, TFRecordCompression.ZLIB}) {
      byte[] f = frame(recs, c);
      byte[] cut = Arrays.copyOf(f, f.length / 2);
      assertThatThrownBy(() -> readAll(open(cut, c, CorruptRecordPolicy.FAILFAST)))
          .as(c.name())
          .isInstanceOf(TFRecordCorruptException.class)
          .hasMessageContaining("Corrupt TFRecord file f at byte offset");
      TFRecordReader r = open(cut, c, CorruptRecordPolicy.DROPMALFORMED);
      List<byte[]> back = readAll(r);
      assertThat(back.size()).isBetween(1, recs.size() - 1);
      for (int i = 0; i < back.size(); i++) {
        assertThat(back.get(i)).isEqualTo(recs.get(i));
      }
      assertThat(r.droppedRecords()).isEqualTo(1);

      byte[] damaged = f.clone();
      for (int i = f.length / 3; i < f.length / 3 + 64; i++) {
        damaged[i] = (byte) 0xA5;
      }
      assertThatThrownBy(() -> readAll(open(damaged, c, CorruptRecordPolicy.FAILFAST)))
          .as(c.name())
          .isInstanceOf(TFRecordCorruptException.class);
    }
  }

  private static TFRecordReader open(byte[] f, TFRecordCompression c, CorruptRecordPolicy p)
      throws IOException {
    InputStream in = c.decompress(new ByteArrayInputStream(f));
    return new TFRecordReader(in, "f", 0, Long.MAX_VALUE, 1 << 20, p);
  }

  @Test
  void corruptionAtASplitBoundaryIsReportedByThePreviousSplit() throws IOException {
    byte[] f = threeRecords();
    f[19 + 12] ^= 1; // second record (offset 19) is bad
    // Split [0, 19) ends exactly where the bad record starts; split [19, end) starts there.
    TFRecordReader first =
        new TFRecordReader(
            new ByteArrayInputStream(f), "f", 0, 19, 1 << 20, CorruptRecordPolicy.FAILFAST);
    assertThat(first.next()).isTrue();
    assertThatThrownBy(first::next).hasMessageContaining("at byte offset 19: data CRC mismatch");
  }
}
