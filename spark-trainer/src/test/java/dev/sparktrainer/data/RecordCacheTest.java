package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The decoded-record cache is keyed by each file's version: a rewritten file is read again. */
class RecordCacheTest {
  private static final int W = 4;

  @TempDir Path dir;

  private static List<Long> ids(InputPipeline p, int epoch) {
    List<Long> out = new ArrayList<>();
    for (Iterator<HostBatch> it = p.hostEpoch(epoch, 0); it.hasNext(); ) {
      HostBatch b = it.next();
      for (int i = 0; i < b.size; i++) {
        out.add(TestData.idOf(b, i, W));
      }
    }
    return out;
  }

  /** One run: plan the files, read an epoch through the cache. */
  private List<Long> run(PipelineOptions o) throws IOException {
    DatasetPlan plan = DatasetPlanner.plan(TestData.spec(dir.resolve("d"), W), o, TestData.CONF);
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      return ids(p, 0);
    }
  }

  private long cached() throws IOException {
    try (Stream<Path> files = Files.walk(dir.resolve("cache"))) {
      return files.filter(f -> f.toString().endsWith(".bin")).count();
    }
  }

  @Test
  void aFileRewrittenWithTheSameSizeAndCountIsReadAgain() throws IOException {
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(8)
            .optShuffleBuffer(0)
            .optDropRemainder(false)
            .optCacheDir(dir.resolve("cache").toString())
            .build();
    TestData.writeTFRecords(dir.resolve("d"), W, 0, TFRecordCompression.NONE, 30, 20);
    assertThat(run(o)).hasSize(50).allMatch(id -> id < 50);
    // A split's cache file is written when its reader closes its stream, before the reader
    // reports its end: once the pipeline is closed, every cache file is in place (and nothing
    // still writes into the directory).
    assertThat(cached()).as("cached splits").isEqualTo(2);

    // New records, same counts and the same bytes per record (ids 1000.. keep the labels' 0..9):
    // only the files' modification times tell the difference.
    Path part0 = dir.resolve("d/part-000.tfrecord");
    long before = Files.size(part0);
    FileTime mtime = Files.getLastModifiedTime(part0);
    TestData.writeTFRecords(dir.resolve("d"), W, 1000, TFRecordCompression.NONE, 30, 20);
    assertThat(Files.size(part0)).isEqualTo(before);
    for (String f : List.of("part-000.tfrecord", "part-001.tfrecord")) {
      Files.setLastModifiedTime(
          dir.resolve("d").resolve(f), FileTime.fromMillis(mtime.toMillis() + 60_000));
    }
    assertThat(run(o))
        .as("the next run reads the new records")
        .hasSize(50)
        .allMatch(id -> id >= 1000);
  }
}
