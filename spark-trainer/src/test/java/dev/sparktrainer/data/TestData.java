package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;

/**
 * Datasets for the pipeline tests (and the device package's): record {@code id} has features {@code
 * [id, id + 0.5, ...]} and label {@code id % 10}.
 */
public final class TestData {
  private TestData() {}

  public static final Configuration CONF = new Configuration();

  /**
   * Writes one file per count, ids numbered consecutively from {@code firstId}; returns the next
   * id.
   */
  public static long writeTFRecords(
      Path dir, int width, long firstId, TFRecordCompression c, int... counts) throws IOException {
    Files.createDirectories(dir);
    long id = firstId;
    for (int f = 0; f < counts.length; f++) {
      Path file = dir.resolve(String.format("part-%03d%s", f, c.extension()));
      try (OutputStream os = Files.newOutputStream(file);
          TFRecordWriter w = new TFRecordWriter(c.compress(os))) {
        for (int i = 0; i < counts[f]; i++, id++) {
          w.write(example(id, width));
        }
      }
    }
    return id;
  }

  static byte[] example(long id, int width) {
    float[] x = new float[width];
    for (int k = 0; k < width; k++) {
      x[k] = id + 0.5f * k;
    }
    Map<String, Feature> m = new LinkedHashMap<>();
    m.put("x", Feature.ofFloats(x));
    m.put("label", Feature.ofInt64(id % 10));
    m.put("unused", Feature.ofStrings("skip me"));
    return Examples.encodeExample(m);
  }

  public static DatasetSpec spec(Path dir, int width) {
    return DatasetSpec.builder()
        .addPath(dir.toString())
        .addFeature("x", width)
        .setLabel("label", DatasetSpec.LabelType.INT)
        .build();
  }

  /** The id of a decoded record (its first feature value). */
  static long idOf(HostBatch b, int row, int width) {
    return (long) b.feature(0, row * width);
  }
}
