package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import java.util.function.Consumer;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.bytes.HeapByteBufferAllocator;
import org.apache.parquet.column.ParquetProperties.WriterVersion;
import org.apache.parquet.column.values.rle.RunLengthBitPackingHybridEncoder;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The bulk page decoder: its RLE/bit-packed hybrid decoding against parquet-mr's encoder, and whole
 * files in every page layout parquet-mr writes (data page v1 and v2, dictionary or not, many small
 * pages, BYTE_STREAM_SPLIT and DELTA values through parquet-mr's values readers) read back exactly.
 */
class BulkColumnReaderTest {
  @TempDir Path dir;

  @Test
  void hybridDecodingMatchesParquetMrsEncoderAtEveryBitWidth() throws IOException {
    Random rnd = new Random(7);
    for (int width = 0; width <= 32; width++) {
      int n = 1000 + rnd.nextInt(100);
      int[] values = new int[n];
      long bound = 1L << width;
      for (int i = 0; i < n; i++) {
        // Runs (RLE) and noise (bit-packed) alternating.
        boolean run = (i / 50) % 2 == 0;
        long v = width == 0 ? 0 : run ? bound - 1 : (rnd.nextLong() & Long.MAX_VALUE) % bound;
        values[i] = (int) v;
      }
      RunLengthBitPackingHybridEncoder enc =
          new RunLengthBitPackingHybridEncoder(
              width, 64, 1 << 16, HeapByteBufferAllocator.getInstance());
      for (int v : values) {
        enc.writeInt(v);
      }
      ByteBuffer bytes = enc.toBytes().toByteBuffer();
      int[] out = new int[n];
      BulkColumnReader.hybrid(bytes, width, out, n);
      assertThat(out).as("bit width %d", width).containsExactly(values);
      enc.close();
      if (width <= 12) {
        // The fused dictionary lookup gives the same as ids then gather.
        float[] dict = new float[1 << width];
        for (int k = 0; k < dict.length; k++) {
          dict[k] = k * 0.5f - 3;
        }
        float[] gathered = new float[n];
        ByteBuffer b = bytes.duplicate();
        BulkColumnReader.hybridGather(
            b.array(),
            b.arrayOffset() + b.position(),
            b.arrayOffset() + b.limit(),
            width,
            dict,
            gathered,
            n);
        for (int k = 0; k < n; k++) {
          assertThat(gathered[k]).as("bit width %d, value %d", width, k).isEqualTo(dict[values[k]]);
        }
      }

      if (width > 0) {
        int w = width;
        ByteBuffer cut = bytes.duplicate();
        cut.limit(cut.position() + cut.remaining() / 2);
        assertThatThrownBy(() -> BulkColumnReader.hybrid(cut, w, new int[n], n))
            .isInstanceOf(IOException.class)
            .hasMessageContaining("cut off");
      }
    }
  }

  private static final MessageType SCHEMA =
      MessageTypeParser.parseMessageType(
          "message m {\n"
              + "  required int64 id;\n"
              + "  optional group v (LIST) { repeated group list { required float element; } }\n"
              + "  optional group w (LIST) { repeated group list { optional double element; } }\n"
              + "  required int32 i;\n"
              + "  optional float f;\n"
              + "  required int64 label;\n"
              + "}");
  private static final int WIDTH = 37;

  private static float v(long id, int k) {
    // Few distinct values in even rows (dictionary-friendly), many in odd ones.
    return id % 2 == 0 ? k % 5 : id * 0.25f + k;
  }

  private static void write(
      Path file,
      int rows,
      WriterVersion version,
      boolean dictionary,
      boolean byteStreamSplit,
      long nullRow)
      throws IOException {
    SimpleGroupFactory groups = new SimpleGroupFactory(SCHEMA);
    org.apache.hadoop.fs.Path p = new org.apache.hadoop.fs.Path(file.toString());
    try (ParquetWriter<Group> w =
        ExampleParquetWriter.builder(HadoopOutputFile.fromPath(p, new Configuration()))
            .withType(SCHEMA)
            .withWriterVersion(version)
            .withDictionaryEncoding(dictionary)
            .withByteStreamSplitEncoding(byteStreamSplit)
            .withCompressionCodec(CompressionCodecName.SNAPPY)
            .withPageRowCountLimit(7)
            .withPageSize(512)
            .withMinRowCountForPageSizeCheck(1)
            .build()) {
      for (long id = 0; id < rows; id++) {
        Group g = groups.newGroup();
        g.append("id", id);
        Group v = g.addGroup("v");
        for (int k = 0; k < WIDTH; k++) {
          v.addGroup("list").append("element", v(id, k));
        }
        Group wl = g.addGroup("w");
        for (int k = 0; k < 2; k++) {
          Group e = wl.addGroup("list");
          if (id != nullRow) {
            e.append("element", id * 10.0 + k);
          }
        }
        g.append("i", (int) (id % 3) - 1);
        g.append("f", id / 4f);
        g.append("label", id % 10);
        w.write(g);
      }
    }
  }

  private static final DatasetSpec SPEC =
      DatasetSpec.builder()
          .addPath("x")
          .optFormat(DatasetSpec.Format.PARQUET)
          .addFeature("id", 1)
          .addFeature("v", WIDTH)
          .addFeature("w", 2)
          .addFeature("i", 1)
          .addFeature("f", 1)
          .setLabel("label", DatasetSpec.LabelType.INT)
          .build();

  private static float[] expected(long id) {
    float[] e = new float[1 + WIDTH + 2 + 2];
    e[0] = id;
    for (int k = 0; k < WIDTH; k++) {
      e[1 + k] = v(id, k);
    }
    e[1 + WIDTH] = id * 10f;
    e[2 + WIDTH] = id * 10f + 1;
    e[3 + WIDTH] = (int) (id % 3) - 1;
    e[4 + WIDTH] = id / 4f;
    return e;
  }

  @Test
  void readsEveryPageLayoutParquetMrWrites() throws IOException {
    int rows = 300;
    int n = 0;
    for (WriterVersion version : WriterVersion.values()) {
      for (boolean dictionary : new boolean[] {true, false}) {
        for (boolean split : new boolean[] {false, true}) {
          Path file = dir.resolve("f" + n++ + ".parquet");
          write(file, rows, version, dictionary, split, -1);
          String what = version + ", dictionary " + dictionary + ", byte stream split " + split;
          long[] next = {0};
          readFile(
              file,
              r -> {
                long id = next[0]++;
                assertThat(r.features).as("%s: row %d", what, id).containsExactly(expected(id));
                assertThat(r.label).isEqualTo(id % 10);
              });
          assertThat(next[0]).as(what).isEqualTo(rows);
          // Every third row only: the others are skipped without decoding.
          Split s = new Split(0, file.toString(), 0, Files.size(file), rows, null);
          long[] seen = {0};
          try (ParquetStream st =
              new ParquetStream(
                  s, SPEC, j -> j % 3 == 2, new Configuration(), new ArrayPool(42, 4))) {
            for (Record r = st.next(); r != null; r = st.next()) {
              long id = 3 * seen[0]++ + 2;
              assertThat(r.features).as("%s: owned row %d", what, id).containsExactly(expected(id));
            }
          }
          assertThat(seen[0]).isEqualTo(rows / 3);
        }
      }
    }
  }

  @Test
  void aNullElementFailsNamingFileRowAndColumn() throws IOException {
    for (WriterVersion version : WriterVersion.values()) {
      Path file = dir.resolve("null-" + version + ".parquet");
      write(file, 60, version, true, false, 45);
      assertThatThrownBy(() -> readFile(file, r -> {}))
          .isInstanceOf(IOException.class)
          .hasMessageContaining(file.getFileName() + ", row 45: column 'w' has a null at value 0");
    }
  }

  private static void readFile(Path file, Consumer<Record> to) throws IOException {
    Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
    try (ParquetStream s =
        new ParquetStream(split, SPEC, j -> true, new Configuration(), new ArrayPool(42, 4))) {
      for (Record r = s.next(); r != null; r = s.next()) {
        to.accept(new Record(Arrays.copyOf(r.features, r.features.length), r.label));
      }
    }
  }
}
