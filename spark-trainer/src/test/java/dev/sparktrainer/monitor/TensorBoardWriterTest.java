package dev.sparktrainer.monitor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Event files written with the project's TFRecord writer, read back as TensorBoard reads them. */
class TensorBoardWriterTest {
  @TempDir Path tmp;

  @Test
  void eventFileStartsWithFileVersionAndHoldsScalarSummaries() throws IOException {
    long before = System.currentTimeMillis();
    Path dir = tmp.resolve("logs/train");
    try (TensorBoardWriter tb = TensorBoardWriter.create(dir.toString(), new Configuration())) {
      tb.scalar("epoch_loss", 0, 2.5);
      Map<String, Double> m = new LinkedHashMap<>();
      m.put("epoch_loss", 0.125);
      m.put("epoch_accuracy", 0.96875);
      m.put("epoch_val_loss", Double.NaN); // skipped: TensorBoard would draw nothing sensible
      m.put("epoch_time/compute_s", 1e-3);
      tb.scalars(1, m);
      tb.scalars(1L << 40, Map.of("batch_loss", -1.5)); // a large step: a multi-byte varint
    }
    List<Path> files;
    try (Stream<Path> s = Files.list(dir)) {
      files = s.toList();
    }
    // One event file, named as TensorFlow names its own, and no Hadoop .crc side file (TensorBoard
    // would try to read any name containing "tfevents").
    assertThat(files).hasSize(1);
    assertThat(files.get(0).getFileName().toString())
        .matches("events\\.out\\.tfevents\\.\\d{10}\\..+\\.v2");

    List<EventFiles.Event> events = EventFiles.read(files.get(0));
    assertThat(events).hasSize(4);
    EventFiles.Event first = events.get(0);
    assertThat(first.fileVersion()).isEqualTo("brain.Event:2");
    assertThat(first.step()).isZero();
    assertThat(first.wallTime())
        .isBetween(before / 1000.0 - 1, System.currentTimeMillis() / 1000.0 + 1);
    assertThat(events.get(1).step()).isEqualTo(0);
    assertThat(events.get(1).scalars()).containsExactly(Map.entry("epoch_loss", 2.5f));
    assertThat(events.get(2).step()).isEqualTo(1);
    assertThat(events.get(2).scalars())
        .containsOnlyKeys("epoch_loss", "epoch_accuracy", "epoch_time/compute_s");
    assertThat(events.get(2).scalars().get("epoch_accuracy")).isEqualTo(0.96875f);
    assertThat(events.get(2).scalars().get("epoch_time/compute_s")).isCloseTo(1e-3f, within(1e-9f));
    assertThat(events.get(3).step()).isEqualTo(1L << 40);
    assertThat(events.get(3).scalars()).containsExactly(Map.entry("batch_loss", -1.5f));
    assertThat(events.subList(1, 4)).allSatisfy(e -> assertThat(e.fileVersion()).isNull());
  }

  @Test
  void aCorruptedByteIsCaughtByTheCrc() throws IOException {
    Path dir = tmp.resolve("c");
    try (TensorBoardWriter tb = TensorBoardWriter.create(dir.toString(), new Configuration())) {
      tb.scalar("loss", 3, 1.0);
    }
    Path file;
    try (Stream<Path> s = Files.list(dir)) {
      file = s.findFirst().orElseThrow();
    }
    byte[] bytes = Files.readAllBytes(file);
    bytes[bytes.length - 6] ^= 0x10; // inside the last record's data
    Files.write(file, bytes);
    Assertions.assertThatThrownBy(() -> EventFiles.read(file))
        .hasMessageContaining("data CRC mismatch at record 1");
  }
}
