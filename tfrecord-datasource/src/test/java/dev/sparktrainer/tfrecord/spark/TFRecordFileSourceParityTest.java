package dev.sparktrainer.tfrecord.spark;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.input_file_name;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.Appender;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.Logger;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Property;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The {@code tfrecord} source against Spark's built-in Parquet source on the same rows: corrupt
 * files under {@code ignoreCorruptFiles}, {@code input_file_name()} and the {@code _metadata} file
 * columns.
 */
class TFRecordFileSourceParityTest {
  private static final StructType SCHEMA = new StructType().add("id", "bigint").add("v", "float");
  private final SparkSession spark = SparkTestSession.get();
  @TempDir Path dir;

  /** The same 300 rows in 3 files of each format. */
  private Map<String, Path> write() {
    Dataset<Row> rows =
        spark
            .range(0, 300)
            .selectExpr("id", "cast(id * 0.5 as float) as v")
            .repartition(3, col("id"));
    Path pq = dir.resolve("parquet");
    Path tf = dir.resolve("tfrecord");
    rows.write().parquet(pq.toString());
    rows.write().format("tfrecord").save(tf.toString());
    // Hadoop's local file system keeps a .crc beside each file and would report the damage itself
    // (ChecksumException); drop them, as on HDFS or S3 the format's own reader is what notices.
    deleteChecksums(pq);
    deleteChecksums(tf);
    Map<String, Path> m = new HashMap<>();
    m.put("parquet", pq);
    m.put("tfrecord", tf);
    return m;
  }

