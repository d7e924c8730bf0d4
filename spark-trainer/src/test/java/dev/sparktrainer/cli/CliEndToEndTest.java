package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.train.TrainedModel;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * The command line end to end on a local Spark (the session of this class, which the CLI reuses and
 * leaves running): convert the bundled digits, inspect, train with 2 workers, evaluate, predict —
 * and the errors that need the data's schema.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class CliEndToEndTest {
  private static SparkSession spark;
  private static final List<String> stageNames = new CopyOnWriteArrayList<>();
  private static final List<String> jobDescriptions = new CopyOnWriteArrayList<>();
  @TempDir static Path tmp;

  @BeforeAll
  static void start() throws IOException {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("cli-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    spark
        .sparkContext()
        .addSparkListener(
            new SparkListener() {
              @Override
              public void onStageSubmitted(SparkListenerStageSubmitted e) {
                stageNames.add(e.stageInfo().name());
              }

              @Override
              public void onJobStart(SparkListenerJobStart e) {
                String d =
                    e.properties() == null
                        ? null
                        : e.properties().getProperty("spark.job.description");
                jobDescriptions.add(d == null ? "" : d);
              }
            });
    try (InputStream in = CliEndToEndTest.class.getResourceAsStream("/sample-data/digits.csv.gz")) {
      Files.copy(in, tmp.resolve("digits.csv.gz"));
    }
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  private static Path p(String name) {
    return tmp.resolve(name);
  }

  private static CliRunner ok(String... args) {
    CliRunner r = CliRunner.run(args);
    assertThat(r.code()).as(r.err()).isZero();
    return r;
  }

  @Test
  @Order(1)
  void convertAndInspect() {
    CliRunner c =
        ok(
            "convert",
            "--input",
            p("digits.csv.gz").toString(),
            "--label",
            "_c64",
            "--feature-column",
            "pixels",
            "--feature-scale",
            "0.0625",
            "--test-fraction",
            "0.2",
            "--shards",
            "3",
            "--output",
            p("digits").toString());
    assertThat(c.out())
        .contains("to " + p("digits/train") + " (3 shards)", "pixels array<float>, label bigint");
    List<Row> all =
        spark
            .read()
            .format("tfrecord")
            .load(p("digits/train").toString(), p("digits/test").toString())
            .collectAsList();
    assertThat(all).hasSize(1797);
    assertThat(all).allSatisfy(r -> assertThat(r.getList(r.fieldIndex("pixels"))).hasSize(64));

    CliRunner i = ok("inspect", p("digits/train").toString(), "--records", "2");
    long n = spark.read().format("tfrecord").load(p("digits/train").toString()).count();
    assertThat(i.out())
        .contains(
            "(3 tfrecord files",
            "Records: " + n,
            "|-- label: long",
            "|-- pixels: array",
            "First 2 records:",
            "... (64 values)]");
  }

  @Test
  @Order(2)
  void trainWritesModelMetricsLogsAndPlot() throws IOException {
    stageNames.clear();
    CliRunner r =
        ok(
            "train",
            "--data",
            p("digits/train").toString(),
            "--validation-data",
            p("digits/test").toString(),
            "--features",
            "pixels",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--model",
            "mlp:64",
            "--workers",
            "2",
            "--epochs",
            "4",
            "--batch-size",
            "32",
            "--learning-rate",
            "0.01",
            "--progress",
            "log",
            "--output",
            p("run").toString());
    assertThat(r.out())
        .contains(
            "Held-out accuracy: ",
            "Model:       " + p("run/model"),
            "TensorBoard: tensorboard --logdir " + p("run/logs"),
            "Plot:        " + p("run/training.png"));
    // Live progress reached the driver from rank 0: step lines and one line per epoch.
    assertThat(r.err()).contains("epoch 1/4 step ", "epoch 4 done in");
    assertThat(r.err().lines().filter(l -> l.matches("epoch \\d done in .*val_accuracy.*")))
        .hasSize(4);
    // The Spark UI names the training stages after the job.
    assertThat(stageNames).anyMatch(s -> s.startsWith("spark-trainer: train 2 workers x 4 epochs"));

    JsonNode m = new ObjectMapper().readTree(p("run/metrics.json").toFile());
    assertThat(m.get("epochs")).hasSize(4);
    JsonNode fin = m.get("final");
    assertThat(fin.get("val_accuracy").asDouble()).isGreaterThan(0.85);
    assertThat(m.get("epochs").get(3).get("val_accuracy").asDouble())
        .isEqualTo(fin.get("val_accuracy").asDouble());
    assertThat(m.get("epochs").get(0).get("time").get("compute_s").asDouble()).isPositive();
    assertThat(m.get("workers").asInt()).isEqualTo(2);
    assertThat(p("run/model/model.params")).exists();
    assertThat(p("run/model/inputs.properties"))
        .content()
        .contains("features=pixels\\:64", "label=label");
    assertThat(ImageIO.read(p("run/training.png").toFile()).getWidth()).isEqualTo(900);
    try (Stream<Path> s = Files.list(p("run/logs/train"))) {
      assertThat(s.toList())
          .singleElement()
          .satisfies(
              f -> assertThat(f.getFileName().toString()).startsWith("events.out.tfevents."));
    }
    try (Stream<Path> s = Files.list(p("run"))) {
      assertThat(s.map(x -> x.getFileName().toString())).noneMatch(n -> n.endsWith(".crc"));
    }
  }

  @Test
  @Order(3)
  void evaluateMatchesTheValidationOfTheLastEpochAndPredictWritesParquet() throws IOException {
    CliRunner e =
        ok(
            "evaluate",
            "--model",
            p("run/model").toString(),
            "--data",
            p("digits/test").toString(),
            "--batch-size",
            "50");
    JsonNode eval = new ObjectMapper().readTree(e.out());
    JsonNode fin = new ObjectMapper().readTree(p("run/metrics.json").toFile()).get("final");
    long testRows = spark.read().format("tfrecord").load(p("digits/test").toString()).count();
    assertThat(eval.get("count").asLong()).isEqualTo(testRows);
    // Same model, same records, same loss: the numbers the trainer reported for validation.
    assertThat(eval.get("accuracy").asDouble())
        .isCloseTo(fin.get("val_accuracy").asDouble(), within(1e-9));
    assertThat(eval.get("loss").asDouble()).isCloseTo(fin.get("val_loss").asDouble(), within(1e-4));

    CliRunner pr =
        ok(
            "predict",
            "--model",
            p("run/model").toString(),
            "--data",
            p("digits/test").toString(),
            "--output",
            p("predictions").toString(),
            "--batch-size",
            "40");
    assertThat(pr.out()).contains("Wrote " + testRows + " predictions to " + p("predictions"));
    List<Row> rows = spark.read().parquet(p("predictions").toString()).collectAsList();
    assertThat(rows).hasSize((int) testRows);
    assertThat(rows.get(0).schema().fieldNames())
        .containsExactly("label", "pixels", "prediction", "probability");
    long correct = 0;
    for (Row row : rows) {
      Vector prob = row.getAs("probability");
      assertThat(prob.size()).isEqualTo(10);
      double sum = 0;
      for (double v : prob.toArray()) {
        sum += v;
      }
      assertThat(sum).isCloseTo(1.0, within(1e-6));
      assertThat((double) prob.argmax()).isEqualTo(row.<Double>getAs("prediction"));
      correct += row.<Double>getAs("prediction") == (double) row.<Long>getAs("label") ? 1 : 0;
    }
    assertThat(correct / (double) testRows)
        .isCloseTo(eval.get("accuracy").asDouble(), within(1e-9));
  }

  @Test
  @Order(4)
  void errorsThatNeedTheSchemaComeBeforeAnyTrainingJob() throws IOException {
    jobDescriptions.clear();
    String train = p("digits/train").toString();
    CliRunner missing =
        CliRunner.run(
            "train",
            "--data",
            train,
            "--features",
            "pixelz",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--output",
            p("bad1").toString());
    assertThat(missing.code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(missing.error())
        .isEqualTo(
            "error: No feature column 'pixelz' in " + train + ": its columns are label, pixels");

    CliRunner classes =
        CliRunner.run(
            "train",
            "--data",
            train,
            "--features",
            "pixels",
            "--label",
            "label",
            "--num-classes",
            "5",
            "--output",
            p("bad2").toString());
    assertThat(classes.code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(classes.error())
        .isEqualTo(
            "error: --num-classes 5 does not match the labels: 'label' in "
                + train
                + " has values 0..9: expected --num-classes 10 (labels are class indices 0..K-1)");

    // A Parquet file whose label is a string and whose features are a string.
    spark
        .sql("SELECT 'seven' AS label, '1,2' AS pixels, array(1.0, 2.0) AS xs")
        .write()
        .parquet(p("strings").toString());
    CliRunner label =
        CliRunner.run(
            "train",
            "--data",
            p("strings").toString(),
            "--features",
            "xs",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--output",
            p("bad3").toString());
    assertThat(label.error())
        .isEqualTo(
            "error: Label column 'label' in "
                + p("strings")
                + " has type string: expected one number per record (a class index 0..9)");
    CliRunner feature =
        CliRunner.run(
            "train",
            "--data",
            p("strings").toString(),
            "--features",
            "pixels",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--output",
            p("bad4").toString());
    assertThat(feature.error())
        .startsWith(
            "error: Feature column 'pixels' in "
                + p("strings")
                + " has type string: expected numbers");
    CliRunner evalFeatures =
        CliRunner.run(
            "evaluate",
            "--model",
            p("run/model").toString(),
            "--data",
            p("strings").toString(),
            "--features",
            "xs",
            "--label",
            "label");
    assertThat(evalFeatures.error())
        .isEqualTo(
            "error: The feature columns [xs] of "
                + p("strings")
                + " hold 2 values per record: the model at "
                + p("run/model")
                + " expects 64");

    // None of that reached training: no model written, no training job started.
    for (String d : List.of("bad1", "bad2", "bad3", "bad4")) {
      assertThat(p(d + "/model")).doesNotExist();
    }
    assertThat(jobDescriptions).noneMatch(d -> d.startsWith("spark-trainer: 2 workers"));
    CliRunner again =
        CliRunner.run(
            "train",
            "--data",
            train,
            "--features",
            "pixels",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--output",
            p("run").toString());
    assertThat(again.error())
        .isEqualTo(
            "error: Output directory "
                + p("run")
                + " already holds a model ("
                + p("run/model")
                + "): choose another --output, or add --overwrite");
  }

  @Test
  @Order(5)
  void trainReplacesAnIncompleteModelButNotAComplete() throws IOException {
    // What a run killed while saving used to leave: some model files, no completion marker.
    Files.createDirectories(p("run2/model"));
    Files.writeString(p("run2/model/model.properties"), "model.kind=mlp\n");
    Files.write(p("run2/model/model.params"), new byte[] {1, 2, 3});
    String[] args = {
      "train",
      "--data",
      p("digits/train").toString(),
      "--features",
      "pixels",
      "--label",
      "label",
      "--num-classes",
      "10",
      "--model",
      "mlp:16",
      "--workers",
      "2",
      "--epochs",
      "1",
      "--progress",
      "none",
      "--output",
      p("run2").toString()
    };
    CliRunner r = ok(args);
    assertThat(r.err()).contains("Replacing the incomplete model in " + p("run2/model"));
    TrainedModel m = TrainedModel.load(p("run2/model").toString(), new Configuration());
    assertThat(m.spec().toProperties().toString()).contains("16");
    assertThat(p("run2/model/_COMPLETE")).content().contains("inputs.properties", "model.params");
    try (Stream<Path> s = Files.list(p("run2"))) {
      assertThat(s.map(x -> x.getFileName().toString())).noneMatch(n -> n.startsWith("_"));
    }

    CliRunner again = CliRunner.run(args);
    assertThat(again.error())
        .isEqualTo(
            "error: Output directory "
                + p("run2")
                + " already holds a model ("
                + p("run2/model")
                + "): choose another --output, or add --overwrite");
  }

  /**
   * {@code --augment}: flips and crops the training images only, normalizes per channel everywhere
   * — evaluate (normalizing from what the model recorded) reproduces the last epoch's validation
   * exactly, and predict agrees with it. Bad values fail before any job.
   */
  @Test
  @Order(6)
  void augmentFlipsAndCropsTrainingImagesAndNormalizesEverywhere() throws IOException {
    CliRunner r =
        ok(
            "train",
            "--data",
            p("digits/train").toString(),
            "--validation-data",
            p("digits/test").toString(),
            "--features",
            "pixels:1x8x8",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--model",
            "cnn:8",
            "--workers",
            "2",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--learning-rate",
            "0.01",
            "--progress",
            "none",
            "--augment",
            "flip,crop:1,normalize:0.3/0.4",
            "--output",
            p("aug").toString());
    assertThat(r.out()).contains("Held-out accuracy: ");
    assertThat(p("aug/model/inputs.properties"))
        .content()
        .contains("normalize=normalize\\:0.3/0.4", "features=pixels\\:1x8x8");
    JsonNode fin = new ObjectMapper().readTree(p("aug/metrics.json").toFile()).get("final");
    CliRunner e =
        ok("evaluate", "--model", p("aug/model").toString(), "--data", p("digits/test").toString());
    JsonNode eval = new ObjectMapper().readTree(e.out());
    assertThat(eval.get("accuracy").asDouble())
        .isCloseTo(fin.get("val_accuracy").asDouble(), within(1e-9));
    assertThat(eval.get("loss").asDouble()).isCloseTo(fin.get("val_loss").asDouble(), within(1e-4));
    ok(
        "predict",
        "--model",
        p("aug/model").toString(),
        "--data",
        p("digits/test").toString(),
        "--output",
        p("aug-predictions").toString());
    List<Row> rows = spark.read().parquet(p("aug-predictions").toString()).collectAsList();
    long correct =
        rows.stream()
            .filter(row -> row.<Double>getAs("prediction") == (double) row.<Long>getAs("label"))
            .count();
    assertThat(correct / (double) rows.size())
        .isCloseTo(eval.get("accuracy").asDouble(), within(1e-9));

    CliRunner flat =
        CliRunner.run(
            "train",
            "--data",
            p("digits/train").toString(),
            "--features",
            "pixels",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--augment",
            "flip",
            "--output",
            p("aug2").toString());
    assertThat(flat.error())
        .startsWith("error: Invalid --augment 'flip': it needs an image-shaped feature")
        .contains("[64]", "--features COL:CxHxW");
    CliRunner bad =
        CliRunner.run(
            "train",
            "--data",
            p("digits/train").toString(),
            "--features",
            "pixels:1x8x8",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--augment",
            "flip,zoom:2",
            "--output",
            p("aug2").toString());
    assertThat(bad.error())
        .startsWith("error: Invalid --augment 'flip,zoom:2': unknown step 'zoom:2'");
  }

  /**
   * The user's own PyTorch model end to end: {@code --model torchscript:PATH} (a module with batch
   * norm and dropout, saved in eval mode) trains with 2 workers, evaluate and predict use it, and
   * the saved model.pt is a TorchScript module whose eval outputs are predict's raw outputs.
   */
  @Test
  @Order(7)
  void trainsEvaluatesAndPredictsATorchScriptModel() throws IOException {
    String module =
        Path.of("src/test/resources/torchscript/digits_bn.pt").toAbsolutePath().toString();
    CliRunner r =
        ok(
            "train",
            "--data",
            p("digits/train").toString(),
            "--validation-data",
            p("digits/test").toString(),
            "--features",
            "pixels",
            "--label",
            "label",
            "--num-classes",
            "10",
            "--model",
            "torchscript:" + module,
            "--workers",
            "2",
            "--epochs",
            "3",
            "--batch-size",
            "32",
            "--learning-rate",
            "0.005",
            "--output",
            p("ts-run").toString());
    assertThat(r.err()).contains("Training torchscript(source=" + module);
    JsonNode fin = new ObjectMapper().readTree(p("ts-run/metrics.json").toFile()).get("final");
    assertThat(fin.get("val_accuracy").asDouble()).isGreaterThan(0.85);
    assertThat(p("ts-run/model/model.pt")).exists();

    CliRunner e =
        ok(
            "evaluate",
            "--model",
            p("ts-run/model").toString(),
            "--data",
            p("digits/test").toString());
    JsonNode eval = new ObjectMapper().readTree(e.out());
    assertThat(eval.get("accuracy").asDouble())
        .isCloseTo(fin.get("val_accuracy").asDouble(), within(1e-9));

    ok(
        "predict",
        "--model",
        p("ts-run/model").toString(),
        "--data",
        p("digits/test").toString(),
        "--output",
        p("ts-predictions").toString(),
        "--raw-prediction-col",
        "logits");
    List<Row> rows = spark.read().parquet(p("ts-predictions").toString()).limit(16).collectAsList();
    float[] x = new float[rows.size() * 64];
    for (int i = 0; i < rows.size(); i++) {
      List<Object> pixels = rows.get(i).getList(rows.get(i).fieldIndex("pixels"));
      for (int j = 0; j < 64; j++) {
        x[i * 64 + j] = ((Number) pixels.get(j)).floatValue();
      }
    }
    dev.sparktrainer.model.torchscript.TorchScriptFile file =
        dev.sparktrainer.model.torchscript.TorchScriptFile.parse(
            "model.pt", Files.readAllBytes(p("ts-run/model/model.pt")));
    try (ai.djl.ndarray.NDManager m = ai.djl.ndarray.NDManager.newBaseManager(ai.djl.Device.cpu());
        dev.sparktrainer.model.torchscript.TorchScriptBlock block =
            (dev.sparktrainer.model.torchscript.TorchScriptBlock)
                dev.sparktrainer.model.torchscript.TorchScriptSpec.of(
                        file, new ai.djl.ndarray.types.Shape(64))
                    .build(m)) {
      float[] out =
          block
              .forward(
                  new ai.djl.training.ParameterStore(m, false),
                  new ai.djl.ndarray.NDList(
                      m.create(x, new ai.djl.ndarray.types.Shape(rows.size(), 64))),
                  false)
              .head()
              .toFloatArray();
      for (int i = 0; i < rows.size(); i++) {
        Vector logits = rows.get(i).getAs("logits");
        for (int c = 0; c < 10; c++) {
          assertThat((double) out[i * 10 + c])
              .as("row " + i + " class " + c)
              .isCloseTo(logits.apply(c), within(1e-5));
        }
      }
    }
  }
}
