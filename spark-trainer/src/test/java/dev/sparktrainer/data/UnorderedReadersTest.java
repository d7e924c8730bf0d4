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
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pipeline with {@code deterministic=false} and no shuffle buffer: readers make whole batches.
 * The order is free; coverage, step counts, errors and shutdown are not.
 */
class UnorderedReadersTest {
  private static final int W = 4;

  @TempDir Path dir;

  private DatasetPlan plan(int... counts) throws IOException {
    TestData.writeTFRecords(dir.resolve("d"), W, 0, TFRecordCompression.NONE, counts);
    return DatasetPlanner.plan(
        TestData.spec(dir.resolve("d"), W), PipelineOptions.builder().build(), TestData.CONF);
  }

  private static PipelineOptions.Builder opts() {
    return PipelineOptions.builder()
        .optBatchSize(8)
        .optShuffleBuffer(0)
        .optDeterministic(false)
        .optCycleLength(3)
        .optMemoryBudgetBytes(16 << 20);
  }

  /**
   * The ids of one epoch, batch by batch, each row checked against its id; asserts the step count.
   */
  private static List<Long> ids(InputPipeline p, int epoch, long skip) {
    assertThat(p.unordered()).as("readers make the batches").isTrue();
    List<Long> out = new ArrayList<>();
    Iterator<HostBatch> it = p.hostEpoch(epoch, skip);
    long batches = 0;
    while (it.hasNext()) {
      HostBatch b = it.next();
      for (int i = 0; i < b.size; i++) {
        long id = TestData.idOf(b, i, W);
        out.add(id);
        assertThat(b.labels[i]).isEqualTo(id % 10);
        assertThat(b.feature(0, i * W + 3)).isEqualTo(id + 1.5f);
      }
      if (it.hasNext()) {
        assertThat(b.size).as("only the last batch may be partial").isEqualTo(8);
      }
      batches++;
    }
    assertThat(batches).as("batches of an epoch").isEqualTo(p.stepsPerEpoch() - skip);
    return out;
  }

  private static Map<Long, Integer> counts(List<Long> ids) {
    Map<Long, Integer> m = new HashMap<>();
    for (Long id : ids) {
      m.merge(id, 1, Integer::sum);
    }
    return m;
  }

