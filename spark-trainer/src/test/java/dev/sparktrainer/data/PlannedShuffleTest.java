package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.PipelineOptions.ShardingPolicy;
import dev.sparktrainer.data.PipelineOptions.UnevenPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The planned shuffle ({@link PlannedReaders}: the order worked out on record indices, records
 * decoded by their readers straight into their batches) gives exactly the batches of the producer
 * path with its shuffle buffer, in every configuration; and a split whose record count changed
 * since planning fails with its name.
 */
class PlannedShuffleTest {
  private static final int W = 4;

  @TempDir Path dir;

  /** {@code o} on the shuffle path named {@code path} ("buffer" or "planned"). */
  private static PipelineOptions on(PipelineOptions o, String path) {
    return o.toBuilder()
        .optShufflePath(PipelineOptions.ShufflePath.valueOf(path.toUpperCase(Locale.ROOT)))
        .build();
  }

  /** Every batch of an epoch from {@code skip}: ids, and each row's features and label checked. */
  private static List<List<Long>> batches(
      DatasetPlan plan, PipelineOptions o, int rank, int n, int epoch, long skip, String path) {
    List<List<Long>> out = new ArrayList<>();
    try (InputPipeline p = InputPipeline.create(plan, on(o, path), rank, n, TestData.CONF)) {
      assertThat(p.planned()).as("planned path in use").isEqualTo(path.equals("planned"));
      Iterator<HostBatch> it = p.hostEpoch(epoch, skip);
      while (it.hasNext()) {
        HostBatch b = it.next();
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < b.size; i++) {
          long id = TestData.idOf(b, i, W);
          ids.add(id);
          assertThat(b.labels[i]).isEqualTo(id % 10);
          assertThat(b.feature(0, i * W + 3)).isEqualTo(id + 1.5f);
        }
        out.add(ids);
      }
      assertThat(out).as("steps").hasSize((int) (p.stepsPerEpoch() - skip));
    }
    return out;
  }

  @Test
  void sameBatchesAsTheShuffleBufferInEveryConfiguration() throws IOException {
    TestData.writeTFRecords(
        dir.resolve("d"), W, 0, TFRecordCompression.NONE, 100, 37, 5, 260, 1, 64, 0, 90);
    DatasetPlan plan =
        DatasetPlanner.plan(
            TestData.spec(dir.resolve("d"), W), PipelineOptions.builder().build(), TestData.CONF);
    int cases = 0;
    for (ShardingPolicy policy : new ShardingPolicy[] {ShardingPolicy.FILE, ShardingPolicy.DATA}) {
      for (UnevenPolicy uneven : UnevenPolicy.values()) {
        for (boolean drop : new boolean[] {true, false}) {
          for (int[] shape :
              new int[][] {{8, 50, 3, 1}, {5, 1000, 2, 4}, {16, 7, 4, 2}, {3, 2, 1, 1}}) {
            for (int n : new int[] {1, 3}) {
              PipelineOptions o =
                  PipelineOptions.builder()
                      .optBatchSize(shape[0])
                      .optShuffleBuffer(shape[1])
                      .optCycleLength(shape[2])
                      .optBlockLength(shape[3])
                      .optSharding(policy)
                      .optUneven(uneven)
                      .optDropRemainder(drop)
                      .optSeed(cases)
                      .optMemoryBudgetBytes(8 << 20)
                      .build();
              for (int rank = 0; rank < n; rank += 2) {
                String what =
                    policy
                        + " "
                        + uneven
                        + " drop="
                        + drop
                        + " batch/shuffle/cycle/block="
                        + Arrays.toString(shape)
                        + " rank "
                        + rank
                        + "/"
                        + n;
                List<List<Long>> expected = batches(plan, o, rank, n, 1, 0, "buffer");
                assertThat(batches(plan, o, rank, n, 1, 0, "planned")).as(what).isEqualTo(expected);
                long skip = expected.size() / 2;
                assertThat(batches(plan, o, rank, n, 1, skip, "planned"))
                    .as(what + " resumed at " + skip)
                    .isEqualTo(expected.subList((int) skip, expected.size()));
                cases++;
              }
            }
          }
        }
      }
    }
    assertThat(cases).isEqualTo(2 * 3 * 2 * 4 * 3);
  }

  @Test
  void epochsAndPreparedEpochsMatchAndReshuffle() throws IOException {
    TestData.writeTFRecords(dir.resolve("d"), W, 0, TFRecordCompression.NONE, 300, 200, 100, 400);
    DatasetPlan plan =
        DatasetPlanner.plan(
            TestData.spec(dir.resolve("d"), W), PipelineOptions.builder().build(), TestData.CONF);
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(10)
            .optShuffleBuffer(120)
            .optCycleLength(2)
            .optSeed(3)
            .optMemoryBudgetBytes(8 << 20)
            .build();
    List<List<List<Long>>> expected = new ArrayList<>();
    for (int e = 0; e < 3; e++) {
      expected.add(batches(plan, o, 0, 1, e, 0, "buffer"));
    }
    assertThat(expected.get(1)).isNotEqualTo(expected.get(0));
    try (InputPipeline p = InputPipeline.create(plan, on(o, "planned"), 0, 1, TestData.CONF)) {
      for (int e = 0; e < 3; e++) {
        Iterator<HostBatch> it = p.hostEpoch(e, 0);
        p.prepare(e + 1); // started ahead, as the trainer does
        List<List<Long>> got = new ArrayList<>();
        while (it.hasNext()) {
          HostBatch b = it.next();
          List<Long> ids = new ArrayList<>();
          for (int i = 0; i < b.size; i++) {
            ids.add(TestData.idOf(b, i, W));
          }
          got.add(ids);
        }
        assertThat(got).as("epoch " + e).isEqualTo(expected.get(e));
      }
    }
  }

  /** Rows as (id, feature 1) pairs: what a transform wrote into feature 1 is compared too. */
  private static List<String> rows(
      DatasetPlan plan, PipelineOptions o, int epoch, long skip, String path) {
    List<String> out = new ArrayList<>();
    try (InputPipeline p = InputPipeline.create(plan, on(o, path), 0, 1, TestData.CONF)) {
      assertThat(p.planned()).isEqualTo(path.equals("planned"));
      p.hostEpoch(epoch, skip)
          .forEachRemaining(
              b -> {
                for (int i = 0; i < b.size; i++) {
                  out.add(
                      TestData.idOf(b, i, W) + ":" + b.feature(0, i * W + 1) + ":" + b.labels[i]);
                }
              });
    }
    return out;
  }

  @Test
  void aMapRunsWhereRecordsAreDecodedWithTheSameDrawsAsTheBufferPath() throws IOException {
    TestData.writeTFRecords(dir.resolve("d"), W, 0, TFRecordCompression.NONE, 120, 80, 33, 150);
    DatasetPlan plan =
        DatasetPlanner.plan(
            TestData.spec(dir.resolve("d"), W), PipelineOptions.builder().build(), TestData.CONF);
    ExampleTransform noise =
        ex -> {
          ex.set(0, 1, ex.random().nextFloat());
          ex.setLabel(ex.label() + 100);
        };
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(8)
            .optShuffleBuffer(60)
            .optCycleLength(3)
            .optSeed(5)
            .optMemoryBudgetBytes(8 << 20)
            .optTransform(noise)
            .build();
    List<String> expected = rows(plan, o, 2, 0, "buffer");
    assertThat(expected)
        .allMatch(
            r -> r.endsWith(":" + (Long.parseLong(r.split(":")[0]) % 10 + 100.0)), "mapped label");
    assertThat(rows(plan, o, 2, 0, "planned")).isEqualTo(expected);
    assertThat(rows(plan, o, 2, 7, "planned")).isEqualTo(expected.subList(7 * 8, expected.size()));
  }

  @Test
  void aSplitWhoseRecordCountChangedIsNamed() throws Exception {
    Path d = dir.resolve("d");
    TestData.writeTFRecords(d, W, 0, TFRecordCompression.NONE, 60, 60, 60);
    DatasetPlan plan =
        DatasetPlanner.plan(TestData.spec(d, W), PipelineOptions.builder().build(), TestData.CONF);
    Path changed = d.resolve("part-001.tfrecord");
    Path other = dir.resolve("other");
    TestData.writeTFRecords(other, W, 1000, TFRecordCompression.NONE, 45);
    try (var files = Files.list(other)) {
      Files.copy(
          files
              .filter(f -> f.getFileName().toString().endsWith(".tfrecord"))
              .findFirst()
              .orElseThrow(),
          changed,
          StandardCopyOption.REPLACE_EXISTING);
    }
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(8)
            .optShuffleBuffer(1000)
            .optCycleLength(3)
            .optMemoryBudgetBytes(8 << 20)
            .optShufflePath(PipelineOptions.ShufflePath.PLANNED)
            .build();
    Assertions.assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () -> {
          try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
            assertThatThrownBy(() -> p.hostEpoch(0, 0).forEachRemaining(b -> {}))
                .isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining("part-001.tfrecord")
                .hasMessageContaining("ended after 45 of the records")
                .hasMessageContaining("changed since");
          }
        });
  }
}
