package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.PipelineOptions.ShardingPolicy;
import dev.sparktrainer.data.PipelineOptions.UnevenPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Re-dealing the rest of an interrupted epoch to another layout: the records the earlier layouts
 * consumed are worked out again exactly (checked against what their pipelines really yielded), the
 * rest go to the new workers once each, with the sharding policy, and the same number of steps on
 * every worker.
 */
class EpochRemainderTest {
  private static final int W = 3;

  /** Records per file: uneven, one file much larger, one tiny. */
  private static final int[] FILES = {97, 40, 131, 3, 60, 75};

  private static final long TOTAL = 406;

  @TempDir Path dir;

  private DatasetPlan plan() throws IOException {
    long next = TestData.writeTFRecords(dir.resolve("d"), W, 0, TFRecordCompression.NONE, FILES);
    assertThat(next).isEqualTo(TOTAL);
    return DatasetPlanner.plan(
        TestData.spec(dir.resolve("d"), W), PipelineOptions.builder().build(), TestData.CONF);
  }

  private static PipelineOptions options(
      ShardingPolicy policy, UnevenPolicy uneven, boolean drop, int shuffle, String path, int b) {
    return PipelineOptions.builder()
        .optBatchSize(b)
        .optShuffleBuffer(shuffle)
        .optCycleLength(2)
        .optSharding(policy)
        .optUneven(uneven)
        .optDropRemainder(drop)
        .optShufflePath(PipelineOptions.ShufflePath.valueOf(path.toUpperCase(Locale.ROOT)))
        .optSeed(11)
        .optMemoryBudgetBytes(8 << 20)
        .build();
  }

  /**
   * The ids of each worker's batches of epoch {@code epoch} after {@code earlier}, at most {@code
   * limit} batches each (all: -1); checks that every worker gets the same number of batches.
   */
  private static List<List<Long>> run(
      DatasetPlan plan,
      PipelineOptions o,
      int workers,
      int epoch,
      List<EpochSegment> earlier,
      long skip,
      long limit) {
    List<List<Long>> out = new ArrayList<>();
    long steps = -1;
    for (int rank = 0; rank < workers; rank++) {
      List<Long> ids = new ArrayList<>();
      try (InputPipeline p = InputPipeline.create(plan, o, rank, workers, TestData.CONF)) {
        long after = p.stepsAfter(epoch, earlier);
        if (steps >= 0) {
          assertThat(after).as("steps of rank " + rank).isEqualTo(steps);
        }
        steps = after;
        Iterator<HostBatch> it = p.hostEpochAfter(epoch, earlier, skip);
        long n = 0;
        while ((limit < 0 || n < limit) && it.hasNext()) {
          HostBatch b = it.next();
          for (int i = 0; i < b.size; i++) {
            long id = TestData.idOf(b, i, W);
            assertThat(b.labels[i]).isEqualTo(id % 10);
            ids.add(id);
          }
          n++;
        }
        if (limit < 0) {
          assertThat(n).as("batches of rank " + rank).isEqualTo(after - skip);
        }
      }
      out.add(ids);
    }
    return out;
  }

  private static Set<Long> union(List<List<Long>> perWorker) {
    Set<Long> s = new HashSet<>();
    perWorker.forEach(s::addAll);
    return s;
  }

  private static long size(List<List<Long>> perWorker) {
    return perWorker.stream().mapToLong(List::size).sum();
  }

  /** The canonical indices (= ids here) that {@code c} holds. */
  private static Set<Long> ids(DatasetPlan plan, ConsumedRecords c) {
    Set<Long> s = new HashSet<>();
    long first = 0;
    for (Split split : plan.splits()) {
      BitSet rest = c.remaining(split);
      for (int j = 0; j < split.records(); j++) {
        if (!rest.get(j)) {
          s.add(first + j);
        }
      }
      first += split.records();
    }
    return s;
  }