  private static void deleteChecksums(Path d) {
    try (Stream<Path> s = Files.list(d)) {
      for (Path p :
          s.filter(p -> p.getFileName().toString().endsWith(".crc")).collect(Collectors.toList())) {
        Files.delete(p);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static List<Path> dataFiles(Path d) throws IOException {
    try (Stream<Path> s = Files.list(d)) {
      return s.filter(p -> p.getFileName().toString().startsWith("part-"))
          .sorted()
          .collect(Collectors.toList());
    }
  }

  private DataFrameReader reader(String format) {
    return spark.read().format(format).schema(SCHEMA);
  }

  private static Set<Long> ids(Dataset<Row> df) {
    return df.select("id").collectAsList().stream()
        .map(r -> r.getLong(0))
        .collect(Collectors.toCollection(TreeSet::new));
  }

  /** Ids in file order. */
  private List<Long> idsOf(String format, Path file) {
    return reader(format).load(file.toString()).select("id").collectAsList().stream()
        .map(r -> r.getLong(0))
        .collect(Collectors.toList());
  }

  private static void damageBothEnds(Path file) throws IOException {
    try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
      byte[] junk = new byte[16];
      Arrays.fill(junk, (byte) 0x5a);
      f.seek(0);
      f.write(junk);
      f.seek(f.length() - 16);
      f.write(junk);
    }
  }

  /** Records of a TFRecord file that end before {@code length} bytes. */
  private static int completeRecordsBefore(Path file, long length) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
    int n = 0;
    for (long at = 0; at + 8 <= b.limit(); n++) {
      long size = 16 + b.getLong((int) at);
      if (at + size > length) {
        break;
      }
      at += size;
    }
    return n;
  }

  private <T> T withSessionConf(String key, String value, Supplier<T> body) {
    String old = spark.conf().getOption(key).getOrElse(() -> null);
    spark.conf().set(key, value);
    try {
      return body.get();
    } finally {
      if (old == null) {
        spark.conf().unset(key);
      } else {
        spark.conf().set(key, old);
      }
    }
  }

  @Test
  void corruptFilesAreSkippedAsParquetsAre() throws IOException {
    Map<String, Path> dirs = write();
    Map<String, Set<Long>> expected = new HashMap<>();
    for (String format : List.of("parquet", "tfrecord")) {
      Path victim = dataFiles(dirs.get(format)).get(1);
      Set<Long> all = ids(reader(format).load(dirs.get(format).toString()));
      assertThat(all).hasSize(300);
      all.removeAll(idsOf(format, victim));
      expected.put(format, all);
      damageBothEnds(victim);
    }
    assertThat(expected.get("tfrecord"))
        .as("the same rows in the surviving files")
        .isEqualTo(expected.get("parquet"));
    for (String format : List.of("parquet", "tfrecord")) {
      String path = dirs.get(format).toString();
      for (String columnar : List.of("true", "false")) {
        Function<DataFrameReader, DataFrameReader> opts =
            r -> format.equals("tfrecord") ? r.option("columnar", columnar) : r;
        // off (the default): the read fails
        assertThatThrownBy(() -> ids(opts.apply(reader(format)).load(path)))
            .as(format + " default")
            .isNotNull();
        // the per-read option
        assertThat(ids(opts.apply(reader(format)).option("ignoreCorruptFiles", "true").load(path)))
            .as(format + " option, columnar " + columnar)
            .isEqualTo(expected.get(format));
        // the session conf, and the option winning over it
        assertThat(
                withSessionConf(
                    "spark.sql.files.ignoreCorruptFiles",
                    "true",
                    () -> ids(opts.apply(reader(format)).load(path))))
            .as(format + " session conf")
            .isEqualTo(expected.get(format));
        assertThatThrownBy(
                () ->
                    withSessionConf(
                        "spark.sql.files.ignoreCorruptFiles",
                        "true",
                        () ->
                            ids(
                                opts.apply(reader(format))
                                    .option("ignoreCorruptFiles", "false")
                                    .load(path))))
            .as(format + " option false over conf true")
            .isNotNull();
      }
    }
  }

  @Test
  void rowsReadBeforeTheCorruptionAreKept() throws IOException {
    Map<String, Path> dirs = write();
    Path victim = dataFiles(dirs.get("tfrecord")).get(0);
    List<Long> inOrder = idsOf("tfrecord", victim);
    Set<Long> expected = ids(reader("tfrecord").load(dirs.get("tfrecord").toString()));
    long cut = Files.size(victim) * 2 / 3 + 5; // mid-record
    int kept = completeRecordsBefore(victim, cut);
    assertThat(kept).isBetween(1, inOrder.size() - 1);
    expected.removeAll(inOrder.subList(kept, inOrder.size()));
    try (RandomAccessFile f = new RandomAccessFile(victim.toFile(), "rw")) {
      f.setLength(cut);
    }
    // Parquet, truncated the same way, loses the whole file (its footer is gone): the rule is the
    // same,
    // "skip the rest of the file", only where Parquet can start reading differs.
    Path pqVictim = dataFiles(dirs.get("parquet")).get(0);
    Set<Long> pqExpected = ids(reader("parquet").load(dirs.get("parquet").toString()));
    pqExpected.removeAll(idsOf("parquet", pqVictim));
    try (RandomAccessFile f = new RandomAccessFile(pqVictim.toFile(), "rw")) {
      f.setLength(Files.size(pqVictim) * 2 / 3 + 5);
    }
    assertThat(
            ids(
                reader("parquet")
                    .option("ignoreCorruptFiles", "true")
                    .load(dirs.get("parquet").toString())))
        .isEqualTo(pqExpected);
    List<String> warnings = new CopyOnWriteArrayList<>();
    Logger log = (Logger) LogManager.getLogger(TFRecordSplitsReader.class);
    Appender capture =
        new AbstractAppender("capture", null, null, true, Property.EMPTY_ARRAY) {
          @Override
          public void append(LogEvent event) {
            warnings.add(event.getLevel() + " " + event.getMessage().getFormattedMessage());
          }
        };
    capture.start();
    log.addAppender(capture);
    try {
      for (String columnar : List.of("true", "false")) {
        for (String batch : List.of("4096", "7")) {
          assertThat(
                  ids(
                      reader("tfrecord")
                          .option("columnar", columnar)
                          .option("batchSize", batch)
                          .option("ignoreCorruptFiles", "true")
                          .load(dirs.get("tfrecord").toString())))
              .as("columnar %s, batch %s", columnar, batch)
              .isEqualTo(expected);
        }
      }
    } finally {
      log.removeAppender(capture);
    }
    assertThat(warnings)
        .hasSize(4)
        .allSatisfy(
            w ->
                assertThat(w)
                    .startsWith("WARN Skipped the rest of the content in the corrupted file")
                    .contains(victim.getFileName().toString()));
  }

  @Test
  void missingFilesCountAsCorruptWhenOnlyCorruptFilesAreIgnored() throws IOException {
    // Spark 4.1's FilePartitionReader (the V2 file sources'): a file gone between listing and
    // reading
    // is skipped by ignoreMissingFiles, or else by ignoreCorruptFiles (FileNotFoundException is an
    // IOException). Parquet read through V2 (not in spark.sql.sources.useV1SourceList) does that;
    // its
    // default V1 scan (FileScanRDD) throws instead.
    Map<String, Path> dirs = write();
    for (String format : List.of("parquet", "tfrecord")) {
      Path d = dirs.get(format);
      Path gone = dataFiles(d).get(2);
      Set<Long> expected = ids(reader(format).load(d.toString()));
      expected.removeAll(idsOf(format, gone));
      Set<Long> got =
          withSessionConf(
              "spark.sql.sources.useV1SourceList",
              "",
              () -> {
                Dataset<Row> planned =
                    reader(format).option("ignoreCorruptFiles", "true").load(d.toString());
                try {
                  Files.delete(gone);
                } catch (IOException e) {
                  throw new UncheckedIOException(e);
                }
                return ids(planned);
              });
      assertThat(got).as(format).isEqualTo(expected);
    }
  }

  /** input_file_name() of every row: the file holding it, spelled as Parquet's scan spells it. */
  @Test
  void inputFileNameIsTheFileOfTheRow() throws IOException {
    Map<String, Path> dirs = write();
    Map<String, String> prefix = new HashMap<>();
    for (String format : List.of("parquet", "tfrecord")) {
      for (String columnar : List.of("true", "false")) {
        Path d = dirs.get(format);
        List<Row> rows =
            reader(format)
                .option("columnar", columnar)
                .load(d.toString())
                .select(
                    col("id"),
                    input_file_name().as("f"),
                    org.apache.spark.sql.functions.expr("input_file_block_start()"),
                    org.apache.spark.sql.functions.expr("input_file_block_length()"))
                .collectAsList();
        assertThat(rows).hasSize(300);
        Map<String, Set<Long>> byFile = new HashMap<>();
        for (Row r : rows) {
          byFile.computeIfAbsent(r.getString(1), k -> new TreeSet<>()).add(r.getLong(0));
          assertThat(r.getLong(2)).as(format + " input_file_block_start()").isZero();
          assertThat(r.getLong(3))
              .as(format + " input_file_block_length()")
              .isEqualTo(Files.size(Path.of(URI.create(r.getString(1)))));
        }
        List<Path> files = dataFiles(d);
        assertThat(byFile).as(format + ": one entry per file").hasSize(files.size());
        for (Path f : files) {
          String name =
              byFile.keySet().stream()
                  .filter(k -> k.endsWith("/" + f.getFileName()))
                  .findFirst()
                  .orElseThrow(
                      () ->
                          new AssertionError(
                              format + ": no row says it came from " + f + ": " + byFile.keySet()));
          assertThat(byFile.get(name)).isEqualTo(new TreeSet<>(idsOf(format, f)));
          prefix.put(format, name.substring(0, name.length() - f.toString().length()));
        }
      }
    }
    assertThat(prefix.get("tfrecord"))
        .as("the same URI form as Parquet's")
        .isEqualTo(prefix.get("parquet"));
  }

  /** The _metadata file columns, as Parquet fills them. */
  @Test
  void metadataColumnsAreFilledAsForParquet() throws IOException {
    Map<String, Path> dirs = write();
    String[] fields = {
      "file_path",
      "file_name",
      "file_size",
      "file_block_start",
      "file_block_length",
      "file_modification_time"
    };
    Map<String, List<String>> types = new HashMap<>();
    Map<String, String> forms = new HashMap<>();
    for (String format : List.of("parquet", "tfrecord")) {
      for (String columnar : List.of("true", "false")) {
        Path d = dirs.get(format);
        Dataset<Row> df = reader(format).option("columnar", columnar).load(d.toString());
        assertThat(df.columns()).as("_metadata is hidden from *").containsExactly("id", "v");
        List<Column> cols = new ArrayList<>();
        cols.add(col("id"));
        cols.add(input_file_name().as("input_file_name"));
        for (String f : fields) {
          cols.add(col("_metadata." + f).as(f));
        }
        Dataset<Row> selected = df.select(cols.toArray(new Column[0]));
        types.put(
            format,
            Arrays.stream(selected.schema().fields())
                .map(
                    f ->
                        f.name()
                            + " "
                            + f.dataType().simpleString()
                            + (f.nullable() ? " null" : " not null")
                            + " "
                            + f.metadata().json())
                .collect(Collectors.toList()));
        List<Row> rows = selected.collectAsList();
        assertThat(rows).hasSize(300);
        for (Row r : rows) {
          String path = r.getAs("file_path");
          Path local = Path.of(URI.create(path));
          assertThat(local.getParent()).isEqualTo(d);
          // Spark spells the two differently (file:/... and file:///...): as for Parquet
          String inputFileName = r.getAs("input_file_name");
          forms.put(
              format,
              path.substring(0, path.indexOf(d.toString()))
                  + " "
                  + inputFileName.substring(0, inputFileName.indexOf(d.toString())));
          assertThat((String) r.getAs("file_name")).isEqualTo(local.getFileName().toString());
          assertThat((long) r.getAs("file_size")).isEqualTo(Files.size(local));
          assertThat((long) r.getAs("file_block_start")).isZero();
          assertThat((long) r.getAs("file_block_length")).isEqualTo(Files.size(local));
          assertThat((Timestamp) r.getAs("file_modification_time"))
              .isEqualTo(new Timestamp(Files.getLastModifiedTime(local).toMillis()));
        }
        // the whole struct, a filter on it, and data columns beside it
        Path first = dataFiles(d).get(0);
        List<Row> filtered =
            df.where(col("_metadata.file_name").equalTo(first.getFileName().toString()))
                .select(col("id"), col("_metadata"))
                .collectAsList();
        Set<Long> filteredIds =
            filtered.stream().map(r -> r.getLong(0)).collect(Collectors.toCollection(TreeSet::new));
        assertThat(filteredIds).isEqualTo(new TreeSet<>(idsOf(format, first)));
        Row meta = filtered.get(0).getStruct(1);
        assertThat((long) meta.getAs("file_size")).isEqualTo(Files.size(first));
      }
    }
    assertThat(types.get("tfrecord"))
        .as("the same column types as Parquet's")
        .isEqualTo(types.get("parquet"));
    assertThat(forms.get("tfrecord"))
        .as("file_path and input_file_name() spelled as for Parquet")
        .isEqualTo(forms.get("parquet"));
  }

  @Test
  void metadataOfSplitsAndPartitionedDirectories() throws IOException {
    Path d = dir.resolve("parts");
    spark
        .range(0, 2000)
        .selectExpr("id", "cast(id as float) as v", "id % 2 as k")
        .repartition(1)
        .write()
        .partitionBy("k")
        .format("tfrecord")
        .save(d.toString());
    deleteChecksums(d.resolve("k=0"));
    deleteChecksums(d.resolve("k=1"));
    String old = spark.conf().get("spark.sql.files.maxPartitionBytes");
    spark.conf().set("spark.sql.files.maxPartitionBytes", "4096");
    try {
      for (String columnar : List.of("true", "false")) {
        List<Row> rows =
            spark
                .read()
                .format("tfrecord")
                .option("columnar", columnar)
                .load(d.toString())
                .select(
                    col("id"),
                    col("k"),
                    col("_metadata.file_path"),
                    col("_metadata.file_block_start"),
                    col("_metadata.file_block_length"),
                    col("_metadata.file_size"))
                .collectAsList();
        assertThat(rows).hasSize(2000);
        Map<String, Set<List<Long>>> blocks = new HashMap<>();
        for (Row r : rows) {
          assertThat(r.getString(2)).contains("/k=" + r.get(1) + "/");
          blocks
              .computeIfAbsent(
                  r.getString(2), k -> new TreeSet<>((a, b) -> Long.compare(a.get(0), b.get(0))))
              .add(List.of(r.getLong(3), r.getLong(4), r.getLong(5)));
        }
        assertThat(blocks).hasSize(2);
        for (Set<List<Long>> splits : blocks.values()) {
          assertThat(splits.size()).as("the file was split").isGreaterThan(1);
          long at = 0;
          for (List<Long> s : splits) {
            assertThat(s.get(0)).as("splits tile the file").isEqualTo(at);
            at += s.get(1);
          }
          assertThat(at).isEqualTo(splits.iterator().next().get(2));
        }
      }
    } finally {
      spark.conf().set("spark.sql.files.maxPartitionBytes", old);
    }
  }
}