  /**
   * NONE: every owned record exactly once. PAD: every owned record at least once, and repeated only
   * when the worker's records cannot fill its steps. TRUNCATE: no record twice. The same steps on
   * every worker (PAD, TRUNCATE); for every sharding policy, 1 to 7 workers, uneven files.
   */
  @Test
  void everyRecordOncePerEpochAndEqualSteps() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64);
    long total = plan.totalRecords();
    for (ShardingPolicy policy : ShardingPolicy.values()) {
      for (int n : new int[] {1, 2, 3, 7}) {
        if (policy == ShardingPolicy.FILE && n > plan.splits().size()) {
          continue;
        }
        for (UnevenPolicy uneven : UnevenPolicy.values()) {
          for (boolean drop : new boolean[] {false, true}) {
            String what = policy + " n=" + n + " " + uneven + " dropRemainder=" + drop;
            PipelineOptions o =
                opts().optSharding(policy).optUneven(uneven).optDropRemainder(drop).build();
            Set<Long> union = new HashSet<>();
            long steps = -1;
            for (int r = 0; r < n; r++) {
              try (InputPipeline p = InputPipeline.create(plan, o, r, n, TestData.CONF)) {
                if (uneven != UnevenPolicy.NONE) {
                  if (steps < 0) {
                    steps = p.stepsPerEpoch();
                  }
                  assertThat(p.stepsPerEpoch())
                      .as(what + ": same steps on every worker")
                      .isEqualTo(steps);
                }
                long owned = p.shard().records();
                List<Long> seen = ids(p, 0, 0);
                Map<Long, Integer> c = counts(seen);
                if (uneven == UnevenPolicy.PAD) {
                  assertThat((long) c.size())
                      .as(what + " rank " + r + ": every owned record")
                      .isEqualTo(Math.min(owned, steps * 8));
                  if (drop) {
                    assertThat((long) seen.size())
                        .as(what + " rank " + r + ": records")
                        .isEqualTo(steps * 8);
                  } else {
                    assertThat((long) seen.size())
                        .as(what + " rank " + r + ": records")
                        .isBetween(Math.max(owned, (steps - 1) * 8 + 1), steps * 8);
                  }
                  if (owned >= steps * 8 - (drop ? 0 : 7)) {
                    assertThat(c.values())
                        .as(what + " rank " + r + ": enough records, none repeated")
                        .containsOnly(1);
                  }
                } else {
                  assertThat(c.values())
                      .as(what + " rank " + r + ": no record twice")
                      .containsOnly(1);
                  if (uneven == UnevenPolicy.NONE) {
                    assertThat((long) seen.size())
                        .as(what + " rank " + r)
                        .isEqualTo(drop ? owned / 8 * 8 : owned);
                  }
                }
                for (Long id : c.keySet()) {
                  assertThat(union.add(id))
                      .as(what + ": record " + id + " seen by two workers")
                      .isTrue();
                }
              }
            }
            if (uneven != UnevenPolicy.TRUNCATE && !drop) {
              assertThat((long) union.size()).as(what).isEqualTo(total);
            }
          }
        }
      }
    }
  }

  /** With a shuffle buffer the order stays reproducible whatever {@code deterministic} says. */
  @Test
  void aShuffleBufferKeepsTheOrderedPipeline() throws IOException {
    DatasetPlan plan = plan(40, 30, 20);
    try (InputPipeline p =
        InputPipeline.create(plan, opts().optShuffleBuffer(50).build(), 0, 1, TestData.CONF)) {
      assertThat(p.unordered()).isFalse();
    }
    try (InputPipeline p =
        InputPipeline.create(plan, opts().optDeterministic(true).build(), 0, 1, TestData.CONF)) {
      assertThat(p.unordered()).isFalse();
    }
  }

  /**
   * Resuming mid-epoch gives the remaining steps; closing mid-epoch or with an epoch read ahead
   * stops every reader.
   */
  @Test
  void resumeAndCloseMidEpoch() throws Exception {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64);
    long before = pipelineThreads();
    try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 2, TestData.CONF)) {
      List<Long> rest = ids(p, 1, 5);
      assertThat(rest).hasSizeLessThanOrEqualTo((int) (p.stepsPerEpoch() - 5) * 8);
      Iterator<HostBatch> it = p.hostEpoch(2, 0);
      p.prepare(3);
      it.next();
      it.next(); // then close with readers mid-split and an epoch started ahead
    }
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (pipelineThreads() > before && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(pipelineThreads()).as("pipeline threads left running").isLessThanOrEqualTo(before);
  }

  /** Epochs read ahead ({@code prepare}) are whole epochs too. */
  @Test
  void epochsStartedAheadCoverEveryRecord() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 260, 1, 64);
    PipelineOptions o = opts().optUneven(UnevenPolicy.NONE).optDropRemainder(false).build();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      for (int e = 0; e < 4; e++) {
        List<Long> seen = new ArrayList<>();
        Iterator<HostBatch> it = p.hostEpoch(e, 0);
        p.prepare(e + 1);
        it.forEachRemaining(
            b -> {
              for (int i = 0; i < b.size; i++) {
                seen.add(TestData.idOf(b, i, W));
              }
            });
        assertThat(new HashSet<>(seen))
            .as("epoch " + e)
            .hasSize(seen.size())
            .hasSize((int) plan.totalRecords());
      }
    }
  }

  @Test
  void corruptFileAndMalformedExampleNameTheFile() throws IOException {
    DatasetPlan plan = plan(50, 50, 50);
    Path bad = dir.resolve("d").resolve("part-001.tfrecord");
    byte[] bytes = Files.readAllBytes(bad);
    bytes[bytes.length / 2] ^= 0x55;
    Files.write(bad, bytes);
    Assertions.assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () -> {
          try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 1, TestData.CONF)) {
            assertThatThrownBy(() -> ids(p, 0, 0))
                .isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining(
                    "Corrupt TFRecord file " + bad.toUri().toString().replace("file:///", "file:/"))
                .hasMessageContaining("at byte offset");
          }
        });
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
    DatasetPlan malformed =
        DatasetPlanner.plan(TestData.spec(d, W), PipelineOptions.builder().build(), TestData.CONF);
    Assertions.assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () -> {
          try (InputPipeline p =
              InputPipeline.create(malformed, opts().build(), 0, 1, TestData.CONF)) {
            assertThatThrownBy(() -> ids(p, 0, 0))
                .isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining("part-000.tfrecord")
                .hasMessageContaining("at byte offset " + badOffset)
                .hasMessageContaining("feature 'x' is missing");
          }
        });
  }

  /** Records from the cache (decoded arrays, not TFRecord bytes) are batched the same way. */
  @Test
  void cachedEpochsCoverEveryRecord() throws IOException {
    DatasetPlan plan = plan(40, 30, 20);
    PipelineOptions o =
        opts()
            .optUneven(UnevenPolicy.NONE)
            .optDropRemainder(false)
            .optCacheDir(dir.resolve("cache").toString())
            .build();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      Set<Long> first = new HashSet<>(ids(p, 0, 0));
      try (Stream<Path> files = Files.walk(dir.resolve("d"))) {
        files.filter(Files::isRegularFile).forEach(f -> f.toFile().delete());
      }
      List<Long> second = ids(p, 1, 0);
      assertThat(second).hasSize(90).doesNotHaveDuplicates();
      assertThat(new HashSet<>(second)).isEqualTo(first).hasSize(90);
    }
  }

  private static long pipelineThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith("pipeline-"))
        .count();
  }
}
