package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.ImageAugment.Layout;
import dev.sparktrainer.data.PipelineOptions.ImageTransfer;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Image transfer uint8 against float32 through the real pipeline (PNG TFRecords, shuffle buffer,
 * the built-in augmentation): the same seed gives bit-identical tensors on both paths, with the
 * uint8 batch crossing at one byte per pixel.
 */
class DeviceImagesTest {
  private static final int H = 6;
  private static final int W = 7;
  private static final int C = 3;
  private static final int N = 40;
  @TempDir static Path dir;

  @BeforeAll
  static void write() throws IOException {
    Random r = new Random(11);
    for (int f = 0; f < 2; f++) {
      try (OutputStream os = Files.newOutputStream(dir.resolve("part-" + f + ".tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int id = 0; id < N / 2; id++) {
          BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
          for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
              img.setRGB(x, y, r.nextInt(1 << 24));
            }
          }
          ByteArrayOutputStream png = new ByteArrayOutputStream();
          ImageIO.write(img, "png", png);
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("image", Feature.ofBytes(png.toByteArray()));
          m.put("label", Feature.ofInt64(f * N + id));
          w.write(Examples.encodeExample(m));
        }
      }
    }
  }

  private static DatasetSpec spec() {
    return DatasetSpec.builder()
        .addPath(dir.toString())
        .addImageFeature("image", H, W, C)
        .setLabel("label", DatasetSpec.LabelType.INT)
        .build();
  }

  private static PipelineOptions options(ImageTransfer t, ExampleTransform map) {
    return PipelineOptions.builder()
        .optBatchSize(6) // 40 records: 6 full batches and a partial one
        .optDropRemainder(false)
        .optShuffleBuffer(16)
        .optSeed(7)
        .optTransform(map)
        .optImageTransfer(t)
        .build();
  }

  /** Every batch of epoch {@code epoch}: features (float32, as the model gets them) and labels. */
  private record Epoch(List<float[]> features, List<long[]> labels, List<Long> uploads) {}

  private static Epoch run(ImageTransfer t, ExampleTransform map, int epoch, boolean[] active) {
    DatasetSpec spec = spec();
    PipelineOptions o = options(t, map);
    List<float[]> x = new ArrayList<>();
    List<long[]> y = new ArrayList<>();
    List<Long> up = new ArrayList<>();
    try (NDManager m = NDManager.newBaseManager();
        InputPipeline p =
            InputPipeline.create(
                DatasetPlanner.plan(spec, o, TestData.CONF), o, 0, 1, m, TestData.CONF)) {
      active[0] = p.images().active();
      Iterator<Batch> it = p.epoch(epoch, 0);
      while (it.hasNext()) {
        try (Batch b = it.next()) {
          assertThat(b.features().head().getDataType().name()).isEqualTo("FLOAT32");
          assertThat(b.features().head().getShape().getShape()).containsExactly(b.size(), H, W, C);
          x.add(b.features().head().toFloatArray());
          y.add(b.labels().toLongArray());
          up.add(b.uploadBytes());
        }
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return new Epoch(x, y, up);
  }

  private static void assertSameTensors(String augment) {
    ExampleTransform map =
        augment == null ? null : ImageAugment.parse(augment, Layout.HWC).training();
    boolean[] hostActive = new boolean[1];
    boolean[] deviceActive = new boolean[1];
    for (int epoch = 0; epoch < 2; epoch++) {
      Epoch host = run(ImageTransfer.FLOAT32, map, epoch, hostActive);
      Epoch device = run(ImageTransfer.UINT8, map, epoch, deviceActive);
      assertThat(hostActive[0]).isFalse();
      assertThat(deviceActive[0]).as("uint8 path taken for " + augment).isTrue();
      assertThat(device.labels).hasSize(7);
      for (int b = 0; b < host.features.size(); b++) {
        assertThat(device.labels.get(b)).isEqualTo(host.labels.get(b));
        assertThat(device.features.get(b))
            .as("%s, epoch %d, batch %d", augment, epoch, b)
            .containsExactly(host.features.get(b));
        // one byte per pixel crosses, against four; the labels (int64) are the same 8 bytes each
        long rows = host.labels.get(b).length;
        assertThat(device.uploads.get(b)).isEqualTo(rows * H * W * C + 8 * rows);
        assertThat(host.uploads.get(b)).isEqualTo(4 * rows * H * W * C + 8 * rows);
      }
    }
  }

  @Test
  void scalingAloneGivesTheHostsValues() {
    assertSameTensors(null);
  }

  @Test
  void flipOnTheDeviceIsTheHostsFlip() {
    assertSameTensors("flip");
    // and it did flip something: the augmented epoch differs from the plain one
    boolean[] a = new boolean[1];
    Epoch plain = run(ImageTransfer.UINT8, null, 0, a);
    Epoch flipped =
        run(ImageTransfer.UINT8, ImageAugment.parse("flip", Layout.HWC).training(), 0, a);
    assertThat(flipped.features.get(0)).isNotEqualTo(plain.features.get(0));
  }

  @Test
  void cropOnTheDeviceIsTheHostsCrop() {
    assertSameTensors("crop:2");
    boolean[] a = new boolean[1];
    Epoch plain = run(ImageTransfer.UINT8, null, 0, a);
    Epoch cropped =
        run(ImageTransfer.UINT8, ImageAugment.parse("crop:2", Layout.HWC).training(), 0, a);
    assertThat(cropped.features.get(0)).isNotEqualTo(plain.features.get(0));
  }

  @Test
  void normalizeOnTheDeviceIsTheHostsNormalize() {
    assertSameTensors("normalize:0.485,0.456,0.406/0.229,0.224,0.225");
    assertSameTensors("normalize:0.5/0.3");
  }

  @Test
  void stepsInAnyOrderMatchTheHost() {
    // crop after normalize pads with normalized zeros, before it with black: both as the host
    assertSameTensors("flip,crop:3,normalize:0.485,0.456,0.406/0.229,0.224,0.225");
    assertSameTensors("normalize:0.5/0.25,crop:1,flip");
  }

  @Test
  void aUsersMapKeepsFloat32() {
    ExampleTransform user = ex -> ex.set(0, 0, 1f);
    DeviceImages plan = DeviceImages.plan(spec(), options(ImageTransfer.UINT8, user), null, true);
    assertThat(plan.active()).isFalse();
    assertThat(plan.reason()).contains("user's map");
    // composing the built-in augmentation with a user's map is a user's map too
    ExampleTransform both = ImageAugment.parse("flip", Layout.HWC).training().andThen(user);
    assertThat(DeviceImages.plan(spec(), options(ImageTransfer.UINT8, both), null, true).active())
        .isFalse();
  }

  @Test
  void autoIsUint8OnAGpuAndFloat32OnACpu() {
    assertThat(DeviceImages.plan(spec(), options(ImageTransfer.AUTO, null), null, true).active())
        .isTrue();
    DeviceImages cpu = DeviceImages.plan(spec(), options(ImageTransfer.AUTO, null), null, false);
    assertThat(cpu.active()).isFalse();
    assertThat(cpu.reason()).isEqualTo("image transfer float32");
    assertThat(PipelineOptions.builder().build().imageTransfer()).isEqualTo(ImageTransfer.AUTO);
  }

  @Test
  void badValuesNameTheOptionAndItsValues() {
    assertThatThrownBy(() -> PipelineOptions.builder().optImageTransfer("int8"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "Invalid image transfer 'int8' (--image-transfer): expected uint8, float32 or auto");
    assertThat(ImageTransfer.parse(" UInt8 ")).isEqualTo(ImageTransfer.UINT8);
  }

  @Test
  void everyByteRoundTrips() {
    java.nio.FloatBuffer f = java.nio.FloatBuffer.allocate(256);
    for (int k = 0; k < 256; k++) {
      f.put(k, k / 255f);
    }
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocateDirect(256);
    DeviceImages.pack(f, 256, b);
    for (int k = 0; k < 256; k++) {
      assertThat(b.get(k) & 0xFF).isEqualTo(k);
    }
  }
}