  @Test
  void theRestOfAnEpochGoesToTheNewLayoutOnceEachInEveryConfiguration() throws IOException {
    DatasetPlan plan = plan();
    int[][] layouts = {{2, 1}, {1, 3}, {3, 2}, {4, 3}};
    int cases = 0;
    for (ShardingPolicy policy : ShardingPolicy.values()) {
      for (UnevenPolicy uneven : new UnevenPolicy[] {UnevenPolicy.PAD, UnevenPolicy.TRUNCATE}) {
        for (boolean drop : new boolean[] {true, false}) {
          for (String path : new String[] {"buffer", "planned"}) {
            for (int shuffle : new int[] {1, 50}) {
              for (int[] l : layouts) {
                int from = l[0];
                int to = l[1];
                int b = 6;
                int b2 = Math.max(1, 12 / to); // another batch size too
                String what =
                    String.format(
                        Locale.ROOT,
                        "%s %s drop=%b %s shuffle=%d %d->%d batch %d->%d",
                        policy,
                        uneven,
                        drop,
                        path,
                        shuffle,
                        from,
                        to,
                        b,
                        b2);
                PipelineOptions o = options(policy, uneven, drop, shuffle, path, b);
                long steps = plan.shard(0, from, o).stepsPerEpoch();
                long taken = steps / 2;
                List<List<Long>> first = run(plan, o, from, 1, List.of(), 0, taken);
                assertThat(size(first)).as(what).isEqualTo(from * taken * b);
                EpochSegment seg = new EpochSegment(from, b, taken);
                // The replay names exactly the records the pipelines yielded.
                assertThat(ids(plan, ConsumedRecords.replay(plan, o, 1, List.of(seg))))
                    .as(what + ": replayed consumption")
                    .isEqualTo(union(first));
                PipelineOptions o2 = options(policy, uneven, drop, shuffle, path, b2);
                List<List<Long>> rest = run(plan, o2, to, 1, List.of(seg), 0, -1);
                Set<Long> restIds = union(rest);
                Set<Long> overlap = new HashSet<>(restIds);
                overlap.retainAll(union(first));
                assertThat(overlap).as(what + ": consumed twice").isEmpty();
                Set<Long> all = new HashSet<>(union(first));
                all.addAll(restIds);
                if (uneven == UnevenPolicy.PAD && !drop) {
                  assertThat((long) all.size()).as(what + ": every record").isEqualTo(TOTAL);
                } else if (uneven == UnevenPolicy.PAD) {
                  // dropRemainder drops at most a partial batch per worker.
                  assertThat(TOTAL - all.size()).as(what + ": dropped").isLessThan((long) to * b2);
                } else {
                  if (policy == ShardingPolicy.DATA) {
                    // TRUNCATE drops at most what uneven shares and a partial batch leave.
                    assertThat(TOTAL - all.size())
                        .as(what + ": dropped")
                        .isLessThan(to * (b2 + 2L) + from * (b + 2L));
                  }
                  assertThat(size(rest)).as(what + ": no repeats").isEqualTo(restIds.size());
                }
                cases++;
              }
            }
          }
        }
      }
    }
    assertThat(cases).isEqualTo(3 * 2 * 2 * 2 * 2 * 4);
  }

  @Test
  void aChainOfLayoutsWithinOneEpochAndAResumeWithinTheRest() throws IOException {
    DatasetPlan plan = plan();
    for (ShardingPolicy policy : new ShardingPolicy[] {ShardingPolicy.FILE, ShardingPolicy.DATA}) {
      PipelineOptions o3 = options(policy, UnevenPolicy.PAD, false, 40, "buffer", 4);
      PipelineOptions o2 = options(policy, UnevenPolicy.PAD, false, 40, "planned", 6);
      PipelineOptions o1 = options(policy, UnevenPolicy.PAD, false, 40, "buffer", 12);
      List<List<Long>> a = run(plan, o3, 3, 2, List.of(), 0, 10);
      EpochSegment s0 = new EpochSegment(3, 4, 10);
      List<List<Long>> b = run(plan, o2, 2, 2, List.of(s0), 0, 7);
      EpochSegment s1 = new EpochSegment(2, 6, 7);
      Set<Long> consumed = union(a);
      consumed.addAll(union(b));
      assertThat(union(a)).as(policy + ": disjoint").doesNotContainAnyElementsOf(union(b));
      assertThat(ids(plan, ConsumedRecords.replay(plan, o1, 2, List.of(s0, s1))))
          .as(policy + ": replay of two segments")
          .isEqualTo(consumed);
      List<List<Long>> c = run(plan, o1, 1, 2, List.of(s0, s1), 0, -1);
      assertThat(consumed).as(policy.name()).doesNotContainAnyElementsOf(union(c));
      consumed.addAll(union(c));
      assertThat((long) consumed.size()).as(policy + ": every record").isEqualTo(TOTAL);
      // A resume on the same layout within the rest skips its first batches.
      List<List<Long>> tail = run(plan, o1, 1, 2, List.of(s0, s1), 3, -1);
      assertThat(tail.get(0)).isEqualTo(c.get(0).subList(3 * 12, c.get(0).size()));
    }
  }

