package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Integer and sequence features from Parquet: INT32 and INT64 columns as int64 features (scalars
 * and fixed-length lists; values beyond 2^31, negative ones and ones whose bits look like NaNs come
 * out exactly), lists of integers (3-level and bare {@code repeated}) as id sequences and lists of
 * floats as float sequences, through a shuffle and padded batches with truncation counted; and each
 * bad input named with its file, row and column.
 */
class ParquetIntegerColumnsTest {
  private static final int MAX = 6;
  private static final int ROWS = 60;

  @TempDir Path dir;

  private static final MessageType SCHEMA =
      MessageTypeParser.parseMessageType(
          "message m {\n"
              + "  required int64 id;\n"
              + "  required int32 small;\n"
              + "  optional group pair (LIST) { repeated group list { required int64 element; } }\n"
              + "  optional group tokens (LIST) { repeated group list { optional int64 element; } }\n"
              + "  repeated int32 bare;\n"
              + "  optional group xs (LIST) { repeated group list { required float element; } }\n"
              + "  optional group holes (LIST) { repeated group list { optional int32 element; } }\n"
              + "  required float f;\n"
              + "  required int64 label;\n"
              + "}");

  /**
   * Row {@code id}'s token count (0..10: some beyond {@link #MAX}); a null list when id % 7 == 3.
   */
  static int lengthOf(long id) {
    return id % 7 == 3 ? 0 : (int) ((id * 7) % 11);
  }

  static long token(long id, int j) {
    return id * 1000 + j + (j % 2 == 0 ? 5_000_000_000L : 0); // beyond int32 too
  }

  /** An int64 whose halves look like a signalling NaN and a negative int: bits must survive. */
  static long odd(long id) {
    return 0x7F800001L | ((-1L - id) << 32);
  }

  private static void write(Path file, long first, int rows) throws IOException {
    SimpleGroupFactory groups = new SimpleGroupFactory(SCHEMA);
    try (ParquetWriter<Group> w =
        ExampleParquetWriter.builder(
                HadoopOutputFile.fromPath(
                    new org.apache.hadoop.fs.Path(file.toString()), new Configuration()))
            .withType(SCHEMA)
            .withDictionaryEncoding(first == 0) // one file dictionary-encoded, one PLAIN
            .build()) {
      for (long id = first; id < first + rows; id++) {
        Group g = groups.newGroup();
        g.append("id", id);
        g.append("small", (int) (-id - 1));
        Group pair = g.addGroup("pair");
        pair.addGroup("list").append("element", odd(id));
        pair.addGroup("list").append("element", -5_000_000_000L - id);
        if (id % 7 != 3) {
          Group tokens = g.addGroup("tokens"); // present and empty when the length is 0
          for (int j = 0; j < lengthOf(id); j++) {
            tokens.addGroup("list").append("element", token(id, j));
          }
        }
        for (int j = 0; j < id % 4; j++) {
          g.append("bare", (int) id + j);
        }
        Group xs = g.addGroup("xs");
        for (int j = 0; j < id % 3; j++) {
          xs.addGroup("list").append("element", id + 0.25f * j);
        }
        Group holes = g.addGroup("holes");
        holes.addGroup("list").append("element", 1);
        Group hole = holes.addGroup("list");
        if (id != 2) {
          hole.append("element", 2);
        }
        g.append("f", 0.5f * id);
        g.append("label", id % 3);
        w.write(g);
      }
    }
  }

  private Path data() throws IOException {
    Path d = dir.resolve("ints");
    Files.createDirectories(d);
    write(d.resolve("part-0.parquet"), 0, ROWS / 2);
    write(d.resolve("part-1.parquet"), ROWS / 2, ROWS / 2);
    return d;
  }

  private static DatasetSpec.Builder spec(Path d) {
    return DatasetSpec.builder()
        .addPath(d.toString())
        .optFormat(DatasetSpec.Format.PARQUET)
        .addIntFeature("id")
        .addIntFeature("small")
        .addIntFeature("pair", 2)
        .setLabel("label", DatasetSpec.LabelType.INT);
  }

