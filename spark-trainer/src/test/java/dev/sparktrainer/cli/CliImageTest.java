package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import javax.imageio.ImageIO;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Photos of any size through the command line: a folder of JPEG and PNG files, one subfolder per
 * class ({@code --format images}), trained with random-resized-crop and flips, then evaluated and
 * predicted with the recorded resize and class names, also from a TFRecord column of the same
 * photos; and the bad inputs of image flags and files.
 */
class CliImageTest {
  private static SparkSession spark;
  @TempDir static Path tmp;

  @BeforeAll
  static void start() throws IOException {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("cli-image-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    Random r = new Random(5);
    folder(tmp.resolve("train"), 10, r);
    folder(tmp.resolve("val"), 4, r);
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  /** {@code n} photos per class: reddish cats, bluish dogs, sizes all different, JPEG and PNG. */
  private static void folder(Path root, int n, Random r) throws IOException {
    for (String cls : List.of("cat", "dog")) {
      for (int i = 0; i < n; i++) {
        int h = 12 + r.nextInt(30);
        int w = 12 + r.nextInt(30);
        BufferedImage img = new BufferedImage(w, h, BufferedImage.TYPE_INT_RGB);
        for (int y = 0; y < h; y++) {
          for (int x = 0; x < w; x++) {
            int noise = r.nextInt(60);
            img.setRGB(
                x,
                y,
                cls.equals("cat") ? (195 + noise) << 16 | noise << 8 : noise << 8 | 195 + noise);
          }
        }
        String format = i % 2 == 0 ? "png" : "jpeg";
        Path file = root.resolve(cls).resolve("p" + i + (format.equals("png") ? ".png" : ".jpg"));
        Files.createDirectories(file.getParent());
        assertThat(ImageIO.write(img, format, file.toFile())).isTrue();
      }
    }
  }

  private static String[] train(String data, String out, String... extra) {
    String[] base = {
      "train",
      "--data",
      data,
      "--format",
      "images",
      "--model",
      "cnn:8",
      "--workers",
      "1",
      "--batch-size",
      "8",
      "--epochs",
      "2",
      "--learning-rate",
      "0.01",
      "--progress",
      "none",
      "--output",
      tmp.resolve(out).toString()
    };
    String[] all = new String[base.length + extra.length];
    System.arraycopy(base, 0, all, 0, base.length);
    System.arraycopy(extra, 0, all, base.length, extra.length);
    return all;
  }

  @Test
  void aFolderOfPhotosTrainsThenEvaluatesAndPredictsWithClassNames() throws IOException {
    CliRunner t =
        CliRunner.run(
            train(
                tmp.resolve("train").toString(),
                "run",
                "--validation-data",
                tmp.resolve("val").toString(),
                "--image-size",
                "16x16",
                "--augment",
                "random-resized-crop:0.5-1,flip,normalize:0.5/0.25",
                // bytes to the device, flipped and normalized there (a CPU here)
                "--image-transfer",
                "uint8"));
    assertThat(t.code()).as(t.err()).isZero();
    assertThat(t.err())
        .contains("Image folder " + tmp.resolve("train") + ": 2 classes (cat, dog)")
        .contains("image transfer uint8");
    Path model = tmp.resolve("run/model");
    assertThat(Files.readAllLines(model.resolve("classes.txt"))).containsExactly("cat", "dog");
    String inputs = Files.readString(model.resolve("inputs.properties"));
    // 16 / 0.875 = 18.3: the shorter side to 18, then the centre 16x16
    assertThat(inputs).contains("resize=shorter\\:18").contains("features=image\\:16x16x3\\:image");
    assertThat(Files.readString(model.resolve("model.properties"))).contains("inputLayout=hwc");

    CliRunner p =
        CliRunner.run(
            "predict",
            "--model",
            model.toString(),
            "--data",
            tmp.resolve("val").toString(),
            "--format",
            "images",
            "--output",
            tmp.resolve("pred").toString());
    assertThat(p.code()).as(p.err()).isZero();
    List<Row> rows = spark.read().parquet(tmp.resolve("pred").toString()).collectAsList();
    assertThat(rows).hasSize(8);
    assertThat(rows.get(0).schema().fieldNames())
        .containsExactly("label", "path", "prediction", "class", "probability");
    long right = 0;
    for (Row r : rows) {
      int predicted = (int) r.getDouble(2);
      assertThat(r.getString(3)).isEqualTo(List.of("cat", "dog").get(predicted));
      assertThat(r.getString(1)).contains("/val/" + (r.getLong(0) == 0 ? "cat" : "dog") + "/");
      right += predicted == r.getLong(0) ? 1 : 0;
    }

    // The same photos in one folder without class folders: unlabelled, the same predictions.
    Path loose = tmp.resolve("loose");
    Files.createDirectories(loose);
    java.util.Map<String, Row> loosePrediction = new java.util.HashMap<>();
    for (Row r : rows) {
      Path photo = Path.of(java.net.URI.create(r.getString(1)));
      String name = photo.getParent().getFileName() + "-" + photo.getFileName();
      Files.copy(photo, loose.resolve(name));
      loosePrediction.put(name, r);
    }
    CliRunner lp =
        CliRunner.run(
            "predict",
            "--model",
            model.toString(),
            "--data",
            loose.toString(),
            "--format",
            "images",
            "--output",
            tmp.resolve("pred-loose").toString());
    assertThat(lp.code()).as(lp.err()).isZero();
    List<Row> looseRows =
        spark.read().parquet(tmp.resolve("pred-loose").toString()).collectAsList();
    assertThat(looseRows).hasSize(8);
    for (Row r : looseRows) {
      assertThat(r.isNullAt(0)).as("no label").isTrue();
      String name = Path.of(java.net.URI.create(r.getString(1))).getFileName().toString();
      assertSamePrediction(name, loosePrediction.get(name), r);
    }

    CliRunner e =
        CliRunner.run(
            "evaluate",
            "--model",
            model.toString(),
            "--data",
            tmp.resolve("val").toString(),
            "--format",
            "images");
    assertThat(e.code()).as(e.err()).isZero();
    JsonNode json = new ObjectMapper().readTree(e.out());
    assertThat(json.get("count").asLong()).isEqualTo(8);
    // evaluate and predict see the same decoded, resized and centre-cropped photos
    assertThat(json.get("accuracy").asDouble())
        .isCloseTo(right / 8.0, org.assertj.core.api.Assertions.within(1e-9));

    // Another set of class folders means other labels: evaluate refuses it.
    Path zebras = tmp.resolve("zebras");
    Files.createDirectories(zebras.resolve("cat"));
    Files.createDirectories(zebras.resolve("zebra"));
    Files.copy(tmp.resolve("val/cat/p0.png"), zebras.resolve("cat/a.png"));
    Files.copy(tmp.resolve("val/dog/p0.png"), zebras.resolve("zebra/b.png"));
    assertUsageError(
        CliRunner.run(
            "evaluate",
            "--model",
            model.toString(),
            "--data",
            zebras.toString(),
            "--format",
            "images"),
        "The class folders of "
            + zebras
            + " (--data) are [cat, zebra] but the model at "
            + model
            + " was trained on [cat, dog]: expected the same classes");
    assertUsageError(
        CliRunner.run(
            "predict",
            "--model",
            model.toString(),
            "--data",
            tmp.resolve("val").toString(),
            "--format",
            "images",
            "--features",
            "pixels",
            "--output",
            tmp.resolve("p2").toString()),
        "Invalid --features [pixels] with --format images: an image folder has one feature"
            + " column, the image (the model's image column: image)");
    assertUsageError(
        CliRunner.run(
            "predict",
            "--model",
            model.toString(),
            "--data",
            tmp.resolve("val").toString(),
            "--format",
            "images",
            "--class-col",
            "label",
            "--output",
            tmp.resolve("p3").toString()),
        "Invalid --class-col 'label': the data already has a column of that name; choose"
            + " another");

    // The same photos as an encoded-image column of TFRecord files (bytes features): decoded the
    // same way, so predicted the same; no folder, so no path and no class column.
    Path records = tmp.resolve("records");
    Files.createDirectories(records);
    java.util.Map<String, Row> byPhoto = new java.util.HashMap<>();
    for (Row r : rows) {
      byPhoto.put(
          Path.of(java.net.URI.create(r.getString(1))).getFileName().toString() + r.getLong(0), r);
    }
    List<Row> expected = new java.util.ArrayList<>();
    try (java.io.OutputStream os = Files.newOutputStream(records.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (String cls : List.of("cat", "dog")) {
        try (var files = Files.list(tmp.resolve("val").resolve(cls))) {
          for (Path photo : files.sorted().toList()) {
            java.util.Map<String, Feature> m = new java.util.LinkedHashMap<>();
            m.put("image", Feature.ofBytes(Files.readAllBytes(photo)));
            m.put("label", Feature.ofInt64(cls.equals("cat") ? 0 : 1));
            w.write(Examples.encodeExample(m));
            expected.add(byPhoto.get(photo.getFileName().toString() + (cls.equals("cat") ? 0 : 1)));
          }
        }
      }
    }
    CliRunner q =
        CliRunner.run(
            "predict",
            "--model",
            model.toString(),
            "--data",
            records.toString(),
            "--output",
            tmp.resolve("pred-records").toString());
    assertThat(q.code()).as(q.err()).isZero();
    List<Row> fromRecords =
        spark.read().parquet(tmp.resolve("pred-records").toString()).collectAsList();
    assertThat(fromRecords.get(0).schema().fieldNames()).doesNotContain("image", "path");
    // one partition, record order: the predictions of the same photos
    assertThat(fromRecords).hasSameSizeAs(expected);
    for (int i = 0; i < expected.size(); i++) {
      assertSamePrediction("record " + i, expected.get(i), fromRecords.get(i));
    }
  }

  /**
   * The same photo predicted in another batch: the same probabilities up to float rounding (the
   * kernels may block another batch size differently), and the same class unless the two top
   * probabilities are within that rounding.
   */
  private static void assertSamePrediction(String what, Row expected, Row actual) {
    double[] p = expected.<org.apache.spark.ml.linalg.Vector>getAs("probability").toArray();
    double[] q = actual.<org.apache.spark.ml.linalg.Vector>getAs("probability").toArray();
    assertThat(q).as(what).containsExactly(p, org.assertj.core.api.Assertions.within(1e-5));
    double[] sorted = p.clone();
    java.util.Arrays.sort(sorted);
    if (sorted[sorted.length - 1] - sorted[sorted.length - 2] > 1e-4) {
      assertThat(actual.<Double>getAs("prediction"))
          .as(what)
          .isEqualTo(expected.<Double>getAs("prediction"));
    }
  }

  private static void assertUsageError(CliRunner r, String... fragments) {
    assertThat(r.code()).as(r.err()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(r.error()).startsWith("error: ").doesNotContain("\n").contains(fragments);
  }

  @Test
  void badImageFlagsAndFilesAreNamed() throws IOException {
    String data = tmp.resolve("train").toString();
    assertUsageError(
        CliRunner.run(
            "train",
            "--data",
            data,
            "--features",
            "pixels:3x8x8",
            "--label",
            "label",
            "--num-classes",
            "2",
            "--augment",
            "random-resized-crop,flip",
            "--output",
            tmp.resolve("x").toString()),
        "Invalid --augment 'random-resized-crop,flip': random-resized-crop needs encoded image"
            + " features (--features COL:image with --image-size HxW, or --format images), and"
            + " --features names none");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "16")),
        "Invalid --image-size '16': expected HxW in pixels, e.g. 224x224");
    assertUsageError(
        CliRunner.run(train(data, "x")),
        "Missing --image-size for the encoded image column 'image': expected HxW");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "16x16", "--resize", "longer:20")),
        "Invalid --resize 'longer:20': expected shorter:N (N >= 1 pixels, e.g. shorter:256)");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "16x20", "--resize", "shorter:18")),
        "Invalid --resize 'shorter:18': the shorter side must be at least 20, the larger side of"
            + " the image size 16x20");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "16x16", "--channels", "2")),
        "Invalid --channels 2: expected 3 (RGB) or 1 (grey)");
    assertUsageError(
        CliRunner.run(
            "train",
            "--data",
            data,
            "--features",
            "pixels:3x8x8",
            "--label",
            "label",
            "--num-classes",
            "2",
            "--image-size",
            "8x8",
            "--output",
            tmp.resolve("x").toString()),
        "Invalid --image-size: it applies to encoded image features, and --features names none");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "16x16", "--features", "photo:image")),
        "Invalid --features 'photo:image' with --format images");
    assertUsageError(
        CliRunner.run(train(data, "x", "--features", "image:16:image")),
        "Invalid --features 'image:16:image': an image column (image:image) takes the size the"
            + " model sees as HxW, e.g. image:224x224:image");

    assertUsageError(
        CliRunner.run(train(data, "x", "--format", "jpeg")),
        "Invalid --format 'jpeg': expected tfrecord, parquet or images (a folder of image files,"
            + " one subfolder per class)");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "16x16", "--label", "y")),
        "Invalid --label 'y' with --format images: the label is the column label");
    assertUsageError(
        CliRunner.run("train", "--data", data, "--output", tmp.resolve("x").toString()),
        "Missing --features for train: expected the feature column(s)");
    assertUsageError(
        CliRunner.run(
            "train",
            "--data",
            data,
            "--features",
            "photo:image",
            "--output",
            tmp.resolve("x").toString()),
        "Missing --label for train: expected the label column");
    assertUsageError(
        CliRunner.run(train(data, "x", "--features", "image:16x16:image", "--image-size", "8x8")),
        "Image column 'image' is declared 16x16 but the image size is 8x8: give one size");
    assertUsageError(
        CliRunner.run(
            "train",
            "--data",
            data,
            "--features",
            "photo:image,pixels:3x8x8",
            "--label",
            "label",
            "--num-classes",
            "2",
            "--image-size",
            "8x8",
            "--augment",
            "flip",
            "--output",
            tmp.resolve("x").toString()),
        "Invalid --augment with encoded image features: numeric column 'pixels' is image-shaped"
            + " too (3x8x8) and would be augmented as [H, W, C]: leave it out of --features");
    assertUsageError(
        CliRunner.run(train(data + "," + data, "x", "--image-size", "8x8")),
        "--format images reads one folder (one subfolder per class)");
    assertUsageError(
        CliRunner.run(train(tmp.resolve("nothing").toString(), "x", "--image-size", "8x8")),
        "No data at " + tmp.resolve("nothing") + " (--data): the path does not exist");
    assertUsageError(
        CliRunner.run(
            train(tmp.resolve("train/cat/p0.png").toString(), "x", "--image-size", "8x8")),
        "with --format images: it is a file, expected a folder with one subfolder per class");
    assertUsageError(
        CliRunner.run(train(data, "x", "--image-size", "8x8", "--num-classes", "3")),
        "--num-classes 3 does not match the 2 class folders of " + data + " (cat, dog)");
    Path zebras = tmp.resolve("zebra-val");
    Files.createDirectories(zebras.resolve("cat"));
    Files.createDirectories(zebras.resolve("zebra"));
    Files.copy(tmp.resolve("train/cat/p0.png"), zebras.resolve("cat/a.png"));
    Files.copy(tmp.resolve("train/dog/p0.png"), zebras.resolve("zebra/b.png"));
    assertUsageError(
        CliRunner.run(
            train(data, "x", "--image-size", "8x8", "--validation-data", zebras.toString())),
        "The class folders of "
            + zebras
            + " (--validation-data) are [cat, zebra] but those of "
            + data
            + " (--data) are [cat, dog]: expected the same classes");
    Path lonely = tmp.resolve("lonely");
    Files.createDirectories(lonely.resolve("cat"));
    Files.copy(tmp.resolve("train/cat/p0.png"), lonely.resolve("cat/a.png"));
    assertUsageError(
        CliRunner.run(train(lonely.toString(), "x", "--image-size", "8x8")),
        "Image folder " + lonely + " has 1 class folder (cat): expected at least 2");
    // An image column that holds numbers.
    Path numbers = tmp.resolve("numbers");
    Files.createDirectories(numbers);
    try (java.io.OutputStream os = Files.newOutputStream(numbers.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      java.util.Map<String, Feature> m = new java.util.LinkedHashMap<>();
      m.put("photo", Feature.ofInt64(7));
      m.put("label", Feature.ofInt64(1));
      w.write(Examples.encodeExample(m));
    }
    assertUsageError(
        CliRunner.run(
            "train",
            "--data",
            numbers.toString(),
            "--features",
            "photo:image",
            "--label",
            "label",
            "--num-classes",
            "2",
            "--image-size",
            "8x8",
            "--output",
            tmp.resolve("x").toString()),
        "Feature column 'photo' in "
            + numbers
            + " has type bigint: --features photo:image"
            + " expects encoded images (a bytes feature in TFRecord, binary in Parquet)");

    // No class folders: files straight in the folder.
    Path flat = tmp.resolve("flat");
    Files.createDirectories(flat);
    Files.copy(tmp.resolve("train/cat/p0.png"), flat.resolve("a.png"));
    assertUsageError(
        CliRunner.run(train(flat.toString(), "x", "--image-size", "16x16")),
        "Image folder "
            + flat
            + " has no class folders: expected one subfolder per class holding"
            + " its images (--data)");

    // A file that is no image, named with its path.
    Path corrupt = tmp.resolve("corrupt");
    Files.createDirectories(corrupt.resolve("cat"));
    Files.createDirectories(corrupt.resolve("dog"));
    Files.copy(tmp.resolve("train/cat/p0.png"), corrupt.resolve("cat/a.png"));
    Files.copy(tmp.resolve("train/dog/p0.png"), corrupt.resolve("dog/b.png"));
    Files.writeString(corrupt.resolve("dog/broken.jpg"), "not a photo at all");
    CliRunner c = CliRunner.run(train(corrupt.toString(), "x", "--image-size", "16x16"));
    // Found while the folder is staged (after the banner): the last line names the file.
    assertThat(c.code()).as(c.err()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    String last = c.error().substring(c.error().lastIndexOf('\n') + 1);
    assertThat(last)
        .startsWith("error: Cannot read the image ")
        .endsWith(
            "/corrupt/dog/broken.jpg (--data): not an image"
                + " ImageIO can read (18 bytes); expected a JPEG, PNG, BMP or GIF file");
  }
}