  @Test
  void fileShardingDealsWholeRemaindersOfFilesAndFallsBackToDataWhenTooFewAreLeft()
      throws IOException {
    DatasetPlan plan = plan();
    PipelineOptions o = options(ShardingPolicy.FILE, UnevenPolicy.PAD, true, 1, "buffer", 5);
    long steps = plan.shard(0, 2, o).stepsPerEpoch();
    EpochSegment seg = new EpochSegment(2, 5, steps / 2);
    ConsumedRecords consumed = ConsumedRecords.replay(plan, o, 0, List.of(seg));
    Set<String> seen = new HashSet<>();
    for (int rank = 0; rank < 3; rank++) {
      WorkerShard s = WorkerShard.remainder(plan, rank, 3, o, consumed);
      assertThat(s.policy()).isEqualTo(ShardingPolicy.FILE);
      for (int i = 0; i < s.splits().size(); i++) {
        Split split = s.splits().get(i);
        assertThat(seen.add(split.path())).as("split dealt once: " + split).isTrue();
        assertThat(s.ownedRecords(i)).isEqualTo(consumed.remaining(split).cardinality());
      }
    }
    // Nearly everything consumed: one file left with records, three workers: DATA for the rest.
    EpochSegment most = new EpochSegment(1, 5, plan.shard(0, 1, o).stepsPerEpoch() - 2);
    ConsumedRecords nearly = ConsumedRecords.replay(plan, o, 0, List.of(most));
    WorkerShard s = WorkerShard.remainder(plan, 0, 3, o, nearly);
    assertThat(s.policy()).isEqualTo(ShardingPolicy.DATA);
  }

  @Test
  void aPositionTheDataCannotHoldIsNamed() throws IOException {
    DatasetPlan plan = plan();
    PipelineOptions o = options(ShardingPolicy.DATA, UnevenPolicy.PAD, true, 1, "buffer", 5);
    EpochSegment tooFar = new EpochSegment(2, 5, 1000);
    assertThatThrownBy(() -> ConsumedRecords.replay(plan, o, 0, List.of(tooFar)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("2 workers x 1000 batches of 5")
        .hasMessageContaining("rank 0's 40");
  }

  @Test
  void fewerRecordsLeftThanWorkers() throws IOException {
    DatasetPlan plan = plan();
    PipelineOptions o = options(ShardingPolicy.DATA, UnevenPolicy.PAD, false, 1, "buffer", 5);
    // One worker took all but its last batch (of 406 = 81 x 5 + 1: one record left).
    EpochSegment seg = new EpochSegment(1, 5, 81);
    PipelineOptions pad = options(ShardingPolicy.DATA, UnevenPolicy.PAD, false, 1, "buffer", 2);
    List<List<Long>> rest = run(plan, pad, 3, 0, List.of(seg), 0, -1);
    Set<Long> before = ids(plan, ConsumedRecords.replay(plan, o, 0, List.of(seg)));
    assertThat(before).hasSize(405);
    assertThat(rest).allSatisfy(ids -> assertThat(ids).hasSize(1));
    assertThat(union(rest)).hasSize(1).doesNotContainAnyElementsOf(before);
    PipelineOptions truncate =
        options(ShardingPolicy.DATA, UnevenPolicy.TRUNCATE, false, 1, "buffer", 2);
    assertThat(run(plan, truncate, 3, 0, List.of(seg), 0, -1))
        .allSatisfy(ids -> assertThat(ids).isEmpty());
  }
}
