package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.PipelineOptions.ShardingPolicy;
import dev.sparktrainer.data.PipelineOptions.UnevenPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class InputPipelineTest {
  private static final int W = 4;

  @TempDir Path dir;

  /** The ids one worker sees in one epoch, batch by batch. */
  private static List<Long> ids(InputPipeline p, int epoch) {
    List<Long> out = new ArrayList<>();
    Iterator<HostBatch> it = p.hostEpoch(epoch, 0);
    long batches = 0;
    while (it.hasNext()) {
      HostBatch b = it.next();
      for (int i = 0; i < b.size; i++) {
        out.add(TestData.idOf(b, i, W));
        assertThat(b.labels[i]).isEqualTo(TestData.idOf(b, i, W) % 10);
        assertThat(b.feature(0, i * W + 3)).isEqualTo(TestData.idOf(b, i, W) + 1.5f);
      }
      batches++;
    }
    assertThat(batches).as("batches of an epoch").isEqualTo(p.stepsPerEpoch());
    return out;
  }

  private DatasetPlan plan(int... counts) throws IOException {
    TestData.writeTFRecords(dir.resolve("d"), W, 0, TFRecordCompression.NONE, counts);
    return DatasetPlanner.plan(
        TestData.spec(dir.resolve("d"), W), PipelineOptions.builder().build(), TestData.CONF);
  }

  private static PipelineOptions.Builder opts() {
    return PipelineOptions.builder()
        .optBatchSize(8)
        .optShuffleBuffer(50)
        .optCycleLength(3)
        .optMemoryBudgetBytes(8 << 20);
  }

  /** Every record is seen by exactly one worker per epoch; every worker takes the same steps. */
  @Test
  void exactlyOnceCoverageForEveryPolicy() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64); // uneven shards
    long total = plan.totalRecords();
    for (ShardingPolicy policy : ShardingPolicy.values()) {
      for (int n : new int[] {1, 2, 3, 7}) {
        if (policy == ShardingPolicy.FILE && n > plan.splits().size()) {
          continue;
        }
        PipelineOptions o =
            opts().optSharding(policy).optDropRemainder(false).optUneven(UnevenPolicy.PAD).build();
        Set<Long> union = new HashSet<>();
        long steps = -1;
        for (int r = 0; r < n; r++) {
          try (InputPipeline p = InputPipeline.create(plan, o, r, n, TestData.CONF)) {
            if (steps < 0) {
              steps = p.stepsPerEpoch();
            }
            assertThat(p.stepsPerEpoch()).as("same steps on every worker").isEqualTo(steps);
            Set<Long> mine = new HashSet<>(ids(p, 0));
            assertThat(mine)
                .as(policy + " n=" + n + " rank " + r + " owns")
                .hasSize((int) p.shard().records());
            for (Long id : mine) {
              assertThat(union.add(id)).as("record " + id + " seen by two workers").isTrue();
            }
          }
        }
        assertThat(union).as(policy + " n=" + n).hasSize((int) total);
      }
    }
  }

  @Test
  void autoPicksFileOrDataAndUnevenPoliciesSetSteps() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 260);
    assertThat(plan.shard(0, 4, opts().build()).policy()).isEqualTo(ShardingPolicy.FILE);
    assertThat(plan.shard(0, 5, opts().build()).policy()).isEqualTo(ShardingPolicy.DATA);
    // FILE with 2 workers, balanced: {260} vs {100, 37, 5}.
    WorkerShard pad = plan.shard(0, 2, opts().optSharding(ShardingPolicy.FILE).build());
    assertThat(pad.recordsPerWorker()).containsExactlyInAnyOrder(260L, 142L);
    assertThat(pad.stepsPerEpoch()).isEqualTo(260 / 8);
    WorkerShard cut =
        plan.shard(
            0, 2, opts().optSharding(ShardingPolicy.FILE).optUneven(UnevenPolicy.TRUNCATE).build());
    assertThat(cut.stepsPerEpoch()).isEqualTo(142 / 8);
    for (int r = 0; r < 2; r++) {
      try (InputPipeline p =
          InputPipeline.create(
              plan,
              opts().optSharding(ShardingPolicy.FILE).optUneven(UnevenPolicy.TRUNCATE).build(),
              r,
              2,
              TestData.CONF)) {
        assertThat(ids(p, 1)).hasSize(142 / 8 * 8);
      }
    }
    assertThatThrownBy(() -> plan.shard(0, 2, opts().optBatchSize(1000).build()))
        .hasMessageContaining(
            "Too little data for a step on every worker: 402 records over 2 workers");
  }

  @Test
  void reproducibleWithASeedAndReshuffledEveryEpoch() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64);
    PipelineOptions o = opts().optSeed(7).build();
    List<Long> a0;
    List<Long> a1;
    try (InputPipeline p = InputPipeline.create(plan, o, 1, 2, TestData.CONF)) {
      a0 = ids(p, 0);
      a1 = ids(p, 1);
    }
    try (InputPipeline p = InputPipeline.create(plan, o, 1, 2, TestData.CONF)) {
      assertThat(ids(p, 1)).isEqualTo(a1);
      assertThat(ids(p, 0)).isEqualTo(a0);
    }
    assertThat(a1).isNotEqualTo(a0);
    try (InputPipeline p =
        InputPipeline.create(plan, opts().optSeed(8).build(), 1, 2, TestData.CONF)) {
      assertThat(ids(p, 0)).isNotEqualTo(a0);
    }
    // Resuming at step k yields the rest of the same sequence.
    try (InputPipeline p = InputPipeline.create(plan, o, 1, 2, TestData.CONF)) {
      List<Long> rest = new ArrayList<>();
      p.hostEpoch(1, 5)
          .forEachRemaining(
              b -> {
                for (int i = 0; i < b.size; i++) {
                  rest.add(TestData.idOf(b, i, W));
                }
              });
      assertThat(rest).isEqualTo(a1.subList(5 * 8, a1.size()));
    }
  }

  @Test
  void interleaveWithoutShuffleTakesBlocksInTurn() throws IOException {
    DatasetPlan plan = plan(6, 6);
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(12)
            .optShuffleBuffer(0)
            .optShuffleSplits(false)
            .optCycleLength(2)
            .optBlockLength(2)
            .build();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      assertThat(ids(p, 0)).containsExactly(0L, 1L, 6L, 7L, 2L, 3L, 8L, 9L, 4L, 5L, 10L, 11L);
    }
  }

  /**
   * Without a shuffle buffer (and with room in the budget) examples are decoded straight from the
   * readers' buffers into their batches: the same batches, in the same order, as decoding each
   * record first — for every sharding policy and several workers.
   */
  @Test
  void decodingStraightIntoBatchesGivesTheSameBatches() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64);
    for (ShardingPolicy policy : ShardingPolicy.values()) {
      for (int n : new int[] {1, 3}) {
        PipelineOptions.Builder b =
            opts()
                .optShuffleBuffer(0)
                .optSharding(policy)
                .optDropRemainder(false)
                .optUneven(UnevenPolicy.PAD);
        for (int r = 0; r < n; r++) {
          List<Long> direct;
          List<Long> copied;
          try (InputPipeline p =
              InputPipeline.create(
                  plan, b.optMemoryBudgetBytes(64 << 20).build(), r, n, TestData.CONF)) {
            assertThat(p.decodesInBatch()).isTrue();
            direct = ids(p, 2);
            // Resuming after 5 steps: the skipped records are released undecoded, the rest is the
            // same.
            List<Long> rest = new ArrayList<>();
            p.hostEpoch(2, 5)
                .forEachRemaining(
                    hb -> {
                      for (int i = 0; i < hb.size; i++) {
                        rest.add(TestData.idOf(hb, i, W));
                      }
                    });
            assertThat(rest)
                .isEqualTo(direct.subList(Math.min(direct.size(), 5 * 8), direct.size()));
          }
          try (InputPipeline p =
              InputPipeline.create(
                  plan, b.optMemoryBudgetBytes(1 << 20).build(), r, n, TestData.CONF)) {
            assertThat(p.decodesInBatch()).as("no room for the read buffers in 1 MB").isFalse();
            copied = ids(p, 2);
          }
          assertThat(direct)
              .as(policy + " n=" + n + " rank " + r)
              .isEqualTo(copied)
              .hasSizeGreaterThanOrEqualTo((int) plan.shard(r, n, b.build()).records());
        }
      }
    }
  }

  /** Records of 100 KB to 1.2 MB: read buffers are handed over every few records, and grown. */
  @Test
  void bigRecordsDecodeIntactFromHandedOverBuffers() throws IOException {
    int width = 300_000; // 1.2 MB: more than a read buffer
    TestData.writeTFRecords(dir.resolve("wide"), width, 0, TFRecordCompression.NONE, 3);
    TestData.writeTFRecords(dir.resolve("medium"), 25_000, 100, TFRecordCompression.NONE, 40);
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(1)
            .optShuffleBuffer(0)
            .optCycleLength(1)
            .optShuffleSplits(false)
            .optMemoryBudgetBytes(256L << 20)
            .build();
    DatasetPlan plan =
        DatasetPlanner.plan(TestData.spec(dir.resolve("wide"), width), o, TestData.CONF);
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      assertThat(p.decodesInBatch()).isTrue();
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      long id = 0;
      while (it.hasNext()) {
        HostBatch b = it.next();
        for (int k = 0; k < width; k += 997) {
          assertThat(b.feature(0, k)).as("record " + id + " value " + k).isEqualTo(id + 0.5f * k);
        }
        assertThat(b.labels[0]).isEqualTo(id % 10);
        id++;
      }
      assertThat(id).isEqualTo(3);
    }
    DatasetPlan medium =
        DatasetPlanner.plan(TestData.spec(dir.resolve("medium"), 25_000), o, TestData.CONF);
    try (InputPipeline p =
        InputPipeline.create(medium, o.toBuilder().optBatchSize(3).build(), 0, 1, TestData.CONF)) {
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      long id = 100;
      while (it.hasNext()) {
        HostBatch b = it.next();
        for (int i = 0; i < b.size; i++, id++) {
          for (int k = 0; k < 25_000; k += 101) {
            assertThat(b.feature(0, i * 25_000 + k))
                .as("record " + id + " value " + k)
                .isEqualTo(id + 0.5f * k);
          }
        }
      }
      assertThat(id).isEqualTo(100 + 39);
    }
  }

  /**
   * An example that frames and checksums correctly but lacks a feature fails its batch, naming file
   * and offset.
   */
  @Test
  void malformedExampleDecodedInTheBatchNamesFileAndOffset() throws IOException {
    Path d = dir.resolve("m");
    Files.createDirectories(d);
    long badOffset;
    try (OutputStream os = Files.newOutputStream(d.resolve("part-000.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int i = 0; i < 30; i++) {
        w.write(TestData.example(i, W));
      }
      badOffset = w.bytesWritten();
      w.write(Examples.encodeExample(Map.of("label", Feature.ofInt64(1))));
      for (int i = 31; i < 40; i++) {
        w.write(TestData.example(i, W));
      }
    }
    DatasetPlan plan =
        DatasetPlanner.plan(TestData.spec(d, W), PipelineOptions.builder().build(), TestData.CONF);
    PipelineOptions o = opts().optShuffleBuffer(0).optMemoryBudgetBytes(64 << 20).build();
    Assertions.assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () -> {
          try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
            assertThat(p.decodesInBatch()).isTrue();
            assertThatThrownBy(() -> ids(p, 0))
                .isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining("part-000.tfrecord")
                .hasMessageContaining("at byte offset " + badOffset)
                .hasMessageContaining("feature 'x' is missing");
          }
        });
  }

  /**
   * An epoch started ahead of its turn ({@code prepare}) yields exactly the batches it would have
   * yielded otherwise; a different next call discards it; closing stops its threads.
   */
  @Test
  void epochsStartedAheadAreTheSameEpochs() throws Exception {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64);
    PipelineOptions o = opts().optSeed(3).build();
    List<Long> e1;
    List<Long> e2;
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 2, TestData.CONF)) {
      e1 = ids(p, 1);
      e2 = ids(p, 2);
    }
    long before = pipelineThreads();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 2, TestData.CONF)) {
      p.prepare(1); // nothing running yet: starts at once
      assertThat(ids(p, 1)).isEqualTo(e1);
      p.prepare(2);
      assertThat(ids(p, 2)).isEqualTo(e2);
      p.prepare(2);
      List<Long> rest = new ArrayList<>();
      p.hostEpoch(2, 3)
          .forEachRemaining(
              b -> { // not what was prepared: read afresh
                for (int i = 0; i < b.size; i++) {
                  rest.add(TestData.idOf(b, i, W));
                }
              });
      assertThat(rest).isEqualTo(e2.subList(3 * 8, e2.size()));
      p.prepare(1);
      Thread.sleep(200); // the stream ahead runs, then close stops it
    }
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (pipelineThreads() > before && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(pipelineThreads()).as("pipeline threads left running").isLessThanOrEqualTo(before);
  }

  private static long pipelineThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith("pipeline-"))
        .count();
  }

  @Test
  void readerFailureNamesTheFileInsteadOfHanging() throws IOException {
    DatasetPlan plan = plan(50, 50, 50);
    Path bad = dir.resolve("d").resolve("part-001.tfrecord");
    byte[] bytes = Files.readAllBytes(bad);
    bytes[bytes.length / 2] ^= 0x55;
    Files.write(bad, bytes);
    Assertions.assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () -> {
          try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 1, TestData.CONF)) {
            assertThatThrownBy(() -> ids(p, 0))
                .isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining(
                    "Corrupt TFRecord file " + bad.toUri().toString().replace("file:///", "file:/"))
                .hasMessageContaining("at byte offset");
          }
        });
  }

  @Test
  void cacheServesLaterEpochsWithoutTheSourceFiles() throws IOException {
    DatasetPlan plan = plan(40, 30, 20);
    Path cache = dir.resolve("cache");
    // No dropped remainder: the first epoch needs every record, so every split is read to its end
    // (a split's cache file appears only then) however the threads are scheduled.
    PipelineOptions cached = opts().optDropRemainder(false).optCacheDir(cache.toString()).build();
    List<Long> expected;
    try (InputPipeline p =
        InputPipeline.create(plan, opts().optDropRemainder(false).build(), 0, 1, TestData.CONF)) {
      expected = ids(p, 1);
    }
    try (InputPipeline p = InputPipeline.create(plan, cached, 0, 1, TestData.CONF)) {
      ids(p, 0); // fills the cache
      try (Stream<Path> files = Files.walk(dir.resolve("d"))) {
        files.filter(Files::isRegularFile).forEach(f -> f.toFile().delete());
      }
      assertThat(ids(p, 1)).isEqualTo(expected);
    }
    try (Stream<Path> files = Files.walk(cache)) {
      assertThat(files.filter(f -> f.toString().endsWith(".bin")).count()).isEqualTo(3);
    }
  }

  /**
   * A host batch from {@code epoch()} is the consumer's until it releases it (its buffers are not
   * handed to a later batch meanwhile), and a second release gives nothing back twice.
   */
  @Test
  void aHostBatchIsTheConsumersUntilReleasedOnce() throws IOException {
    DatasetPlan plan = plan(60, 44);
    PipelineOptions o = opts().build();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      Iterator<HostBatch> it = p.epoch(0, 0);
      HostBatch first = it.next();
      long firstId = TestData.idOf(first, 0, W);
      first.release();
      first.release(); // a second release must not put its buffers in the pool twice
      List<HostBatch> held = new ArrayList<>();
      Set<java.nio.ByteBuffer> columns =
          java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
      Set<java.nio.ByteBuffer> labels =
          java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
      List<Long> ids = new ArrayList<>();
      while (it.hasNext()) {
        HostBatch b = it.next();
        held.add(b);
        assertThat(columns.add(b.column(0)))
            .as("batch %d's feature buffer is held by an earlier batch", held.size())
            .isTrue();
        assertThat(labels.add(b.labelBytes()))
            .as("batch %d's label buffer is held by an earlier batch", held.size())
            .isTrue();
        ids.add(TestData.idOf(b, 0, W));
      }
      assertThat(held).hasSize((int) p.stepsPerEpoch() - 1);
      // what the consumer holds is what it was given, however many batches came after it
      for (int k = 0; k < held.size(); k++) {
        assertThat(TestData.idOf(held.get(k), 0, W)).isEqualTo(ids.get(k));
        assertThat(held.get(k).draws()).hasSize(held.get(k).size());
      }
      assertThat(ids).doesNotContain(firstId);
      held.forEach(HostBatch::release);
    }
  }

  @Test
  void budgetTooSmallIsAClearError() throws IOException {
    DatasetPlan plan = plan(10);
    assertThatThrownBy(
            () ->
                InputPipeline.create(
                    plan,
                    opts().optShuffleBuffer(1_000_000).optMemoryBudgetBytes(1 << 20).build(),
                    0,
                    1,
                    TestData.CONF))
        .hasMessageStartingWith(
            "memoryBudgetBytes 1048576 is too small: the shuffle buffer (1000000 records");
  }
}
