package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Image columns held as bytes on the host ({@link DatasetSpec#withImageBytes()}, what image
 * transfer uint8 reads): on every path of the pipeline (shuffle buffer, decoded in the batch,
 * unordered readers, planned shuffle, the cache, random-resized-crop) each row holds one byte per
 * value, four to a slot, and the bytes are exactly those the float32 path's values {@code k / 255f}
 * are made of — including slots whose bits are NaN patterns (white pixels, signalling NaNs), which
 * are only ever copied.
 */
class ImageBytesTest {
  private static final int H = 5;
  private static final int W = 6;
  private static final int C = 3;
  private static final int VALUES = H * W * C; // 90: the last slot holds 2 bytes
  private static final int SLOTS = (VALUES + 3) / 4;
  private static final int N = 44;
  @TempDir static Path dir;

  /** The same images and labels as a Parquet file (binary column {@code image}, int64 label). */
  @TempDir static Path parquetDir;

  @BeforeAll
  static void write() throws IOException {
    Random r = new Random(3);
    int id = 0;
    for (int f = 0; f < 2; f++) {
      try (OutputStream os = Files.newOutputStream(dir.resolve("part-" + f + ".tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = 0; i < N / 2; i++, id++) {
          // sizes around the declared one (resized), and the declared one (copied)
          int h = id % 3 == 0 ? H : H + r.nextInt(9);
          int wd = id % 3 == 0 ? W : W + r.nextInt(9);
          BufferedImage img = new BufferedImage(wd, h, BufferedImage.TYPE_INT_RGB);
          for (int y = 0; y < h; y++) {
            for (int x = 0; x < wd; x++) {
              int rgb;
              if (id % 4 == 1) {
                rgb = 0xFFFFFF; // every slot 0xFFFFFFFF: a NaN
              } else if (id % 4 == 2) {
                // bytes 01 00 81 FF repeating: slots 0xFF810001 (little-endian), signalling NaNs
                int[] pattern = {0x01, 0x00, 0x81, 0xFF};
                int p = 3 * (y * wd + x);
                rgb = pattern[p % 4] << 16 | pattern[(p + 1) % 4] << 8 | pattern[(p + 2) % 4];
              } else {
                rgb = r.nextInt(1 << 24);
              }
              img.setRGB(x, y, rgb);
            }
          }
          ByteArrayOutputStream png = new ByteArrayOutputStream();
          ImageIO.write(img, "png", png);
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("image", Feature.ofBytes(png.toByteArray()));
          m.put("label", Feature.ofInt64(id));
          w.write(Examples.encodeExample(m));
          pngs.add(png.toByteArray());
        }
      }
    }
    org.apache.parquet.schema.MessageType schema =
        org.apache.parquet.schema.MessageTypeParser.parseMessageType(
            "message m { required binary image; required int64 label; }");
    org.apache.parquet.example.data.simple.SimpleGroupFactory groups =
        new org.apache.parquet.example.data.simple.SimpleGroupFactory(schema);
    try (org.apache.parquet.hadoop.ParquetWriter<org.apache.parquet.example.data.Group> w =
        org.apache.parquet.hadoop.example.ExampleParquetWriter.builder(
                org.apache.parquet.hadoop.util.HadoopOutputFile.fromPath(
                    new org.apache.hadoop.fs.Path(parquetDir.resolve("part-0.parquet").toString()),
                    TestData.CONF))
            .withType(schema)
            .build()) {
      for (int i = 0; i < pngs.size(); i++) {
        org.apache.parquet.example.data.Group g = groups.newGroup();
        g.append("image", org.apache.parquet.io.api.Binary.fromConstantByteArray(pngs.get(i)));
        g.append("label", (long) i);
        w.write(g);
      }
    }
  }

  private static final List<byte[]> pngs = new ArrayList<>();

  private static DatasetSpec spec() {
    return spec(false);
  }

  private static DatasetSpec spec(boolean parquet) {
    DatasetSpec.Builder b = DatasetSpec.builder();
    if (parquet) {
      b.addPath(parquetDir.toString()).optFormat(DatasetSpec.Format.PARQUET);
    } else {
      b.addPath(dir.toString());
    }
    return b.addImageFeature("image", H, W, C).setLabel("label", DatasetSpec.LabelType.INT).build();
  }

  /** Rows of one epoch, in order: label, and the row's bytes (either path's, as bytes). */
  private record Rows(List<Long> order, Map<Long, byte[]> rows) {}

  private static Rows epoch(InputPipeline p, int epoch, boolean bytes) {
    List<Long> order = new ArrayList<>();
    Map<Long, byte[]> rows = new TreeMap<>();
    for (Iterator<HostBatch> it = p.hostEpoch(epoch, 0); it.hasNext(); ) {
      HostBatch b = it.next();
      ByteBuffer col = b.column(0);
      int stride = bytes ? 4 * SLOTS : 4 * VALUES;
      assertThat(col.limit()).as("the column's bytes").isEqualTo(b.size() * stride);
      for (int i = 0; i < b.size(); i++) {
        long label = (long) b.labels[i];
        byte[] row = new byte[VALUES];
        for (int j = 0; j < VALUES; j++) {
          if (bytes) {
            row[j] = col.get(i * stride + j);
          } else {
            float v = col.getFloat(i * stride + 4 * j);
            int k = Math.round(v * 255f);
            assertThat(v).as("a decoded value is k / 255f").isEqualTo(k / 255f);
            row[j] = (byte) k;
          }
        }
        if (bytes) {
          for (int j = VALUES; j < 4 * SLOTS; j++) {
            assertThat(col.get(i * stride + j)).as("the last slot's unused bytes").isZero();
          }
        }
        order.add(label);
        rows.put(label, row);
      }
    }
    return new Rows(order, rows);
  }

  /** Epochs 0 and 1 on both paths, the same options: the same rows, byte for byte. */
  private static void assertSameOnBothPaths(PipelineOptions o, boolean ordered) throws IOException {
    assertSameOnBothPaths(spec(), o, ordered);
  }

  private static void assertSameOnBothPaths(DatasetSpec spec, PipelineOptions o, boolean ordered)
      throws IOException {
    DatasetPlan plan = DatasetPlanner.plan(spec, o, TestData.CONF);
    DatasetPlan bytesPlan = plan.withImageBytes();
    assertThat(bytesPlan.spec().featureSize()).isEqualTo(SLOTS);
    assertThat(plan.spec().featureSize()).isEqualTo(VALUES);
    for (int epoch = 0; epoch < 2; epoch++) {
      Rows floats;
      Rows bytes;
      try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
        floats = epoch(p, epoch, false);
      }
      try (InputPipeline p = InputPipeline.create(bytesPlan, o, 0, 1, TestData.CONF)) {
        bytes = epoch(p, epoch, true);
      }
      assertThat(bytes.rows.keySet()).hasSize(N).isEqualTo(floats.rows.keySet());
      if (ordered) {
        assertThat(bytes.order).isEqualTo(floats.order);
      }
      for (long id : floats.rows.keySet()) {
        assertThat(bytes.rows.get(id))
            .as("epoch %d, example %d", epoch, id)
            .containsExactly(floats.rows.get(id));
      }
    }
  }

  private static PipelineOptions.Builder options() {
    return PipelineOptions.builder().optBatchSize(8).optDropRemainder(false).optSeed(5);
  }

  @Test
  void parquetImagesStayBytes() throws IOException {
    assertSameOnBothPaths(spec(true), options().optShuffleBuffer(16).build(), true);
  }

  @Test
  void throughTheShuffleBuffer() throws IOException {
    assertSameOnBothPaths(options().optShuffleBuffer(16).build(), true);
  }

  @Test
  void decodedStraightIntoTheBatch() throws IOException {
    PipelineOptions o = options().optShuffleBuffer(0).build();
    try (InputPipeline p =
        InputPipeline.create(
            DatasetPlanner.plan(spec(), o, TestData.CONF).withImageBytes(),
            o,
            0,
            1,
            TestData.CONF)) {
      assertThat(p.decodesInBatch()).isTrue();
    }
    assertSameOnBothPaths(o, true);
  }

  @Test
  void unorderedAndPlannedReaders() throws IOException {
    assertSameOnBothPaths(options().optShuffleBuffer(0).optDeterministic(false).build(), false);
    assertSameOnBothPaths(
        options().optShuffleBuffer(16).optShufflePath(PipelineOptions.ShufflePath.PLANNED).build(),
        true);
  }

  @Test
  void randomResizedCropDrawsTheSameBoxes() throws IOException {
    assertSameOnBothPaths(
        options()
            .optShuffleBuffer(16)
            .optImageResize(ImageResize.randomResizedCrop(0.3, 1, 0.75, 4.0 / 3))
            .build(),
        true);
  }

  /** The cache holds one byte per value too, and the second epoch reads it back exactly. */
  @Test
  void theCacheKeepsBytes(@TempDir Path cache) throws IOException {
    PipelineOptions o = options().optShuffleBuffer(16).optCacheDir(cache.toString()).build();
    assertSameOnBothPaths(o, true);
    long bytesFiles = 0;
    long floatFiles = 0;
    try (Stream<Path> files = Files.walk(cache)) {
      for (Path f : files.filter(Files::isRegularFile).toList()) {
        // magic + slots per record, then per record its slots and the label (a double)
        long perRecord = (Files.size(f) - 8) / (N / 2);
        if (perRecord == 4L * SLOTS + 8) {
          bytesFiles++;
        } else if (perRecord == 4L * VALUES + 8) {
          floatFiles++;
        }
      }
    }
    assertThat(bytesFiles).as("cache files of records with bytes").isEqualTo(2);
    assertThat(floatFiles).as("cache files of records with floats").isEqualTo(2);
  }

  @Test
  void onlyImageColumnsBecomeBytes() {
    DatasetSpec s =
        DatasetSpec.builder()
            .addPath(dir.toString())
            .addImageFeature("image", H, W, C)
            .addFeature("x", 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build()
            .withImageBytes();
    assertThat(s.features().get(0).bytes()).isTrue();
    assertThat(s.features().get(0).size()).isEqualTo(SLOTS);
    assertThat(s.features().get(0).values()).isEqualTo(VALUES);
    assertThat(s.features().get(0).shape()).containsExactly(H, W, C);
    assertThat(s.features().get(1).bytes()).isFalse();
    assertThat(s.featureSize()).isEqualTo(SLOTS + 3);
    assertThat(s.toString()).contains("image bytes");
    assertThat(spec().hasImageBytes()).isFalse();
    assertThat(s.hasImageBytes()).isTrue();
    assertThatThrownBy(() -> s.features().get(1).asBytes())
        .hasMessageContaining("feature 'x' is not an image column");
  }

  /** Images/s and decode time per image are reported for runs with image columns. */
  @Test
  void statsCountImagesAndTheirDecodeTime() throws IOException {
    PipelineOptions o = options().optShuffleBuffer(16).build();
    DatasetPlan plan = DatasetPlanner.plan(spec(), o, TestData.CONF).withImageBytes();
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      epoch(p, 0, true);
      PipelineStats s = p.stats();
      assertThat(s.records()).isEqualTo(N);
      assertThat(s.images()).isEqualTo(N);
      assertThat(s.decodedImages()).isEqualTo(N);
      assertThat(s.decodeMillisPerImage()).isPositive().isFinite();
      assertThat(s.imagesPerSecond()).isPositive().isFinite();
      assertThat(s.toString()).contains("images/s", "ms/image");
    }
  }
}
