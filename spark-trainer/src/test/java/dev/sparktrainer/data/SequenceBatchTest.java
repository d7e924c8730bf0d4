package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Integer and variable-length features: int64 values exact end to end (those whose bits look like
 * NaNs too), sequences padded to each batch's longest with a mask (tf.data's {@code padded_batch}),
 * truncation counted, length buckets ({@code bucket_by_sequence_length}), resume, the cache, and
 * the bad inputs.
 */
class SequenceBatchTest {
  private static final int MAX = 16;
  private static final int RECORDS = 300;

  @TempDir Path dir;

  /** Record {@code id}'s length: mostly 0..8, one in five 0..40 (some beyond {@link #MAX}). */
  static int lengthOf(long id) {
    return (int) (id % 5 == 0 ? (id * 37) % 41 : (id * 7) % 9);
  }

  static long token(long id, int j) {
    return id * 1000 + j + (j % 3 == 0 ? 5_000_000_000L : 0); // beyond int32 too
  }

  /** An int64 whose two halves look like a signalling NaN and a negative int: bits must survive. */
  static long odd(long id) {
    return 0x7F800001L | ((-1L - id) << 32);
  }

  static byte[] example(long id) {
    long[] tokens = new long[lengthOf(id)];
    for (int j = 0; j < tokens.length; j++) {
      tokens[j] = token(id, j);
    }
    Map<String, Feature> m = new LinkedHashMap<>();
    m.put("id", Feature.ofInt64(id, odd(id)));
    m.put("tokens", Feature.ofInt64(tokens));
    m.put("label", Feature.ofInt64(id % 3));
    return Examples.encodeExample(m);
  }

