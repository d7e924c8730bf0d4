package dev.sparktrainer.data;

import static dev.sparktrainer.data.ImageResizeTest.meanAbsDiff;
import static dev.sparktrainer.data.ImageResizeTest.resource;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Photos as people have them: grey, grey with alpha, RGBA, palette, 16-bit, EXIF-rotated and CMYK
 * files (made with PIL by {@code images/make_fixtures.py}), decoded to RGB as PIL's {@code
 * convert("RGB")} (after {@code ImageOps.exif_transpose}) does, or refused naming what they are;
 * and through the pipeline: photos of several sizes in one TFRecord file, a corrupt one named with
 * its file and record.
 */
class ImageFormatsTest {
  @TempDir Path dir;

  private static byte[] rgb(String file, int h, int w) throws IOException {
    byte[] b = resource(file);
    return new Images(null).decodeBytes(b, 0, b.length, h, w, 3).clone();
  }

  @Test
  void losslessKindsDecodeToPilsRgbExactly() throws IOException {
    for (String name : List.of("grey", "grey_alpha", "rgba", "palette", "grey16")) {
      assertThat(rgb(name + ".png", 9, 13))
          .as(name + ".png")
          .isEqualTo(resource(name + ".rgb.raw"));
    }
  }

  @Test
  void oneChannelFromColourIsTheRoundedWeightedGrey() throws IOException {
    byte[] png = resource("rgba.png");
    byte[] grey = new Images(null).decodeBytes(png, 0, png.length, 9, 13, 1).clone();
    byte[] colour = resource("rgba.rgb.raw");
    for (int i = 0; i < grey.length; i++) {
      int r = colour[3 * i] & 0xFF;
      int g = colour[3 * i + 1] & 0xFF;
      int b = colour[3 * i + 2] & 0xFF;
      assertThat(grey[i] & 0xFF).isEqualTo(Math.round(0.299f * r + 0.587f * g + 0.114f * b));
    }
  }

  @Test
  void exifOrientationIsApplied() throws IOException {
    for (int o : new int[] {3, 6, 8}) {
      boolean swapped = o >= 5;
      int h = swapped ? 13 : 9;
      int w = swapped ? 9 : 13;
      assertThat(Images.exifOrientation(resource("exif" + o + ".jpg"), 0, 1000)).isEqualTo(o);
      byte[] got = rgb("exif" + o + ".jpg", h, w);
      byte[] pil = resource("exif" + o + ".rgb.raw");
      // ImageIO's and libjpeg's IDCT and upsampling differ by a unit here and there
      assertThat(meanAbsDiff(got, pil, got.length)).as("orientation " + o).isLessThan(2 / 255.0);
      if (!swapped) {
        // the same image left as stored is far from PIL's upright one: the test can fail
        byte[] stored = unturned("exif" + o + ".jpg");
        assertThat(meanAbsDiff(stored, pil, got.length)).isGreaterThan(10 / 255.0);
      }
    }
    assertThat(Images.exifOrientation(resource("src.jpg"), 0, resource("src.jpg").length))
        .isEqualTo(1);
  }

  @Test
  void randomResizedCropTakesItsBoxFromTheUprightPhoto() throws IOException {
    byte[] file = resource("exif6.jpg");
    byte[] upright = rgb("exif6.jpg", 13, 9); // orientation 6: 9x13 stored, 13x9 upright
    // narrow boxes: some of the full height but not the full width
    ImageResize rrc = ImageResize.randomResizedCrop(0.3, 1, 0.3, 1);
    int[] box = new int[8];
    int fullHeight = 0;
    for (long seed = 0; seed < 300; seed++) {
      Images images = new Images(rrc);
      images.seed(seed);
      byte[] got = images.decodeBytes(file, 0, file.length, 13, 9, 3).clone();
      ExampleRandom r = new ExampleRandom();
      r.reset(seed);
      rrc.box(13, 9, 13, 9, r, box);
      fullHeight += box[2] == 13 && box[3] < 9 ? 1 : 0;
      byte[] want =
          ImageResizeTest.reference(
              upright, 9, 3, box[0], box[1], box[2], box[3], 13, 9, 0, 0, 13, 9);
      assertThat(got).as("seed %d, box %s", seed, java.util.Arrays.toString(box)).isEqualTo(want);
    }
    assertThat(fullHeight).as("boxes of the full height but not the full width").isPositive();
  }

  /** The JPEG's pixels as stored (orientation ignored), through ImageIO. */
  private static byte[] unturned(String name) throws IOException {
    java.awt.image.BufferedImage img =
        javax.imageio.ImageIO.read(new java.io.ByteArrayInputStream(resource(name)));
    byte[] out = new byte[img.getHeight() * img.getWidth() * 3];
    int i = 0;
    for (int y = 0; y < img.getHeight(); y++) {
      for (int x = 0; x < img.getWidth(); x++) {
        int p = img.getRGB(x, y);
        out[i++] = (byte) (p >> 16);
        out[i++] = (byte) (p >> 8);
        out[i++] = (byte) p;
      }
    }
    return out;
  }

