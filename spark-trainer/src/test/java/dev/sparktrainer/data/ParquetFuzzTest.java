package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.column.ParquetProperties.WriterVersion;
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
 * Mutated Parquet files (bits flipped, bytes overwritten, runs of bytes overwritten, the file cut
 * short, a footer byte given an unknown Thrift type; anywhere, and half of them in the footer where
 * the structure lives), each planned as training plans it ({@link DatasetPlanner}: the rows counted
 * from the footer) and read whole through {@link ParquetStream}. Every read either gives exactly
 * the unmutated file's rows, or fails with an {@link IOException} that names the file: never
 * another exception, never an {@link OutOfMemoryError}, never a hang, never different values
 * without an error.
 *
 * <p>{@value #DEFAULT_MUTATIONS} mutations by default (a few seconds); {@code
 * -Dparquet.fuzz.mutations=N} for more, {@code -Dparquet.fuzz.seed=S} to replay a run.
 */
class ParquetFuzzTest {
  static final int DEFAULT_MUTATIONS = 600;

  @TempDir Path dir;

  private static final MessageType SCHEMA =
      MessageTypeParser.parseMessageType(
          "message m {\n"
              + "  required int64 id;\n"
              + "  optional group v (LIST) { repeated group list { required float element; } }\n"
              + "  required double d;\n"
              + "  required int32 i;\n"
              + "  required int64 label;\n"
              + "}");

  private static final int WIDTH = 6;

  private static final DatasetSpec SPEC =
      DatasetSpec.builder()
          .addPath("x")
          .optFormat(DatasetSpec.Format.PARQUET)
          .addFeature("id", 1)
          .addFeature("v", WIDTH)
          .addFeature("d", 1)
          .addFeature("i", 1)
          .setLabel("label", DatasetSpec.LabelType.INT)
          .build();

  private static void write(Path file, WriterVersion version, boolean dictionary)
      throws IOException {
    SimpleGroupFactory groups = new SimpleGroupFactory(SCHEMA);
    try (ParquetWriter<Group> w =
        ExampleParquetWriter.builder(
                HadoopOutputFile.fromPath(
                    new org.apache.hadoop.fs.Path(file.toString()), new Configuration()))
            .withType(SCHEMA)
            .withWriterVersion(version)
            .withDictionaryEncoding(dictionary)
            .withCompressionCodec(CompressionCodecName.SNAPPY)
            .withPageRowCountLimit(25)
            .withRowGroupSize(4096L)
            .build()) {
      for (long id = 0; id < 150; id++) {
        Group g = groups.newGroup();
        g.append("id", id);
        Group v = g.addGroup("v");
        for (int k = 0; k < WIDTH; k++) {
          v.addGroup("list").append("element", id % 3 == 0 ? k : id * 0.5f + k);
        }
        g.append("d", id * 1.25);
        g.append("i", (int) (id % 7) - 3);
        g.append("label", id % 10);
        w.write(g);
      }
    }
  }

  /**
   * Every row: its features then its label; first the file is planned as training plans it (the
   * driver counts its rows from the footer).
   */
  private static List<float[]> read(Path file) throws IOException {
    DatasetSpec spec = SPEC.toBuilder().setPaths(List.of(file.toString())).build();
    DatasetPlan plan =
        DatasetPlanner.plan(
            spec, PipelineOptions.builder().optBatchSize(1).build(), new Configuration());
    List<float[]> rows = new ArrayList<>();
    Split split = new Split(0, file.toString(), 0, Files.size(file), -1, null);
    try (ParquetStream s =
        new ParquetStream(
            split, SPEC, j -> true, new Configuration(), new ArrayPool(WIDTH + 3, 4))) {
      for (Record r = s.next(); r != null; r = s.next()) {
        float[] row = Arrays.copyOf(r.features, WIDTH + 4);
        row[WIDTH + 3] = (float) r.label;
        rows.add(row);
      }
    }
    return rows;
  }

