package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.bytes.BytesInput;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.Encoding;
import org.apache.parquet.column.statistics.Statistics;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Files whose counts disagree, written page by page with parquet-mr's own file writer: a column
 * chunk with fewer values than its row group has rows, one with more, and a page header declaring
 * billions of values in a few bytes. Each fails naming the file, the column and the row; none
 * yields a value from another row, and none allocates what the header claims.
 */
class ParquetCorruptFilesTest {
  @TempDir Path dir;

  private static final MessageType SCHEMA =
      MessageTypeParser.parseMessageType(
          "message m {\n  required int64 id;\n  required double label;\n}");

  private static final DatasetSpec SPEC =
      DatasetSpec.builder()
          .addPath("x")
          .optFormat(DatasetSpec.Format.PARQUET)
          .addFeature("id", 1)
          .setLabel("label", DatasetSpec.LabelType.FLOAT)
          .build();

  private static BytesInput plainLongs(long... v) {
    ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
    for (long x : v) {
      b.putLong(x);
    }
    return BytesInput.from(b.array());
  }

  private static BytesInput plainDoubles(double... v) {
    ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
    for (double x : v) {
      b.putDouble(x);
    }
    return BytesInput.from(b.array());
  }

  /**
   * Writes one row group of {@code rows} rows: the id column's one page holds {@code ids}, the
   * label column's pages hold {@code labelPages}, each page declaring {@code declared} values if
   * non-negative, else its own count.
   */
  private static void write(
      Path file, long rows, long[] ids, List<double[]> labelPages, int declared)
      throws IOException {
    ParquetFileWriter w =
        new ParquetFileWriter(
            HadoopOutputFile.fromPath(
                new org.apache.hadoop.fs.Path(file.toString()), new Configuration()),
            SCHEMA,
            ParquetFileWriter.Mode.CREATE,
            1 << 20,
            0);
    w.start();
    w.startBlock(rows);
    ColumnDescriptor id = SCHEMA.getColumnDescription(new String[] {"id"});
    w.startColumn(id, ids.length, CompressionCodecName.UNCOMPRESSED);
    BytesInput idBytes = plainLongs(ids);
    w.writeDataPage(
        ids.length,
        (int) idBytes.size(),
        idBytes,
        Statistics.createStats(id.getPrimitiveType()),
        Encoding.BIT_PACKED,
        Encoding.BIT_PACKED,
        Encoding.PLAIN);
    w.endColumn();
    ColumnDescriptor label = SCHEMA.getColumnDescription(new String[] {"label"});
    long n = 0;
    for (double[] p : labelPages) {
      n += declared >= 0 ? declared : p.length;
    }
    w.startColumn(label, n, CompressionCodecName.UNCOMPRESSED);
    for (double[] p : labelPages) {
      BytesInput bytes = plainDoubles(p);
      w.writeDataPage(
          declared >= 0 ? declared : p.length,
          (int) bytes.size(),
          bytes,
          Statistics.createStats(label.getPrimitiveType()),
          Encoding.BIT_PACKED,
          Encoding.BIT_PACKED,
          Encoding.PLAIN);
    }
    w.endColumn();
    w.endBlock();
    w.end(Map.of());
  }

  private static List<Record> read(Path file) throws IOException {
    List<Record> out = new ArrayList<>();
    Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
    try (ParquetStream s =
        new ParquetStream(split, SPEC, j -> true, new Configuration(), new ArrayPool(1, 4))) {
      for (Record r = s.next(); r != null; r = s.next()) {
        out.add(new Record(r.features.clone(), r.label));
      }
    }
    return out;
  }

  @Test
  void theFixtureReadsBackWhenItsCountsAgree() throws IOException {
    Path file = dir.resolve("good.parquet");
    write(
        file,
        5,
        new long[] {0, 1, 2, 3, 4},
        List.of(new double[] {10, 11}, new double[] {12, 13, 14}),
        -1);
    List<Record> rows = read(file);
    assertThat(rows).hasSize(5);
    for (int i = 0; i < 5; i++) {
      assertThat(rows.get(i).features).containsExactly(i);
      assertThat(rows.get(i).label).isEqualTo(10 + i);
    }
  }

  @Test
  void aColumnChunkShorterThanItsRowGroupFailsNamingFileColumnAndRow() throws IOException {
    // 5 rows, but the label column holds 3 values (pages of 2 and 1): rows 3 and 4 have no label.
    Path file = dir.resolve("short-label.parquet");
    write(
        file, 5, new long[] {0, 1, 2, 3, 4}, List.of(new double[] {10, 11}, new double[] {12}), -1);
    List<Record> seen = new ArrayList<>();
    assertThatThrownBy(
            () -> {
              Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
              try (ParquetStream s =
                  new ParquetStream(
                      split, SPEC, j -> true, new Configuration(), new ArrayPool(1, 4))) {
                for (Record r = s.next(); r != null; r = s.next()) {
                  seen.add(new Record(r.features.clone(), r.label));
                }
              }
            })
        .isInstanceOf(IOException.class)
        .hasMessageContaining(file.toString())
        .hasMessageContaining("row 3")
        .hasMessageContaining("'label'");
    assertThat(seen).hasSize(3);
    for (int i = 0; i < 3; i++) {
      assertThat(seen.get(i).label).isEqualTo(10 + i);
    }
  }

  @Test
  void aColumnChunkLongerThanItsRowGroupFailsNamingFileAndColumn() throws IOException {
    // 3 rows, but the label column holds 5 values: a row count cut short, not rows to drop.
    Path file = dir.resolve("long-label.parquet");
    write(file, 3, new long[] {0, 1, 2}, List.of(new double[] {10, 11, 12, 13, 14}), -1);
    assertThatThrownBy(() -> read(file))
        .isInstanceOf(IOException.class)
        .hasMessageContaining(file.toString())
        .hasMessageContaining("'label'");
  }

  @Test
  void aPageDeclaringBillionsOfValuesFailsWithoutAllocatingThem() throws IOException {
    // A page header (and the chunk's count in the footer) declaring ~2^31 values in 16 bytes.
    int huge = Integer.MAX_VALUE - 8;
    Path bounded = dir.resolve("huge-page.parquet");
    write(bounded, 2, new long[] {0, 1}, List.of(new double[] {10, 11}), huge);
    assertThat(Files.size(bounded)).isLessThan(1000);
    assertThatThrownBy(() -> read(bounded))
        .isInstanceOf(IOException.class)
        .hasMessageContaining(bounded.toString())
        .hasMessageContaining("'label'")
        .hasMessageContaining(String.valueOf(huge));
    // The row group's row count claiming as many rows too: the id column's own count then
    // disagrees,
    // and the label's page still cannot be more than a reader decodes at once.
    Path claimed = dir.resolve("huge-rows.parquet");
    write(claimed, huge, new long[] {0, 1}, List.of(new double[] {10, 11}), huge);
    assertThatThrownBy(() -> read(claimed))
        .isInstanceOf(IOException.class)
        .hasMessageContaining(claimed.toString());
  }
}
