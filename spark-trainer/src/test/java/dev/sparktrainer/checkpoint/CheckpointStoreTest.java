package dev.sparktrainer.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointStoreTest {
  @TempDir Path tmp;

  @Test
  void keepsTheLastMAndRestoresTheLatest() throws Exception {
    CheckpointStore store = new CheckpointStore(tmp.toUri().toString(), new Configuration(), 2);
    assertThat(store.latest()).isEmpty();
    for (long step = 1; step <= 5; step++) {
      store.write(step * 10, new byte[] {(byte) step, 42});
    }
    assertThat(store.steps()).containsExactly(40L, 50L);
    CheckpointStore.Checkpoint latest = store.latest().orElseThrow();
    assertThat(latest.step()).isEqualTo(50);
    assertThat(latest.payload()).containsExactly(5, 42);
    // Leftovers of an interrupted write are ignored.
    Files.write(tmp.resolve("_tmp-60-abc"), new byte[] {1, 2, 3});
    assertThat(store.latest().orElseThrow().step()).isEqualTo(50);
  }

  @Test
  void aCorruptLatestCheckpointFallsBackToThePreviousOne() throws Exception {
    Configuration conf = new Configuration();
    conf.setBoolean("fs.file.impl.disable.cache", true);
    CheckpointStore store = new CheckpointStore(tmp.toString(), conf, 3);
    store.write(1, new byte[100]);
    store.write(2, new byte[100]);
    Path latest = tmp.resolve(CheckpointStore.fileName(2));
    Files.deleteIfExists(tmp.resolve("." + latest.getFileName() + ".crc")); // Hadoop's own checksum
    try (RandomAccessFile f = new RandomAccessFile(latest.toFile(), "rw")) {
      f.seek(f.length() - 1);
      f.write(7);
    }
    assertThat(store.latest().orElseThrow().step()).isEqualTo(1);
  }

  @Test
  void writabilityCheckNamesTheOption() throws Exception {
    CheckpointStore.checkWritable("checkpointDir", tmp.resolve("new/dir").toString(), new Configuration());
    assertThat(tmp.resolve("new/dir")).isDirectory();
    Path file = Files.writeString(tmp.resolve("file"), "x");
    assertThatThrownBy(() -> CheckpointStore.checkWritable("outputDir", file.toString(), new Configuration()))
        .hasMessageStartingWith("Invalid outputDir '" + file + "'");
  }
}
