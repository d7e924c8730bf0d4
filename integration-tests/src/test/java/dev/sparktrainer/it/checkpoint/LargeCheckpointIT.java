package dev.sparktrainer.it.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.StateArray;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint larger than 2 GiB, written and read back through the store on the local file system
 * (Hadoop's checksummed one, as a user gets it). The arrays are about 2.4 GB: with the tests'
 * -Xmx4g the written state must be garbage before the read allocates its copy, and neither side may
 * hold a byte[] of an array or of the state.
 */
class LargeCheckpointIT {
  /** 2.24 GB of data: more bytes than an int counts, in one array. */
  private static final int BIG = 560_000_000;

  /** Its record starts beyond 2 GiB. */
  private static final int TAIL = 30_000_001;

  private static final byte[] METADATA = "epoch=1".getBytes(StandardCharsets.UTF_8);

  @TempDir Path tmp;

  @Test
  void aCheckpointLargerThan2GiBIsWrittenAndReadBack() throws IOException {
    CheckpointStore store = new CheckpointStore(tmp.toUri().toString(), new Configuration(), 1);
    long start = System.nanoTime();
    writeLargeState(store); // its arrays are unreachable once it returns
    long written = System.nanoTime();
    Path file = tmp.resolve("ckpt-0000000000000000123.bin");
    try {
      assertThat(Files.size(file)).isGreaterThan(4L * (BIG + TAIL)).isGreaterThan(1L << 31);

      CheckpointState back = store.latest().orElseThrow();
      System.out.printf(
          "LargeCheckpointIT: %,d bytes written in %.1f s (arrays filled too), read in %.1f s%n",
          Files.size(file), (written - start) / 1e9, (System.nanoTime() - written) / 1e9);
      assertThat(back.step()).isEqualTo(123);
      assertThat(back.metadata()).isEqualTo(METADATA);
      assertThat(back.arrays()).extracting(StateArray::name).containsExactly("big", "tail", "one");
      assertPattern(back.arrays().get(0).values(), BIG, 0.25f);
      assertPattern(back.arrays().get(1).values(), TAIL, -3f);
      assertThat(back.arrays().get(2).values()).containsExactly(42f);
    } finally {
      Files.deleteIfExists(file); // 2.4 GB: do not wait for the end of the run
    }
  }

  private static void writeLargeState(CheckpointStore store) throws IOException {
    store.write(
        new CheckpointState(
            123,
            METADATA,
            List.of(
                new StateArray("big", pattern(BIG, 0.25f)),
                new StateArray("tail", pattern(TAIL, -3f)),
                new StateArray("one", new float[] {42f}))));
  }

  private static float[] pattern(int length, float k) {
    float[] v = new float[length];
    for (int i = 0; i < length; i++) {
      v[i] = i * k;
    }
    return v;
  }

  /** Every value, not a sample: a few hundred milliseconds. */
  private static void assertPattern(float[] v, int length, float k) {
    assertThat(v).hasSize(length);
    int firstDifference = -1;
    for (int i = 0; i < length && firstDifference < 0; i++) {
      if (v[i] != i * k) {
        firstDifference = i;
      }
    }
    assertThat(firstDifference).as("first index whose value differs").isEqualTo(-1);
  }
}
