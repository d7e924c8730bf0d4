package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.column.ParquetProperties.WriterVersion;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * DECIMAL columns hold their values, not their unscaled integers: a DECIMAL(10,2) holding 12.34
 * reads as 12.34 on every physical type the format allows (INT32, INT64, fixed-length and plain
 * binary), as a feature, in a list and as the label, dictionary-encoded or not.
 */
class ParquetDecimalTest {
  @TempDir Path dir;

  private static final MessageType SCHEMA =
      MessageTypeParser.parseMessageType(
          "message m {\n"
              + "  required int64 id;\n"
              + "  required int32 d32 (DECIMAL(5,2));\n"
              + "  required int64 d64 (DECIMAL(10,2));\n"
              + "  required fixed_len_byte_array(9) dfix (DECIMAL(20,3));\n"
              + "  optional binary dbin (DECIMAL(12,4));\n"
              + "  optional group dl (LIST) {\n"
              + "    repeated group list { required int64 element (DECIMAL(12,2)); }\n"
              + "  }\n"
              + "  required int32 label (DECIMAL(4,1));\n"
              + "}");

  private static final DatasetSpec SPEC =
      DatasetSpec.builder()
          .addPath("x")
          .optFormat(DatasetSpec.Format.PARQUET)
          .addFeature("id", 1)
          .addFeature("d32", 1)
          .addFeature("d64", 1)
          .addFeature("dfix", 1)
          .addFeature("dbin", 1)
          .addFeature("dl", 2)
          .setLabel("label", DatasetSpec.LabelType.FLOAT)
          .build();

  /** The unscaled value of each decimal column of row {@code id}: 1234 + id, negative when odd. */
  private static long unscaled(long id) {
    return (id % 2 == 0 ? 1 : -1) * (1234 + id);
  }

  private static Binary bytes(long unscaled, int length) {
    byte[] b = BigInteger.valueOf(unscaled).toByteArray();
    if (length < 0) {
      return Binary.fromConstantByteArray(b);
    }
    byte[] out = new byte[length];
    Arrays.fill(out, unscaled < 0 ? (byte) -1 : 0); // sign-extended, big-endian
    System.arraycopy(b, 0, out, length - b.length, b.length);
    return Binary.fromConstantByteArray(out);
  }

  private static void write(Path file, int rows, WriterVersion version, boolean dictionary)
      throws IOException {
    SimpleGroupFactory groups = new SimpleGroupFactory(SCHEMA);
    try (ParquetWriter<Group> w =
        ExampleParquetWriter.builder(
                HadoopOutputFile.fromPath(
                    new org.apache.hadoop.fs.Path(file.toString()), new Configuration()))
            .withType(SCHEMA)
            .withWriterVersion(version)
            .withDictionaryEncoding(dictionary)
            .withPageRowCountLimit(7)
            .build()) {
      for (long id = 0; id < rows; id++) {
        long u = unscaled(id);
        Group g = groups.newGroup();
        g.append("id", id);
        g.append("d32", (int) u);
        g.append("d64", u);
        g.append("dfix", bytes(u, 9));
        g.append("dbin", bytes(u, -1));
        Group l = g.addGroup("dl");
        l.addGroup("list").append("element", u);
        l.addGroup("list").append("element", -u);
        g.append("label", (int) (id % 10));
        w.write(g);
      }
    }
  }

  private static float value(long unscaled, int scale) {
    return BigDecimal.valueOf(unscaled, scale).floatValue();
  }

  @Test
  void decimalsReadAsTheirValuesOnEveryPhysicalType() throws IOException {
    int rows = 40;
    for (WriterVersion version : WriterVersion.values()) {
      for (boolean dictionary : new boolean[] {true, false}) {
        Path file = dir.resolve(version + "-" + dictionary + ".parquet");
        write(file, rows, version, dictionary);
        List<float[]> features = new ArrayList<>();
        List<Double> labels = new ArrayList<>();
        Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
        try (ParquetStream s =
            new ParquetStream(split, SPEC, j -> true, new Configuration(), new ArrayPool(7, 4))) {
          for (Record r = s.next(); r != null; r = s.next()) {
            features.add(r.features.clone());
            labels.add(r.label);
          }
        }
        assertThat(features).hasSize(rows);
        for (int id = 0; id < rows; id++) {
          long u = unscaled(id);
          assertThat(features.get(id))
              .as("%s, dictionary %s, row %d", version, dictionary, id)
              .containsExactly(
                  id,
                  value(u, 2),
                  value(u, 2),
                  value(u, 3),
                  value(u, 4),
                  value(u, 2),
                  value(-u, 2));
          assertThat(labels.get(id)).isCloseTo((id % 10) / 10.0, within(1e-12));
        }
        // The first row, by eye: DECIMAL(10,2) 12.34, not 1234.
        assertThat(features.get(0)[2]).isEqualTo(12.34f);
      }
    }
  }

  private static org.assertj.core.data.Offset<Double> within(double d) {
    return org.assertj.core.data.Offset.offset(d);
  }
}
