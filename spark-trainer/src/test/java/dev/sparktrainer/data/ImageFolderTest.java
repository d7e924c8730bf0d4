package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import javax.imageio.ImageIO;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A folder of photos, one subfolder per class, through Spark's binaryFile source: labels are the
 * class folders' indices in sorted order, files at any depth under a class, other files ignored;
 * then staged and read by the pipeline at the model's size whatever the photos' sizes.
 */
class ImageFolderTest {
  @TempDir static Path dir;
  private static SparkSession spark;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("image-folder-test")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate();
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  private static void photo(Path file, int h, int w, int rgb, String format) throws IOException {
    Files.createDirectories(file.getParent());
    BufferedImage img = new BufferedImage(w, h, BufferedImage.TYPE_INT_RGB);
    for (int y = 0; y < h; y++) {
      for (int x = 0; x < w; x++) {
        img.setRGB(x, y, rgb);
      }
    }
    assertThat(ImageIO.write(img, format, file.toFile())).isTrue();
  }

  @Test
  void labelsAreTheSortedClassFolders() throws IOException {
    Path root = dir.resolve("photos");
    // colour by class: red cats, green dogs, blue zebras; sizes all different
    photo(root.resolve("dog/a.png"), 20, 30, 0x00FF00, "png");
    photo(root.resolve("dog/deeper/b.JPG"), 31, 17, 0x00FF00, "jpeg");
    photo(root.resolve("cat/c.jpg"), 12, 12, 0xFF0000, "jpeg");
    photo(root.resolve("cat/d.png"), 9, 40, 0xFF0000, "png");
    photo(root.resolve("zebra/e.png"), 50, 8, 0x0000FF, "png");
    Files.writeString(root.resolve("cat/notes.txt"), "not an image");
    Files.writeString(root.resolve("stray.png"), "a file outside any class");
    photo(root.resolve(".hidden/f.png"), 8, 8, 0, "png");

    ImageFolder folder = ImageFolder.read(spark, root.toString());
    assertThat(folder.classes()).containsExactly("cat", "dog", "zebra");
    Map<Long, Integer> counts = new TreeMap<>();
    for (Row r : folder.frame().collectAsList()) {
      counts.merge(r.getLong(1), 1, Integer::sum);
    }
    assertThat(counts).containsExactly(Map.entry(0L, 2), Map.entry(1L, 2), Map.entry(2L, 1));

    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath("unused")
            .addImageFeature("image", 8, 8, 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(5)
            .optShuffleBuffer(0)
            .optTransform(
                ImageAugment.parse("random-resized-crop,flip", ImageAugment.Layout.HWC).training())
            .build();
    try (DataFrameInput in =
        DataFrameInput.of(folder.frame(), spec, dir.resolve("staging").toString())) {
      List<Long> labels = new ArrayList<>();
      try (InputPipeline p =
          InputPipeline.create(
              DatasetPlanner.plan(in.spec(), o, TestData.CONF), o, 0, 1, TestData.CONF)) {
        Iterator<HostBatch> it = p.epoch(0, 0);
        while (it.hasNext()) {
          HostBatch b = it.next();
          for (int i = 0; i < b.size(); i++) {
            long label = (long) b.labels[i];
            labels.add(label);
            // a flat colour survives any crop and resize: its class's
            int channel = (int) label; // 0: red, 1: green, 2: blue
            for (int k = 0; k < 3; k++) {
              float v = b.feature(0, i * 8 * 8 * 3 + 5 * 3 + k);
              assertThat(v)
                  .as("class %d, channel %d", label, k)
                  .isBetween(k == channel ? 0.9f : 0f, k == channel ? 1f : 0.1f);
            }
          }
          b.release();
        }
      }
      assertThat(labels).containsExactlyInAnyOrder(0L, 0L, 1L, 1L, 2L);
    }
  }

  @Test
  void aFolderWithoutClassesIsRefused() throws IOException {
    Path flat = dir.resolve("flat");
    photo(flat.resolve("a.png"), 4, 4, 0, "png");
    assertThatThrownBy(() -> ImageFolder.read(spark, flat.toString()))
        .hasMessageContaining("has no class folders");
    assertThatThrownBy(() -> ImageFolder.read(spark, dir.resolve("missing").toString()))
        .hasMessageContaining("does not exist");
  }
}