  @Test
  void integersAndSequencesComeOutExactThroughShuffleAndPaddedBatches() throws IOException {
    DatasetSpec spec =
        spec(data())
            .addSequenceFeature("tokens", DatasetSpec.ValueType.INT64, MAX, 0)
            .addSequenceFeature("bare", DatasetSpec.ValueType.INT64, 8, 0)
            .addSequenceFeature("xs", DatasetSpec.ValueType.FLOAT32, 4, 0)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(8)
            .optShuffleBuffer(20)
            .optSeed(3)
            .optPadValue(-7)
            .optDropRemainder(false)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(spec, o, TestData.CONF);
    List<Long> seen = new ArrayList<>();
    long cut = 0;
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      while (it.hasNext()) {
        HostBatch b = it.next();
        int tTokens = b.paddedLength(3);
        int tBare = b.paddedLength(4);
        int tXs = b.paddedLength(5);
        for (int i = 0; i < b.size(); i++) {
          long id = b.column(0).getLong(8 * i);
          seen.add(id);
          assertThat(b.labels[i]).isEqualTo(id % 3);
          assertThat(b.column(1).getLong(8 * i)).isEqualTo(-id - 1);
          assertThat(b.column(2).getLong(16 * i)).isEqualTo(odd(id));
          assertThat(b.column(2).getLong(16 * i + 8)).isEqualTo(-5_000_000_000L - id);
          int m = Math.min(lengthOf(id), MAX);
          cut += lengthOf(id) > MAX ? 1 : 0;
          for (int j = 0; j < tTokens; j++) {
            assertThat(b.column(3).getLong(8 * (i * tTokens + j)))
                .as("id %d token %d", id, j)
                .isEqualTo(j < m ? token(id, j) : -7);
            assertThat(b.mask(3).getFloat(4 * (i * tTokens + j))).isEqualTo(j < m ? 1f : 0f);
          }
          for (int j = 0; j < tBare; j++) {
            assertThat(b.column(4).getLong(8 * (i * tBare + j)))
                .isEqualTo(j < id % 4 ? id + j : -7);
          }
          for (int j = 0; j < tXs; j++) {
            assertThat(b.column(5).getFloat(4 * (i * tXs + j)))
                .isEqualTo(j < id % 3 ? id + 0.25f * j : -7f);
            assertThat(b.mask(5).getFloat(4 * (i * tXs + j))).isEqualTo(j < id % 3 ? 1f : 0f);
          }
        }
        cut -= b.truncated();
      }
    }
    assertThat(seen).hasSize(ROWS).doesNotHaveDuplicates();
    assertThat(cut).as("truncated sequences counted by the batches").isZero();
    assertThat(seen).as("shuffled").isNotEqualTo(seen.stream().sorted().toList());
  }

  @Test
  void fixedIntColumnsDecodeStraightIntoBatches() throws IOException {
    DatasetSpec spec = spec(data()).build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(7)
            .optShuffleBuffer(0)
            .optDeterministic(false)
            .optDropRemainder(false)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(spec, o, TestData.CONF);
    List<Long> seen = new ArrayList<>();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      assertThat(p.unordered()).isTrue();
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      while (it.hasNext()) {
        HostBatch b = it.next();
        for (int i = 0; i < b.size(); i++) {
          long id = b.column(0).getLong(8 * i);
          seen.add(id);
          assertThat(b.column(1).getLong(8 * i)).isEqualTo(-id - 1);
          assertThat(b.column(2).getLong(16 * i)).isEqualTo(odd(id));
          assertThat(b.column(2).getLong(16 * i + 8)).isEqualTo(-5_000_000_000L - id);
          assertThat(b.labels[i]).isEqualTo(id % 3);
        }
      }
    }
    assertThat(seen).hasSize(ROWS).doesNotHaveDuplicates();
  }

  private static void readAll(Path file, DatasetSpec spec) throws IOException {
    Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
    try (ParquetStream s =
        new ParquetStream(
            split, spec, j -> true, new Configuration(), new ArrayPool(spec.featureSize(), 4))) {
      while (s.next() != null) {
        // decode every row
      }
    }
  }

  @Test
  void badInputFailsNamingFileRowAndColumn() throws IOException {
    Path d = data();
    Path file = d.resolve("part-0.parquet");
    // An id outside the vocabulary: row 1's first token is 5_000_001_000.
    DatasetSpec vocab =
        spec(d).addSequenceFeature("tokens", DatasetSpec.ValueType.INT64, MAX, 1_000_000).build();
    assertThatThrownBy(() -> readAll(file, vocab))
        .hasMessageContaining(
            "part-0.parquet, row 1: column 'tokens' value 0 is 5000001000: outside the vocabulary"
                + " [0, 1000000)");
    // A float column declared as ids, or as int64.
    DatasetSpec floatIds =
        spec(d).addSequenceFeature("xs", DatasetSpec.ValueType.INT64, 4, 0).build();
    assertThatThrownBy(() -> readAll(file, floatIds))
        .hasMessageContaining(
            "part-0.parquet: column 'xs' holds FLOAT values, declared a sequence of int64 ids"
                + " (COL:ids): expected INT32 or INT64 integers");
    DatasetSpec floatInt = spec(d).addIntFeature("f").build();
    assertThatThrownBy(() -> readAll(file, floatInt))
        .hasMessageContaining(
            "part-0.parquet: column 'f' holds FLOAT values, declared int64: expected INT32 or INT64"
                + " integers");
    // A fixed shape a row does not have: row 0 has 0 tokens.
    DatasetSpec shape = spec(d).addIntFeature("tokens", 3).build();
    assertThatThrownBy(() -> readAll(file, shape))
        .hasMessageContaining(
            "part-0.parquet, row 0: column 'tokens' has 0 values, expected 3 for shape [3]");
    // A null element inside a sequence (a null list is an empty one: row 3 above).
    DatasetSpec holes =
        spec(d).addSequenceFeature("holes", DatasetSpec.ValueType.INT64, 4, 0).build();
    assertThatThrownBy(() -> readAll(file, holes))
        .hasMessageContaining("part-0.parquet, row 2: column 'holes' has a null at value 1");
    // A null fixed int64 column.
    DatasetSpec nullFixed = spec(d).addIntFeature("tokens", 7).build();
    Path nulls = dir.resolve("nulls");
    Files.createDirectories(nulls);
    write(nulls.resolve("part-3.parquet"), 3, 1); // id 3: a null token list
    assertThatThrownBy(() -> readAll(nulls.resolve("part-3.parquet"), nullFixed))
        .hasMessageContaining("part-3.parquet, row 0: column 'tokens' is null");
  }
}