  private static boolean same(List<float[]> a, List<float[]> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      if (!Arrays.equals(a.get(i), b.get(i))) {
        return false;
      }
    }
    return true;
  }

  @Test
  void everyMutatedFileReadsExactlyOrFailsNamingTheFile() throws Exception {
    int mutations = Integer.getInteger("parquet.fuzz.mutations", DEFAULT_MUTATIONS);
    long seed = Long.getLong("parquet.fuzz.seed", 24);
    Random rnd = new Random(seed);
    List<byte[]> bases = new ArrayList<>();
    List<List<float[]>> expected = new ArrayList<>();
    int n = 0;
    for (WriterVersion version : WriterVersion.values()) {
      for (boolean dictionary : new boolean[] {true, false}) {
        Path base = dir.resolve("base-" + n++ + ".parquet");
        write(base, version, dictionary);
        bases.add(Files.readAllBytes(base));
        expected.add(read(base));
        assertThat(expected.get(expected.size() - 1)).hasSize(150);
      }
    }
    List<String> problems = new ArrayList<>();
    int failed = 0;
    int exact = 0;
    ExecutorService reader = Executors.newSingleThreadExecutor();
    try {
      for (int m = 0; m < mutations && problems.size() < 10; m++) {
        int b = rnd.nextInt(bases.size());
        byte[] bytes = bases.get(b).clone();
        String what = mutate(bytes, rnd);
        Path file = dir.resolve("mutant-" + m + ".parquet");
        Files.write(file, bytes);
        String label = "mutation " + m + " (seed " + seed + ", base " + b + ", " + what + ")";
        Future<List<float[]>> f = reader.submit(() -> read(file));
        try {
          List<float[]> got = f.get(20, TimeUnit.SECONDS);
          if (same(got, expected.get(b))) {
            exact++;
          } else {
            problems.add(label + ": read " + got.size() + " rows that differ, without an error");
          }
        } catch (TimeoutException hang) {
          f.cancel(true);
          problems.add(label + ": still reading after 20 s");
          break; // the reader thread may be stuck for good
        } catch (java.util.concurrent.ExecutionException e) {
          Throwable t = e.getCause();
          if (!(t instanceof IOException)) {
            problems.add(label + ": " + t);
          } else if (t.getMessage() == null || !t.getMessage().contains(file.toString())) {
            problems.add(label + ": the error does not name the file: " + t);
          } else {
            failed++;
          }
        }
        Files.delete(file);
      }
    } finally {
      reader.shutdownNow();
    }
    assertThat(problems).as("%d failed naming the file, %d read exactly", failed, exact).isEmpty();
    assertThat(failed).as("mutations that failed").isPositive();
  }

  /** Mutates {@code b} in place; returns what it did. */
  private static String mutate(byte[] b, Random rnd) {
    int footer = footerLength(b);
    // Half in the footer (and its length and magic), half anywhere.
    boolean inFooter = rnd.nextBoolean() && footer > 0;
    int from = inFooter ? b.length - footer - 8 : 0;
    int at = from + rnd.nextInt(b.length - from);
    switch (rnd.nextInt(inFooter ? 5 : 4)) {
      case 0:
        int bit = rnd.nextInt(8);
        b[at] ^= (byte) (1 << bit);
        return "bit " + bit + " of byte " + at + " of " + b.length + " flipped";
      case 1:
        byte old = b[at];
        byte v = (byte) rnd.nextInt(256);
        b[at] = v;
        return "byte " + at + " of " + b.length + " " + old + " -> " + v;
      case 2:
        int len = 1 + rnd.nextInt(8);
        for (int k = at; k < Math.min(b.length, at + len); k++) {
          b[k] = (byte) rnd.nextInt(256);
        }
        return len + " bytes at " + at + " of " + b.length + " overwritten";
      case 4:
        // A Thrift field header of the footer given an unknown type (compact protocol types are
        // 1..12): "don't know what type: 15" from parquet-mr, before anything is read.
        b[at] = (byte) (b[at] | 0x0F);
        return "byte " + at + " of " + b.length + " given type 15";
      default:
        // Cut short: the rest zeroed (the length kept, so the footer is where the reader looks).
        Arrays.fill(b, at, b.length, (byte) 0);
        return "bytes from " + at + " of " + b.length + " zeroed";
    }
  }

  private static int footerLength(byte[] b) {
    int n = b.length;
    if (n < 12) {
      return 0;
    }
    int len =
        (b[n - 8] & 0xFF)
            | (b[n - 7] & 0xFF) << 8
            | (b[n - 6] & 0xFF) << 16
            | (b[n - 5] & 0xFF) << 24;
    return len > 0 && len < n - 12 ? len : 0;
  }
}
