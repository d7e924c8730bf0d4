package dev.sparktrainer.device;

import static org.assertj.core.api.Assertions.assertThat;

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
 * Photos of many sizes (JPEG and PNG) through random-resized-crop with the other built-in steps:
 * the same seed gives the same tensors, bit for bit, whether the images cross to the device as
 * bytes (the crop done while decoding, flips and crops on the device) or as float32 (everything on
 * the host); and different boxes for different examples and epochs.
 */
class DeviceImagesResizeTest {
  private static final int H = 12;
  private static final int W = 10;
  private static final int N = 30;
  @TempDir static Path dir;

  @BeforeAll
  static void write() throws IOException {
    Random r = new Random(33);
    try (OutputStream os = Files.newOutputStream(dir.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int id = 0; id < N; id++) {
        int h = 8 + r.nextInt(40);
        int wd = 8 + r.nextInt(40);
        BufferedImage img = new BufferedImage(wd, h, BufferedImage.TYPE_INT_RGB);
        for (int y = 0; y < h; y++) {
          for (int x = 0; x < wd; x++) {
            img.setRGB(x, y, (x * 255 / wd) << 16 | (y * 255 / h) << 8 | r.nextInt(256));
          }
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ImageIO.write(img, id % 2 == 0 ? "jpeg" : "png", out);
        Map<String, Feature> m = new LinkedHashMap<>();
        m.put("image", Feature.ofBytes(out.toByteArray()));
        m.put("label", Feature.ofInt64(id));
        w.write(Examples.encodeExample(m));
      }
    }
  }

  private static List<float[]> run(ImageTransfer t, ExampleTransform map, int epoch, long seed) {
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(dir.toString())
            .addImageFeature("image", H, W, 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(7)
            .optDropRemainder(false)
            .optShuffleBuffer(8)
            .optSeed(seed)
            .optTransform(map)
            .optImageTransfer(t)
            .build();
    List<float[]> x = new ArrayList<>();
    try (NDManager m = NDManager.newBaseManager();
        PipelineSource p =
            PipelineSource.create(
                DatasetPlanner.plan(spec, o, TestData.CONF), o, null, 0, 1, m, TestData.CONF)) {
      assertThat(p.images().active()).isEqualTo(t == ImageTransfer.UINT8);
      Iterator<Batch> it = p.epoch(epoch, 0);
      while (it.hasNext()) {
        try (Batch b = it.next()) {
          x.add(b.features().head().toFloatArray());
        }
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return x;
  }

  @Test
  void randomResizedCropIsTheSameOnBothPaths() {
    for (String augment :
        List.of(
            "random-resized-crop",
            "random-resized-crop,flip",
            "random-resized-crop:0.3-1,1/2-2,flip,crop:2,normalize:0.5,0.4,0.3/0.2,0.25,0.3")) {
      ExampleTransform map = ImageAugment.parse(augment, Layout.HWC).training();
      List<float[]> first = null;
      for (int epoch = 0; epoch < 2; epoch++) {
        List<float[]> host = run(ImageTransfer.FLOAT32, map, epoch, 7);
        List<float[]> device = run(ImageTransfer.UINT8, map, epoch, 7);
        assertThat(host).hasSize(5);
        for (int b = 0; b < host.size(); b++) {
          assertThat(device.get(b))
              .as("%s, epoch %d, batch %d", augment, epoch, b)
              .containsExactly(host.get(b));
        }
        if (epoch == 0) {
          first = host;
        } else {
          assertThat(host.get(0)).as("another epoch, other boxes").isNotEqualTo(first.get(0));
        }
      }
      assertThat(run(ImageTransfer.FLOAT32, map, 0, 8).get(0))
          .as("another seed, other boxes")
          .isNotEqualTo(first.get(0));
    }
  }
}