  private Path write(int files, int perFile) throws IOException {
    Path d = dir.resolve("seq");
    Files.createDirectories(d);
    long id = 0;
    for (int f = 0; f < files; f++) {
      try (OutputStream os = Files.newOutputStream(d.resolve("part-" + f + ".tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = 0; i < perFile; i++, id++) {
          w.write(example(id));
        }
      }
    }
    return d;
  }

  private static DatasetSpec spec(Path d) {
    return DatasetSpec.builder()
        .addPath(d.toString())
        .addIntFeature("id", 2)
        .addSequenceFeature("tokens", DatasetSpec.ValueType.INT64, MAX, 0)
        .setLabel("label", DatasetSpec.LabelType.INT)
        .build();
  }

  private static PipelineOptions.Builder opts() {
    return PipelineOptions.builder()
        .optBatchSize(8)
        .optShuffleBuffer(40)
        .optCycleLength(3)
        .optSeed(11)
        .optPadValue(-7)
        .optDropRemainder(false)
        .optMemoryBudgetBytes(16 << 20);
  }

  /** One batch, copied out of the pipeline's buffers. */
  record Rows(long[] ids, int t, long[] tokens, float[] mask, int truncated, byte[] bytes) {}

  private static List<Rows> epoch(InputPipeline p, int epoch, long skip) {
    List<Rows> out = new ArrayList<>();
    Iterator<HostBatch> it = p.hostEpoch(epoch, skip);
    while (it.hasNext()) {
      HostBatch b = it.next();
      int n = b.size();
      long[] ids = new long[n];
      for (int i = 0; i < n; i++) {
        ids[i] = b.column(0).getLong(16 * i);
        assertThat(b.column(0).getLong(16 * i + 8)).isEqualTo(odd(ids[i]));
        assertThat(b.labels[i]).isEqualTo(ids[i] % 3);
      }
      assertThat(b.paddedLength(0)).isZero();
      int t = b.paddedLength(1);
      long[] tokens = new long[n * t];
      b.column(1).asLongBuffer().get(tokens);
      assertThat(b.column(1).limit()).isEqualTo(8 * n * t);
      float[] mask = new float[n * t];
      b.mask(1).asFloatBuffer().get(mask);
      ByteBuffer all = ByteBuffer.allocate(b.column(0).limit() + 8 * n * t + 4 * n * t);
      all.put(b.column(0).duplicate()).put(b.column(1).duplicate()).put(b.mask(1).duplicate());
      out.add(new Rows(ids, t, tokens, mask, b.truncated(), all.array()));
    }
    assertThat((long) out.size()).as("batches of an epoch").isEqualTo(p.stepsPerEpoch() - skip);
    return out;
  }

  private static void checkPadded(List<Rows> batches) {
    for (Rows r : batches) {
      int n = r.ids().length;
      int longest = 1;
      int cut = 0;
      for (long id : r.ids()) {
        longest = Math.max(longest, Math.min(lengthOf(id), MAX));
        cut += lengthOf(id) > MAX ? 1 : 0;
      }
      assertThat(r.t()).as("padded to the batch's own longest").isEqualTo(longest);
      assertThat(r.truncated()).isEqualTo(cut);
      for (int i = 0; i < n; i++) {
        int m = Math.min(lengthOf(r.ids()[i]), MAX);
        for (int j = 0; j < r.t(); j++) {
          long want = j < m ? token(r.ids()[i], j) : -7;
          assertThat(r.tokens()[i * r.t() + j]).as("row %d position %d", i, j).isEqualTo(want);
          assertThat(r.mask()[i * r.t() + j]).isEqualTo(j < m ? 1f : 0f);
        }
      }
    }
  }

  private static List<Long> ids(List<Rows> batches) {
    List<Long> out = new ArrayList<>();
    for (Rows r : batches) {
      for (long id : r.ids()) {
        out.add(id);
      }
    }
    return out;
  }

  @Test
  void paddedBatchesHoldEveryRecordOnceWithItsMaskAndTheCutCounted() throws IOException {
    DatasetPlan plan = DatasetPlanner.plan(spec(write(3, 100)), opts().build(), TestData.CONF);
    try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 1, TestData.CONF)) {
      List<Rows> batches = epoch(p, 0, 0);
      checkPadded(batches);
      assertThat(ids(batches)).hasSize(RECORDS).doesNotHaveDuplicates();
      long cut = batches.stream().mapToLong(Rows::truncated).sum();
      long expected = 0;
      for (long id = 0; id < RECORDS; id++) {
        expected += lengthOf(id) > MAX ? 1 : 0;
      }
      assertThat(cut).isEqualTo(expected).isPositive();
      assertThat(batches.stream().filter(r -> r.t() < MAX).count())
          .as("most batches shorter than the maximum")
          .isPositive();
    }
  }

  @Test
  void bucketsDrawEachBatchFromOneLengthRangeWithTheSameStepsAndRecords() throws IOException {
    Path d = write(3, 100);
    DatasetPlan plan = DatasetPlanner.plan(spec(d), opts().build(), TestData.CONF);
    List<Rows> plain;
    try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 1, TestData.CONF)) {
      plain = epoch(p, 0, 0);
    }
    PipelineOptions bucketed = opts().optBucketBoundaries(4, 8, 12).build();
    List<Rows> batches;
    try (InputPipeline p = InputPipeline.create(plan, bucketed, 0, 1, TestData.CONF)) {
      batches = epoch(p, 0, 0);
    }
    checkPadded(batches);
    assertThat(batches).hasSameSizeAs(plain);
    assertThat(ids(batches)).containsExactlyInAnyOrderElementsOf(ids(plain));
    int[] bounds = {4, 8, 12};
    int mixed = 0;
    for (Rows r : batches) {
      int k0 = -1;
      boolean one = true;
      for (long id : r.ids()) {
        int len = Math.min(lengthOf(id), MAX);
        int k = 0;
        while (k < bounds.length && len >= bounds[k]) {
          k++;
        }
        one &= k0 < 0 || k == k0;
        k0 = k;
      }
      mixed += one ? 0 : 1;
    }
    // Only the last batches, made of the buckets' rest at the shard's end, may mix buckets.
    assertThat(mixed).isLessThanOrEqualTo(bounds.length);
    assertThat(padding(batches)).isLessThan(padding(plain));
  }

  private static double padding(List<Rows> batches) {
    long pad = 0;
    long all = 0;
    for (Rows r : batches) {
      for (float m : r.mask()) {
        pad += m == 0 ? 1 : 0;
      }
      all += r.mask().length;
    }
    return (double) pad / all;
  }

  @Test
  void aResumedEpochContinuesBitForBitWithBucketsAndOnTwoWorkers() throws IOException {
    DatasetPlan plan = DatasetPlanner.plan(spec(write(4, 75)), opts().build(), TestData.CONF);
    PipelineOptions o = opts().optBucketBoundaries(5, 10).build();
    long steps = -1;
    for (int rank = 0; rank < 2; rank++) {
      List<Rows> whole;
      try (InputPipeline p = InputPipeline.create(plan, o, rank, 2, TestData.CONF)) {
        whole = epoch(p, 1, 0);
        if (steps < 0) {
          steps = p.stepsPerEpoch();
        }
        assertThat(p.stepsPerEpoch()).as("the same steps on every worker").isEqualTo(steps);
      }
      try (InputPipeline p = InputPipeline.create(plan, o, rank, 2, TestData.CONF)) {
        List<Rows> rest = epoch(p, 1, 5);
        assertThat(rest).hasSize(whole.size() - 5);
        for (int i = 0; i < rest.size(); i++) {
          assertThat(rest.get(i).bytes())
              .as("rank %d batch %d", rank, i + 5)
              .isEqualTo(whole.get(i + 5).bytes());
        }
      }
    }
  }

  @Test
  void theCacheKeepsIntegerBitsExactly() throws IOException {
    DatasetPlan plan = DatasetPlanner.plan(spec(write(2, 50)), opts().build(), TestData.CONF);
    PipelineOptions cached = opts().optCacheDir(dir.resolve("cache").toString()).build();
    Map<Long, byte[]> reference = new HashMap<>();
    try (InputPipeline p = InputPipeline.create(plan, opts().build(), 0, 1, TestData.CONF)) {
      for (Rows r : epoch(p, 1, 0)) {
        reference.put(r.ids()[0], r.bytes());
      }
    }
    try (InputPipeline p = InputPipeline.create(plan, cached, 0, 1, TestData.CONF)) {
      epoch(p, 0, 0); // writes the cache
      List<Rows> fromCache = epoch(p, 1, 0); // epoch 1 comes from it: the same order as above
      assertThat(fromCache).hasSize(reference.size());
      for (Rows r : fromCache) {
        assertThat(r.bytes()).isEqualTo(reference.get(r.ids()[0]));
      }
    }
    assertThat(Files.list(dir.resolve("cache")).count()).isPositive();
  }

  @Test
  void aMissingSequenceIsEmptyAndAnAllEmptyBatchHasLengthOne() throws IOException {
    Path d = dir.resolve("empty");
    Files.createDirectories(d);
    try (OutputStream os = Files.newOutputStream(d.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (long id = 0; id < 4; id++) {
        Map<String, Feature> m = new LinkedHashMap<>();
        m.put("id", Feature.ofInt64(id, odd(id)));
        if (id % 2 == 0) {
          m.put("tokens", Feature.ofInt64());
        }
        m.put("label", Feature.ofInt64(id % 3));
        w.write(Examples.encodeExample(m));
      }
    }
    PipelineOptions o = opts().optBatchSize(4).optShuffleBuffer(0).build();
    DatasetPlan plan = DatasetPlanner.plan(spec(d), o, TestData.CONF);
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      HostBatch b = p.hostEpoch(0, 0).next();
      assertThat(b.paddedLength(1)).isEqualTo(1);
      assertThat(b.mask(1).getFloat(0)).isZero();
      assertThat(b.column(1).getLong(0)).isEqualTo(-7);
    }
  }

  private Path writeOne(String name, Map<String, Feature> bad) throws IOException {
    Path d = dir.resolve(name);
    Files.createDirectories(d);
    try (OutputStream os = Files.newOutputStream(d.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      w.write(example(0));
      w.write(Examples.encodeExample(bad));
    }
    return d;
  }

  private static String firstError(DatasetSpec spec) throws IOException {
    PipelineOptions o = opts().optShuffleBuffer(0).build();
    DatasetPlan plan = DatasetPlanner.plan(spec, o, TestData.CONF);
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      while (it.hasNext()) {
        it.next();
      }
    } catch (RuntimeException e) {
      Throwable t = e;
      while (t.getCause() != null && !(t instanceof IOException)) {
        t = t.getCause();
      }
      return t.getMessage();
    }
    throw new AssertionError("no error");
  }

  @Test
  void badInputIsNamedWithItsFileAndRecord() throws IOException {
    Map<String, Feature> floats = new LinkedHashMap<>();
    floats.put("id", Feature.ofInt64(1, 2));
    floats.put("tokens", Feature.ofFloats(1.5f, 2f));
    floats.put("label", Feature.ofInt64(1));
    Path d = writeOne("floats", floats);
    String where = d.resolve("part-0.tfrecord").toUri().getPath();
    assertThat(firstError(spec(d)))
        .contains(where)
        .contains("feature 'tokens' holds floats, expected int64 ids (an Int64List)");

    DatasetSpec vocab =
        DatasetSpec.builder()
            .addPath(write(1, 10).toString())
            .addIntFeature("id", 2)
            .addSequenceFeature("tokens", DatasetSpec.ValueType.INT64, MAX, 4000)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    // Record 1's first token is 5,000,001,000: outside a vocabulary of 4000 (record 0 is empty).
    assertThat(firstError(vocab))
        .contains("part-0.tfrecord")
        .contains("at byte offset ")
        .contains("feature 'tokens' value 0 is 5000001000: outside the vocabulary [0, 4000)");

    Map<String, Feature> shape = new LinkedHashMap<>();
    shape.put("id", Feature.ofInt64(1, 2, 3));
    shape.put("tokens", Feature.ofInt64(1));
    shape.put("label", Feature.ofInt64(1));
    assertThat(firstError(spec(writeOne("shape", shape))))
        .contains("feature 'id' has 3 values, expected 2 for shape [2]");
  }

  @Test
  void theSpecRefusesWhatCannotBeBatched() {
    assertThatThrownBy(
            () -> DatasetSpec.builder().addSequenceFeature("t", DatasetSpec.ValueType.INT64, 0, 0))
        .hasMessage("DatasetSpec: sequence feature 't' has maximum length 0: expected at least 1");
    assertThatThrownBy(
            () ->
                DatasetSpec.builder().addSequenceFeature("t", DatasetSpec.ValueType.FLOAT32, 8, 10))
        .hasMessageContaining("expected 0 (unchecked) or, for int64 ids, a positive size");
    assertThatThrownBy(() -> PipelineOptions.builder().optBucketBoundaries(8, 8))
        .hasMessage(
            "Invalid bucketBoundaries [8, 8]: expected strictly increasing positive lengths,"
                + " e.g. 16,32,64");
    DatasetSpec s =
        DatasetSpec.builder()
            .addPath("x")
            .addSequenceFeature("t", DatasetSpec.ValueType.INT64, 8, 0)
            .build();
    assertThatThrownBy(() -> new FeatureStatistics(s))
        .hasMessageContaining("leave the int64 and sequence columns out");
    assertThat(Arrays.toString(s.features().toArray())).isEqualTo("[t[<=8] ids]");
  }
}
