package dev.sparktrainer.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.ImageAugment.Layout;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.PipelineOptions.ImageTransfer;
import dev.sparktrainer.data.TestData;
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
    return run(spec(), t, map, epoch, active);
  }

  private static Epoch run(
      DatasetSpec spec, ImageTransfer t, ExampleTransform map, int epoch, boolean[] active) {
    long[] shape = spec.features().get(0).shape();
    PipelineOptions o = options(t, map);
    List<float[]> x = new ArrayList<>();
    List<long[]> y = new ArrayList<>();
    List<Long> up = new ArrayList<>();
    try (NDManager m = NDManager.newBaseManager();
        PipelineSource p =
            PipelineSource.create(
                DatasetPlanner.plan(spec, o, TestData.CONF), o, null, 0, 1, m, TestData.CONF)) {
      active[0] = p.images().active();
      Iterator<Batch> it = p.epoch(epoch, 0);
      while (it.hasNext()) {
        try (Batch b = it.next()) {
          assertThat(b.features().head().getDataType().name()).isEqualTo("FLOAT32");
          assertThat(b.features().head().getShape().getShape())
              .containsExactly(b.size(), shape[0], shape[1], shape[2]);
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

  /**
   * One-channel columns decoded from PNGs that are not 8-bit grey (colour, palette, grey with
   * alpha, 16-bit grey): the grey they are read to is a byte on both paths, so uint8 transfer gives
   * the float32 path's tensors bit for bit.
   */
  @Test
  void aOneChannelColumnFromAnyPngIsTheSameOnBothPaths(@TempDir Path grey) throws IOException {
    Random r = new Random(5);
    String[] kinds = {"rgb", "palette", "grey-alpha", "grey16"};
    int n = 0;
    try (OutputStream os = Files.newOutputStream(grey.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int rep = 0; rep < 3; rep++) {
        for (String kind : kinds) {
          BufferedImage img = image(kind, r);
          ByteArrayOutputStream png = new ByteArrayOutputStream();
          assertThat(ImageIO.write(img, "png", png)).as(kind).isTrue();
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("image", Feature.ofBytes(png.toByteArray()));
          m.put("label", Feature.ofInt64(n++));
          w.write(Examples.encodeExample(m));
        }
      }
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(grey.toString())
            .addImageFeature("image", H, W, 1)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    boolean[] hostActive = new boolean[1];
    boolean[] deviceActive = new boolean[1];
    Epoch host = run(spec, ImageTransfer.FLOAT32, null, 0, hostActive);
    Epoch device = run(spec, ImageTransfer.UINT8, null, 0, deviceActive);
    assertThat(deviceActive[0]).isTrue();
    assertThat(device.labels.stream().mapToInt(l -> l.length).sum()).isEqualTo(n);
    for (int b = 0; b < host.features.size(); b++) {
      assertThat(device.labels.get(b)).isEqualTo(host.labels.get(b));
      float[] h = host.features.get(b);
      float[] d = device.features.get(b);
      for (int i = 0; i < h.length; i++) {
        assertThat(Float.floatToRawIntBits(d[i]))
            .as(
                "batch %d, value %d (label %d): uint8 %s, float32 %s",
                b, i, host.labels.get(b)[i / (H * W)], d[i], h[i])
            .isEqualTo(Float.floatToRawIntBits(h[i]));
      }
    }
  }

  /**
   * A CMYK JPEG as Photoshop writes them (an Adobe marker and an ICC profile), which ImageIO
   * refuses: the error names the file, the record's offset, the feature and what to do.
   */
  @Test
  void aCmykJpegFailsNamingTheRecordAndWhy(@TempDir Path cmyk) throws Exception {
    java.awt.image.WritableRaster raster =
        java.awt.image.Raster.createInterleavedRaster(
            java.awt.image.DataBuffer.TYPE_BYTE, W, H, 4, null);
    for (int y = 0; y < H; y++) {
      for (int x = 0; x < W; x++) {
        for (int b = 0; b < 4; b++) {
          raster.setSample(x, y, b, (x * 40 + y * 20 + b * 30) % 256);
        }
      }
    }
    ByteArrayOutputStream jpeg = new ByteArrayOutputStream();
    javax.imageio.ImageWriter writer = ImageIO.getImageWritersByFormatName("jpeg").next();
    try (javax.imageio.stream.ImageOutputStream os = ImageIO.createImageOutputStream(jpeg)) {
      writer.setOutput(os);
      writer.write(null, new javax.imageio.IIOImage(raster, null, null), null);
    } finally {
      writer.dispose();
    }
    byte[] plain = jpeg.toByteArray();
    // After SOI: an Adobe APP14 segment (transform 2: YCCK) and an APP2 ICC profile.
    ByteArrayOutputStream marked = new ByteArrayOutputStream();
    marked.write(plain, 0, 2);
    marked.write(new byte[] {(byte) 0xFF, (byte) 0xEE, 0, 14});
    marked.write("Adobe".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
    marked.write(new byte[] {0, 100, 0, 0, 0, 0, 2});
    byte[] icc =
        java.awt.color.ICC_Profile.getInstance(java.awt.color.ColorSpace.CS_sRGB).getData();
    int len = 2 + 12 + 2 + icc.length;
    marked.write(new byte[] {(byte) 0xFF, (byte) 0xE2, (byte) (len >> 8), (byte) len});
    marked.write("ICC_PROFILE\0".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
    marked.write(new byte[] {1, 1});
    marked.write(icc);
    marked.write(plain, 2, plain.length - 2);
    assertThatThrownBy(() -> ImageIO.read(new java.io.ByteArrayInputStream(marked.toByteArray())))
        .as("this Java's ImageIO refuses it")
        .isInstanceOf(javax.imageio.IIOException.class);

    Path file = cmyk.resolve("part-0.tfrecord");
    try (OutputStream os = Files.newOutputStream(file);
        TFRecordWriter w = new TFRecordWriter(os)) {
      Map<String, Feature> m = new LinkedHashMap<>();
      m.put("image", Feature.ofBytes(marked.toByteArray()));
      m.put("label", Feature.ofInt64(0));
      w.write(Examples.encodeExample(m));
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(cmyk.toString())
            .addImageFeature("image", H, W, 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    assertThatThrownBy(() -> run(spec, ImageTransfer.FLOAT32, null, 0, new boolean[1]))
        .hasMessageContaining("part-0.tfrecord")
        .hasMessageContaining("byte offset 0")
        .hasMessageContaining(
            "feature 'image': a CMYK JPEG (4 colour components), which ImageIO cannot decode"
                + " (Unsupported Image Type): write the images as RGB or grey (JPEG or PNG)");
  }

  /** A random image of {@code kind}, as ImageIO writes it to a PNG of that colour type. */
  private static BufferedImage image(String kind, Random r) {
    switch (kind) {
      case "rgb":
        {
          BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
          for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
              img.setRGB(x, y, r.nextInt(1 << 24));
            }
          }
          return img;
        }
      case "palette":
        {
          BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_BYTE_INDEXED);
          for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
              img.getRaster().setSample(x, y, 0, r.nextInt(256));
            }
          }
          return img;
        }
      case "grey-alpha":
        {
          java.awt.image.ComponentColorModel cm =
              new java.awt.image.ComponentColorModel(
                  java.awt.color.ColorSpace.getInstance(java.awt.color.ColorSpace.CS_GRAY),
                  true,
                  false,
                  java.awt.Transparency.TRANSLUCENT,
                  java.awt.image.DataBuffer.TYPE_BYTE);
          BufferedImage img =
              new BufferedImage(cm, cm.createCompatibleWritableRaster(W, H), false, null);
          for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
              img.getRaster().setSample(x, y, 0, r.nextInt(256));
              img.getRaster().setSample(x, y, 1, 255);
            }
          }
          return img;
        }
      default:
        {
          BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_USHORT_GRAY);
          for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
              img.getRaster().setSample(x, y, 0, r.nextInt(1 << 16));
            }
          }
          return img;
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