  @Test
  void jpegDecodesCloseToLibjpeg() throws IOException {
    byte[] got = rgb("src.jpg", 61, 83);
    assertThat(meanAbsDiff(got, resource("src.jpg.rgb.raw"), got.length)).isLessThan(2 / 255.0);
  }

  @Test
  void cmykJpegIsRefusedClearly() {
    assertThatThrownBy(() -> rgb("cmyk.jpg", 9, 13))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("CMYK JPEG")
        .hasMessageContaining("write the images as RGB or grey");
  }

  @Test
  void truncatedJpegIsRefused() {
    assertThatThrownBy(() -> rgb("truncated.jpg", 61, 83))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("corrupt or truncated image");
  }

  private Path writeRecords(List<byte[]> images) throws IOException {
    Path file = dir.resolve("photos.tfrecord");
    try (OutputStream os = Files.newOutputStream(file);
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int i = 0; i < images.size(); i++) {
        Map<String, Feature> m = new LinkedHashMap<>();
        m.put("image", Feature.ofBytes(images.get(i)));
        m.put("label", Feature.ofInt64(i));
        w.write(Examples.encodeExample(m));
      }
    }
    return file;
  }

  private static List<float[]> readAll(Path path, int h, int w, PipelineOptions o)
      throws IOException {
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(path.toString())
            .addImageFeature("image", h, w, 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    List<float[]> out = new ArrayList<>();
    try (InputPipeline p =
        InputPipeline.create(DatasetPlanner.plan(spec, o, TestData.CONF), o, 0, 1, TestData.CONF)) {
      Iterator<HostBatch> it = p.epoch(0, 0);
      while (it.hasNext()) {
        HostBatch b = it.next();
        float[] f = new float[b.size() * h * w * 3];
        b.features[0].asFloatBuffer().get(f);
        out.add(f);
        b.release();
      }
    }
    return out;
  }

  @Test
  void photosOfEverySizeComeOutAtTheModelsSize() throws IOException {
    List<byte[]> photos =
        List.of(
            resource("src.png"),
            resource("src.jpg"),
            resource("rgba.png"),
            resource("exif6.jpg"),
            resource("grey16.png"),
            resource("palette.png"));
    Path file = writeRecords(photos);
    PipelineOptions o =
        PipelineOptions.builder().optBatchSize(6).optShuffleBuffer(0).optSeed(3).build();
    List<float[]> batches = readAll(file, 8, 8, o);
    assertThat(batches).hasSize(1);
    // row 0: src.png shorter side to 8 (8x10), the centre 8x8: as Images does it
    byte[] png = resource("src.png");
    byte[] want = new Images(null).decodeBytes(png, 0, png.length, 8, 8, 3);
    for (int i = 0; i < want.length; i++) {
      assertThat(batches.get(0)[i]).isEqualTo((want[i] & 0xFF) / 255f);
    }
    // random-resized-crop: the same seed gives the same batches, another seed others
    PipelineOptions rrc =
        o.toBuilder()
            .optTransform(
                ImageAugment.parse("random-resized-crop,flip", ImageAugment.Layout.HWC).training())
            .build();
    float[] a = readAll(file, 8, 8, rrc).get(0);
    float[] b = readAll(file, 8, 8, rrc).get(0);
    float[] c = readAll(file, 8, 8, rrc.toBuilder().optSeed(4).build()).get(0);
    assertThat(a).isEqualTo(b);
    assertThat(a).isNotEqualTo(c);
    assertThat(a).isNotEqualTo(batches.get(0));
  }

  @Test
  void aCorruptJpegIsNamedWithItsFileAndRecord() throws IOException {
    Path file =
        writeRecords(List.of(resource("src.png"), resource("truncated.jpg"), resource("src.png")));
    PipelineOptions o =
        PipelineOptions.builder().optBatchSize(3).optShuffleBuffer(0).optSeed(3).build();
    assertThatThrownBy(() -> readAll(file, 8, 8, o))
        .hasMessageContaining(file.getFileName().toString())
        .hasMessageContaining("offset")
        .hasMessageContaining("feature 'image'")
        .hasMessageContaining("corrupt or truncated image");
  }

  @Test
  void randomResizedCropRefusesTheCache() {
    Path file = dir.resolve("x.tfrecord");
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(1)
            .optCacheDir(dir.resolve("cache").toString())
            .optTransform(
                ImageAugment.parse("random-resized-crop", ImageAugment.Layout.HWC).training())
            .build();
    assertThatThrownBy(
            () -> {
              writeRecords(List.of(resource("src.png")));
              readAll(file.resolveSibling("photos.tfrecord"), 8, 8, o);
            })
        .hasMessageContaining("random-resized-crop cannot be used with cacheDir");
  }
}
