package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The map stage: a user's {@link ExampleTransform} in the pipeline's decode stage. */
class MapStageTest {
  private static final int W = 4;

  @TempDir Path dir;

  /**
   * Puts a draw of the example's generator into value 1 and shifts the label: what an augmentation
   * does (values 0 and 3 keep the id, for the checks).
   */
  private static final ExampleTransform NOISE =
      ex -> {
        ex.set(0, 1, ex.random().nextFloat());
        ex.set(0, 2, (float) ex.random().nextGaussian());
        ex.setLabel(ex.label() + 100);
      };

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
        .optMemoryBudgetBytes(8 << 20)
        .optSeed(7)
        .optTransform(NOISE);
  }

  /** One epoch's rows, batch by batch: every value and the label, checked to be mapped. */
  private static List<float[]> rows(InputPipeline p, int epoch, long skip) {
    List<float[]> out = new ArrayList<>();
    Iterator<HostBatch> it = p.hostEpoch(epoch, skip);
    while (it.hasNext()) {
      HostBatch b = it.next();
      for (int i = 0; i < b.size; i++) {
        float[] row = new float[W + 1];
        for (int k = 0; k < W; k++) {
          row[k] = b.feature(0, i * W + k);
        }
        row[W] = (float) b.labels[i];
        long id = (long) row[0];
        assertThat(row[3]).as("untouched value").isEqualTo(id + 1.5f);
        assertThat(b.labels[i]).as("mapped label").isEqualTo(id % 10 + 100);
        assertThat(row[1]).as("a draw in [0, 1)").isBetween(0f, 1f).isNotEqualTo(id + 0.5f);
        out.add(row);
      }
    }
    return out;
  }

  /** id -> (draw 1, draw 2) */
  private static Map<Long, List<Float>> draws(List<float[]> rows) {
    Map<Long, List<Float>> m = new HashMap<>();
    for (float[] r : rows) {
      m.put((long) r[0], List.of(r[1], r[2]));
    }
    return m;
  }

  /**
   * Every way the pipeline runs — shuffle buffer, none, readers making whole batches
   * (deterministic=false), the decoded-record cache — maps every example, and an example's draws
   * depend on the example and the epoch, never on the order or the threads.
   */
  @Test
  void everyExampleIsMappedWithDrawsOfItsOwnInEveryMode() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 60);
    Map<Long, List<Float>> shuffled;
    try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 1, TestData.CONF)) {
      shuffled = draws(rows(p, 0, 0));
      assertThat(draws(rows(p, 1, 0))).as("another epoch, other draws").isNotEqualTo(shuffled);
    }
    assertThat(shuffled).hasSize(200); // 202 records, 25 batches of 8
    PipelineOptions plain = opts().optShuffleBuffer(0).optDropRemainder(false).build();
    try (InputPipeline p = InputPipeline.create(plan, plain, 0, 1, TestData.CONF)) {
      assertThat(p.decodesInBatch()).as("a map needs decoded records").isFalse();
      Map<Long, List<Float>> d = draws(rows(p, 0, 0));
      assertThat(d).hasSize(202);
      d.keySet().retainAll(shuffled.keySet());
      assertThat(d).isEqualTo(shuffled);
    }
    PipelineOptions unordered =
        opts().optShuffleBuffer(0).optDeterministic(false).optDropRemainder(false).build();
    try (InputPipeline p = InputPipeline.create(plan, unordered, 0, 1, TestData.CONF)) {
      assertThat(p.unordered()).isTrue();
      Map<Long, List<Float>> d = draws(rows(p, 0, 0));
      assertThat(d).hasSize(202);
      d.keySet().retainAll(shuffled.keySet());
      assertThat(d).isEqualTo(shuffled);
    }
    PipelineOptions cached =
        opts().optDropRemainder(false).optCacheDir(dir.resolve("cache").toString()).build();
    try (InputPipeline p = InputPipeline.create(plan, cached, 0, 1, TestData.CONF)) {
      Map<Long, List<Float>> first = draws(rows(p, 0, 0));
      Map<Long, List<Float>> fromCache =
          draws(rows(p, 0, 0)); // read back from the cache: mapped afresh
      assertThat(fromCache).isEqualTo(first);
      first.keySet().retainAll(shuffled.keySet());
      assertThat(first).isEqualTo(shuffled);
    }
  }

  /**
   * A resumed epoch (a new pipeline, as in a restarted task, skipping the steps already taken)
   * gives exactly the augmented batches the uninterrupted epoch gave from that step on.
   */
  @Test
  void aResumedEpochGivesTheSameAugmentedBatches() throws IOException {
    DatasetPlan plan = plan(100, 37, 5, 60);
    for (int workers : new int[] {1, 2}) {
      for (PipelineOptions o :
          List.of(
              opts().build(),
              opts().optShuffleBuffer(0).build(),
              opts().optSharding(PipelineOptions.ShardingPolicy.DATA).build())) {
        for (int rank = 0; rank < workers; rank++) {
          List<float[]> whole;
          long steps;
          try (InputPipeline p = InputPipeline.create(plan, o, rank, workers, TestData.CONF)) {
            rows(p, 0, 0);
            whole = rows(p, 2, 0);
            steps = p.stepsPerEpoch();
          }
          long skip = steps / 2 + 1;
          try (InputPipeline p = InputPipeline.create(plan, o, rank, workers, TestData.CONF)) {
            List<float[]> resumed = rows(p, 2, skip);
            List<float[]> tail = whole.subList((int) (skip * 8), whole.size());
            assertThat(resumed).as("workers " + workers + " rank " + rank).hasSize(tail.size());
            for (int i = 0; i < tail.size(); i++) {
              assertThat(resumed.get(i))
                  .as("row " + i + " after step " + skip)
                  .containsExactly(tail.get(i));
            }
          }
        }
      }
    }
  }

  /**
   * The map runs in the readers' threads — the parallel decode stage — not in the producer or the
   * batchers.
   */
  @Test
  void theMapRunsInTheReaderThreads() throws IOException {
    DatasetPlan plan = plan(50, 50, 50, 50);
    Set<String> threads = ConcurrentHashMap.newKeySet();
    PipelineOptions o =
        opts().optTransform(ex -> threads.add(Thread.currentThread().getName())).build();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      while (it.hasNext()) {
        it.next();
      }
    }
    assertThat(threads).isNotEmpty().allMatch(n -> n.contains("-reader"), "a reader thread");
  }

  /**
   * An exception thrown by the user's code fails the epoch naming the file, the record and its byte
   * offset.
   */
  @Test
  void aFailingTransformNamesTheFileAndRecord() throws IOException {
    Path d = dir.resolve("f");
    Files.createDirectories(d);
    long offset = -1;
    try (OutputStream os = Files.newOutputStream(d.resolve("part-000.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int i = 0; i < 40; i++) {
        if (i == 23) {
          offset = w.bytesWritten();
        }
        w.write(TestData.example(i, W));
      }
    }
    DatasetPlan plan =
        DatasetPlanner.plan(TestData.spec(d, W), PipelineOptions.builder().build(), TestData.CONF);
    ExampleTransform failing =
        ex -> {
          if (ex.get(0, 0) == 23f) {
            throw new IllegalStateException("cannot augment example 23");
          }
        };
    long badOffset = offset;
    for (PipelineOptions o :
        List.of(
            opts().optTransform(failing).build(),
            opts().optTransform(failing).optShuffleBuffer(0).optDeterministic(false).build())) {
      Assertions.assertTimeoutPreemptively(
          Duration.ofSeconds(60),
          () -> {
            try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
              assertThatThrownBy(
                      () -> {
                        Iterator<HostBatch> it = p.hostEpoch(0, 0);
                        while (it.hasNext()) {
                          it.next();
                        }
                      })
                  .isInstanceOf(UncheckedIOException.class)
                  .hasMessageContaining("The example transform failed on record 23 of")
                  .hasMessageContaining("part-000.tfrecord")
                  .hasMessageContaining("(byte offset " + badOffset + ")")
                  .hasMessageContaining("cannot augment example 23");
            }
          });
    }
  }

  /** Transforms travel to executors: built-ins and chains survive Java serialization. */
  @Test
  void transformsAreSerializable() throws Exception {
    ExampleTransform t =
        ImageAugment.parse("flip,crop:2,normalize:0.5/0.25", ImageAugment.Layout.CHW)
            .training()
            .andThen(ex -> ex.setLabel(1));
    PipelineOptions o = opts().optTransform(t).build();
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(o);
    }
    PipelineOptions back;
    try (ObjectInputStream in =
        new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
      back = (PipelineOptions) in.readObject();
    }
    assertThat(back.transform()).isNotNull();
    assertThat(back.toBuilder().build().transform()).isNotNull();
    assertThat(back.toBuilder().optTransform(null).build().transform()).isNull();
  }
}
