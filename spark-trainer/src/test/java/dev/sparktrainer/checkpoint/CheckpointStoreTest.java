package dev.sparktrainer.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class CheckpointStoreTest {
  /** Short waits between read attempts: the tests check the rule, not the default waits. */
  private static final long[] FAST_RETRIES = {10, 20, 40};

  @TempDir Path tmp;

  /** Arrays {@code a0, a1, ...} of the given sizes, with values that depend on the step. */
  static CheckpointState state(long step, byte[] metadata, int... sizes) {
    List<StateArray> arrays = new ArrayList<>();
    for (int a = 0; a < sizes.length; a++) {
      float[] v = new float[sizes[a]];
      for (int i = 0; i < v.length; i++) {
        v[i] = step * 1000 + a + i * 0.5f;
      }
      arrays.add(new StateArray("a" + a, v));
    }
    return new CheckpointState(step, metadata, arrays);
  }

  static void assertSameState(CheckpointState actual, CheckpointState expected) {
    assertThat(actual.step()).isEqualTo(expected.step());
    assertThat(actual.metadata()).isEqualTo(expected.metadata());
    assertThat(actual.arrays()).hasSameSizeAs(expected.arrays());
    for (int a = 0; a < expected.arrays().size(); a++) {
      StateArray want = expected.arrays().get(a);
      StateArray got = actual.arrays().get(a);
      assertThat(got.name()).isEqualTo(want.name());
      assertThat(got.values().length)
          .as("length of %s", want.name())
          .isEqualTo(want.values().length);
      float[] w = want.values();
      float[] g = got.values();
      int firstDifference = -1;
      for (int i = 0; i < w.length && firstDifference < 0; i++) {
        if (Float.floatToRawIntBits(w[i])
            != Float.floatToRawIntBits(g[i])) { // bit for bit, NaN payloads too
          firstDifference = i;
        }
      }
      assertThat(firstDifference).as("first value of %s that differs", want.name()).isEqualTo(-1);
    }
  }

  @Test
  void roundTripOfArraysOfEverySize() throws Exception {
    CheckpointStore store = new CheckpointStore(tmp.toUri().toString(), new Configuration(), 3);
    assertThat(store.latest()).isEmpty();
    byte[] metadata = new byte[1000];
    new Random(1).nextBytes(metadata);
    // 0, 1, odd, one float more than the 1 MiB buffer holds, ~10M (odd, across many buffers).
    CheckpointState big = state(7, metadata, 0, 1, 7, (1 << 18) + 1, 10_000_019);
    List<StateArray> arrays = new ArrayList<>(big.arrays());
    arrays.add(
        new StateArray(
            "Ω/weights ünïcode",
            new float[] {
              Float.intBitsToFloat(0x7fc0_1234),
              -0.0f,
              Float.POSITIVE_INFINITY,
              Float.NEGATIVE_INFINITY,
              Float.MIN_VALUE,
              Float.MAX_VALUE,
              Float.NaN
            }));
    CheckpointState written = new CheckpointState(7, metadata, arrays);
    store.write(written);

    assertThat(store.steps()).containsExactly(7L);
    assertSameState(store.latest().orElseThrow(), written);

    CheckpointState bare = new CheckpointState(8, new byte[0], List.of());
    store.write(bare);
    assertSameState(store.latest().orElseThrow(), bare);
  }

  @Test
  void theFileHasTheDocumentedLayout() throws Exception {
    CheckpointStore store = new CheckpointStore(tmp.toString(), TestFileSystems.rawLocal(), 1);
    byte[] metadata = {9, 8, 7};
    store.write(
        new CheckpointState(
            42,
            metadata,
            List.of(
                new StateArray("w", new float[] {1.5f, -2f}),
                new StateArray("bias", new float[0]))));
    byte[] file = Files.readAllBytes(tmp.resolve(CheckpointStore.fileName(42)));
    ByteBuffer b = ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN);

    long records = 16 + (4 + 3 + 4) + (4 + 1 + 4 + 8 + 4) + (4 + 4 + 4 + 0 + 4);
    long manifest = 28 + (20 + 1) + (20 + 4);
    assertThat(file.length).isEqualTo(records + manifest + 20);
    assertThat(Arrays.copyOfRange(file, 0, 4))
        .asString(StandardCharsets.US_ASCII)
        .isEqualTo("STCK");
    assertThat(b.getInt(4)).as("version").isEqualTo(2);
    assertThat(b.getLong(8)).as("step").isEqualTo(42);
    assertThat(b.getInt(16)).as("metadata length").isEqualTo(3);
    assertThat(Arrays.copyOfRange(file, 20, 23)).isEqualTo(metadata);
    int w = 16 + 4 + 3 + 4;
    assertThat(b.getInt(w)).as("name length").isEqualTo(1);
    assertThat(file[w + 4]).isEqualTo((byte) 'w');
    assertThat(b.getInt(w + 5)).as("count").isEqualTo(2);
    assertThat(b.getFloat(w + 9)).isEqualTo(1.5f);
    assertThat(b.getFloat(w + 13)).isEqualTo(-2f);
    assertThat(b.getLong(file.length - 20)).as("manifest offset").isEqualTo(records);
    assertThat(b.getInt(file.length - 12)).as("manifest length").isEqualTo(manifest);
    assertThat(Arrays.copyOfRange(file, file.length - 4, file.length))
        .asString(StandardCharsets.US_ASCII)
        .isEqualTo("STCK");
    assertThat(b.getLong((int) records)).as("manifest step").isEqualTo(42);
  }

  @Test
  void keepsTheNewestKAndIgnoresLeftoverTemporaryFiles() throws Exception {
    CheckpointStore store = new CheckpointStore(tmp.toUri().toString(), new Configuration(), 2);
    for (long step = 1; step <= 5; step++) {
      store.write(state(step * 10, new byte[] {(byte) step, 42}, 3, 5));
    }
    assertThat(store.steps()).containsExactly(40L, 50L);
    CheckpointState latest = store.latest().orElseThrow();
    assertSameState(latest, state(50, new byte[] {5, 42}, 3, 5));

    // Leftovers of interrupted writes are ignored, and deleted once a checkpoint of a later step
    // exists.
    Files.write(tmp.resolve("_tmp-55-abc"), new byte[] {1, 2, 3});
    Files.write(tmp.resolve("_tmp-70-def"), new byte[] {1, 2, 3});
    assertThat(store.latest().orElseThrow().step()).isEqualTo(50);
    store.write(state(60, new byte[0], 1));
    assertThat(tmp.resolve("_tmp-55-abc")).doesNotExist();
    assertThat(tmp.resolve("_tmp-70-def")).exists();
    assertThat(store.steps()).containsExactly(50L, 60L);
  }

  /** Where things are in the checkpoint {@link #corruptible}: from the documented layout. */
  record Layout(
      long length, int metadata, int firstRecord, int firstData, int firstCrc, long manifest) {}

  /** A change to a checkpoint file. */
  interface Corruption {
    void apply(RandomAccessFile f, Layout at) throws IOException;
  }

  private static final byte[] METADATA = "epoch=3 position=17".getBytes(StandardCharsets.UTF_8);

  /** Arrays "a0" (1000 floats) and "a1" (10). */
  private static CheckpointState corruptible(long step) {
    return state(step, METADATA, 1000, 10);
  }

  static Stream<Arguments> corruptions() {
    return Stream.of(
        Arguments.of(
            "a byte of an array",
            (Corruption) (f, at) -> flip(f, at.firstData + 100),
            "array 0 ('a0'): data CRC-32C mismatch"),
        Arguments.of(
            "a byte of the metadata",
            (Corruption) (f, at) -> flip(f, at.metadata + 2),
            "metadata CRC-32C mismatch"),
        Arguments.of(
            "a byte of the manifest",
            (Corruption) (f, at) -> flip(f, at.manifest + 3),
            "manifest CRC-32C mismatch"),
        Arguments.of(
            "a byte of an array's name",
            (Corruption) (f, at) -> flip(f, at.firstRecord + 4),
            "its record names it"),
        Arguments.of(
            "an array's stored CRC",
            (Corruption) (f, at) -> flip(f, at.firstCrc),
            "the record's CRC differs from the manifest's"),
        Arguments.of(
            "an array's count",
            (Corruption) (f, at) -> flip(f, at.firstData - 4),
            "its record has"),
        Arguments.of(
            "truncated to half", (Corruption) (f, at) -> f.setLength(at.length / 2), "no footer"),
        Arguments.of(
            "the footer removed", (Corruption) (f, at) -> f.setLength(at.length - 20), "no footer"),
        Arguments.of(
            "a byte appended",
            (Corruption)
                (f, at) -> {
                  f.seek(at.length);
                  f.write(0);
                },
            "no footer"),
        Arguments.of(
            "the footer's manifest offset",
            (Corruption) (f, at) -> flip(f, at.length - 20),
            "which does not end where the footer starts"),
        Arguments.of("emptied", (Corruption) (f, at) -> f.setLength(0), "truncated: 0 bytes"),
        Arguments.of("a bad magic number", (Corruption) (f, at) -> flip(f, 0), "bad magic number"),
        Arguments.of(
            "an unsupported version",
            (Corruption)
                (f, at) -> {
                  f.seek(4);
                  f.write(new byte[] {3, 0, 0, 0});
                },
            "unsupported format version 3"),
        Arguments.of(
            "the header's step", (Corruption) (f, at) -> flip(f, 8), "the header says step"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("corruptions")
  void aProvablyBadCheckpointIsSkippedForThePreviousOne(
      String what, Corruption corruption, String reason) throws Exception {
    // RawLocalFileSystem: no .crc side files, so the checkpoint's own CRCs are what detect it.
    CheckpointStore store =
        new CheckpointStore(tmp.toString(), TestFileSystems.rawLocal(), 3, FAST_RETRIES);
    store.write(corruptible(1));
    store.write(corruptible(2));
    Path file = tmp.resolve(CheckpointStore.fileName(2));
    try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
      int metadata = 16 + 4;
      int firstRecord = metadata + METADATA.length + 4;
      int firstData = firstRecord + 4 + 2 + 4; // name "a0"
      int firstCrc = firstData + 4 * 1000;
      f.seek(f.length() - 20);
      long manifest = Long.reverseBytes(f.readLong());
      corruption.apply(
          f, new Layout(f.length(), metadata, firstRecord, firstData, firstCrc, manifest));
    }

    assertThatThrownBy(() -> store.read(2))
        .isInstanceOf(CorruptCheckpointException.class)
        .hasMessageContaining(file.getFileName().toString())
        .hasMessageContaining(reason);
    List<SkippedCheckpoint> skipped = new ArrayList<>();
    assertSameState(store.latest(skipped::add).orElseThrow(), corruptible(1));
    assertThat(skipped)
        .singleElement()
        .satisfies(
            k -> {
              assertThat(k.file()).endsWith("/" + file.getFileName());
              assertThat(k.reason()).startsWith("corrupt").contains(reason);
            });
  }

  @Test
  void everySkippedCheckpointIsReportedNewestFirstAndNoneWhenTheNewestVerifies() throws Exception {
    CheckpointStore store =
        new CheckpointStore(tmp.toString(), TestFileSystems.rawLocal(), 3, FAST_RETRIES);
    for (long step = 1; step <= 3; step++) {
      store.write(corruptible(step));
    }
    List<SkippedCheckpoint> skipped = new ArrayList<>();
    assertThat(store.latest(skipped::add).orElseThrow().step()).isEqualTo(3);
    assertThat(skipped).as("the newest verified: nothing skipped").isEmpty();

    try (RandomAccessFile f =
        new RandomAccessFile(tmp.resolve(CheckpointStore.fileName(3)).toFile(), "rw")) {
      f.setLength(f.length() / 2);
    }
    try (RandomAccessFile f =
        new RandomAccessFile(tmp.resolve(CheckpointStore.fileName(2)).toFile(), "rw")) {
      flip(f, 0);
    }
    assertThat(store.latest(skipped::add).orElseThrow().step()).isEqualTo(1);
    assertThat(skipped)
        .extracting(k -> k.file().substring(k.file().lastIndexOf('/') + 1))
        .containsExactly(CheckpointStore.fileName(3), CheckpointStore.fileName(2));
    assertThat(skipped.get(0).reason()).startsWith("corrupt at byte ").contains("no footer");
    assertThat(skipped.get(1).reason())
        .isEqualTo("corrupt at byte 0: bad magic number: not a checkpoint file");

    // All of them bad: empty, and all three reported.
    try (RandomAccessFile f =
        new RandomAccessFile(tmp.resolve(CheckpointStore.fileName(1)).toFile(), "rw")) {
      f.setLength(0);
    }
    skipped.clear();
    assertThat(store.latest(skipped::add)).isEmpty();
    assertThat(skipped).hasSize(3);
    assertThat(skipped.get(2).reason()).startsWith("corrupt: truncated: 0 bytes");
  }

  @Test
  void aNewRunsCheckpointsAreKeptBesideCorruptOnesOfLaterSteps() throws Exception {
    CheckpointStore store =
        new CheckpointStore(tmp.toString(), TestFileSystems.rawLocal(), 2, FAST_RETRIES);
    store.write(corruptible(30));
    store.write(corruptible(40));
    for (long step : new long[] {30, 40}) {
      try (RandomAccessFile f =
          new RandomAccessFile(tmp.resolve(CheckpointStore.fileName(step)).toFile(), "rw")) {
        flip(f, 100);
      }
    }
    assertThat(store.latest())
        .as("every checkpoint corrupt: training starts from scratch")
        .isEmpty();

    // The restarted run writes steps 10 and 20: they must not be pruned in favour of the bad 30 and
    // 40.
    store.write(corruptible(10));
    store.write(corruptible(20));
    assertThat(store.steps()).containsExactly(10L, 20L, 30L, 40L);
    List<SkippedCheckpoint> skipped = new ArrayList<>();
    assertSameState(store.latest(skipped::add).orElseThrow(), corruptible(20));
    assertThat(skipped).hasSize(2);
    // Old ones of its own steps still go; a bad one is replaced when its step is written again.
    store.write(corruptible(25));
    assertThat(store.steps()).containsExactly(20L, 25L, 30L, 40L);
    store.write(corruptible(30));
    assertThat(store.steps()).containsExactly(25L, 30L, 40L);
    assertSameState(store.latest().orElseThrow(), corruptible(30));
  }

  @Test
  void withHadoopsChecksummedLocalFileSystemACorruptCheckpointIsSkippedToo() throws Exception {
    Configuration conf = new Configuration();
    conf.setBoolean("fs.file.impl.disable.cache", true);
    CheckpointStore store = new CheckpointStore(tmp.toString(), conf, 3, FAST_RETRIES);
    store.write(corruptible(1));
    store.write(corruptible(2));
    Path file = tmp.resolve(CheckpointStore.fileName(2));
    assertThat(tmp.resolve("." + file.getFileName() + ".crc")).exists();
    try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
      flip(f, 16 + 4 + METADATA.length + 4 + 10 + 100);
    }
    // Hadoop's .crc catches it first; either way it is proof, not a reason to retry.
    assertThatThrownBy(() -> store.read(2)).isInstanceOf(CorruptCheckpointException.class);
    assertThat(store.latest().orElseThrow().step()).isEqualTo(1);
  }

  @Test
  void aCheckpointOfTheOldFormatIsAnErrorNotSkipped() throws Exception {
    CheckpointStore store =
        new CheckpointStore(tmp.toString(), TestFileSystems.rawLocal(), 3, FAST_RETRIES);
    store.write(corruptible(1));
    Path old = tmp.resolve(CheckpointStore.fileName(2));
    Files.write(old, formatOne(2, new byte[] {1, 2, 3}));

    assertThatThrownBy(store::latest)
        .isInstanceOf(IncompatibleCheckpointException.class)
        .hasMessageContaining(old.getFileName().toString())
        .hasMessageContaining("written by an older version of spark-trainer (checkpoint format 1)");

    // An old checkpoint behind a newer one that verifies is never reached.
    store.write(corruptible(3));
    assertThat(store.latest().orElseThrow().step()).isEqualTo(3);
  }

  /** A checkpoint as the previous version wrote it: header, one byte[] payload. */
  private static byte[] formatOne(long step, byte[] payload) throws IOException {
    CRC32 crc = new CRC32();
    crc.update(payload);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeInt(0x53544b31);
      out.writeInt(1);
      out.writeLong(step);
      out.writeLong(payload.length);
      out.writeLong(crc.getValue());
      out.write(payload);
    }
    return bytes.toByteArray();
  }

  @Test
  void aTransientErrorIsRetriedAndTheNewestCheckpointRestored() throws Exception {
    String scheme = TestFileSystems.FlakyOpen.SCHEME;
    CheckpointStore store =
        new CheckpointStore(
            TestFileSystems.uri(scheme, tmp),
            TestFileSystems.conf(scheme, TestFileSystems.FlakyOpen.class),
            3,
            FAST_RETRIES);
    store.write(corruptible(1));
    store.write(corruptible(2));

    TestFileSystems.FlakyOpen.reset(2);
    List<SkippedCheckpoint> skipped = new ArrayList<>();
    assertSameState(store.latest(skipped::add).orElseThrow(), corruptible(2));
    assertThat(TestFileSystems.FlakyOpen.opens)
        .as("opens: two failed, the third worked")
        .hasValue(3);
    assertThat(skipped).as("a transient error skips nothing").isEmpty();
  }

  @Test
  void aTimeoutIsRetriedThoughItIsAnInterruptedIOException() throws Exception {
    String scheme = TestFileSystems.FlakyOpen.SCHEME;
    CheckpointStore store =
        new CheckpointStore(
            TestFileSystems.uri(scheme, tmp),
            TestFileSystems.conf(scheme, TestFileSystems.FlakyOpen.class),
            3,
            FAST_RETRIES);
    store.write(corruptible(1));
    store.write(corruptible(2));

    TestFileSystems.FlakyOpen.reset(2);
    TestFileSystems.FlakyOpen.timeouts = true;
    assertSameState(store.latest().orElseThrow(), corruptible(2));
    assertThat(TestFileSystems.FlakyOpen.opens)
        .as("opens: two timed out, the third worked")
        .hasValue(3);

    TestFileSystems.FlakyOpen.reset(Integer.MAX_VALUE);
    TestFileSystems.FlakyOpen.timeouts = true;
    assertThatThrownBy(store::latest)
        .isInstanceOf(IOException.class)
        .hasMessageContaining(CheckpointStore.fileName(2))
        .hasMessageContaining("4 attempts")
        .hasRootCauseInstanceOf(SocketTimeoutException.class);
  }

  @Test
  void aPersistentErrorIsThrownNamingThePathInsteadOfFallingBack() throws Exception {
    String scheme = TestFileSystems.FlakyOpen.SCHEME;
    CheckpointStore store =
        new CheckpointStore(
            TestFileSystems.uri(scheme, tmp),
            TestFileSystems.conf(scheme, TestFileSystems.FlakyOpen.class),
            3,
            FAST_RETRIES);
    store.write(corruptible(1));
    store.write(corruptible(2));

    TestFileSystems.FlakyOpen.reset(Integer.MAX_VALUE);
    List<SkippedCheckpoint> skipped = new ArrayList<>();
    assertThatThrownBy(() -> store.latest(skipped::add))
        .isInstanceOf(IOException.class)
        .isNotInstanceOf(CorruptCheckpointException.class)
        .hasMessageContaining(CheckpointStore.fileName(2))
        .hasMessageContaining("4 attempts")
        .hasRootCauseMessage("simulated 503 Service Unavailable");
    assertThat(TestFileSystems.FlakyOpen.opens)
        .as("every attempt on the newest, none on the older one")
        .hasValue(4);
    assertThat(skipped).isEmpty();
  }

  @Test
  void invalidArgumentsAreRefused() {
    assertThatThrownBy(() -> new CheckpointStore(tmp.toString(), new Configuration(), 0))
        .hasMessage("Invalid keepCheckpoints 0: expected >= 1");
    assertThatThrownBy(() -> new CheckpointState(-1, new byte[0], List.of()))
        .hasMessage("Invalid checkpoint step -1: expected >= 0");
  }

  @Test
  void writabilityCheckNamesTheOption() throws Exception {
    CheckpointStore.checkWritable(
        "checkpointDir", tmp.resolve("new/dir").toString(), new Configuration());
    assertThat(tmp.resolve("new/dir")).isDirectory();
    Path file = Files.writeString(tmp.resolve("file"), "x");
    assertThatThrownBy(
            () -> CheckpointStore.checkWritable("outputDir", file.toString(), new Configuration()))
        .hasMessageStartingWith("Invalid outputDir '" + file + "'");
  }

  private static void flip(RandomAccessFile f, long offset) throws IOException {
    f.seek(offset);
    int b = f.read();
    f.seek(offset);
    f.write(b ^ 0x5a);
  }
}
