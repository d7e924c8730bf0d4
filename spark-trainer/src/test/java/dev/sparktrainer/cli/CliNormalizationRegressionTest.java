package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import javax.imageio.ImageIO;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --normalize} and {@code --loss l2} end to end (train, evaluate, predict, inspect) on
 * tabular data whose 8 features span the scales 1e-3 .. 1e4: feature j is {@code z_j * 10^(j-3)}, z
 * standard normal. The class is {@code sum(z) > 0} and the regression target {@code 3 z_0 - 2 z_1 +
 * z_2 + z_7 + noise}: every feature matters equally to the label, whatever its scale.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class CliNormalizationRegressionTest {
  private static final int FEATURES = 8;
  private static SparkSession spark;
  @TempDir static Path tmp;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("cli-normalization-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    write("train", 4000, 1, "parquet");
    write("test", 1000, 2, "parquet");
    write("rtrain", 4000, 3, "tfrecord");
    write("rtest", 1000, 4, "tfrecord");
  }

  /**
   * {@code n} rows (features, a class label, a float target, a constant column) in {@code format}.
   */
  private static void write(String name, int n, long seed, String format) {
    Random rnd = new Random(seed);
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      double[] z = new double[FEATURES];
      float[] x = new float[FEATURES];
      double sum = 0;
      for (int j = 0; j < FEATURES; j++) {
        z[j] = rnd.nextGaussian();
        x[j] = (float) (z[j] * Math.pow(10, j - 3));
        sum += z[j];
      }
      double y = 3 * z[0] - 2 * z[1] + z[2] + z[7] + 0.1 * rnd.nextGaussian();
      List<Float> xs = new ArrayList<>();
      for (float v : x) {
        xs.add(v);
      }
      rows.add(RowFactory.create(xs, sum > 0 ? 1L : 0L, (float) y, 5.0f));
    }
    StructType schema =
        new StructType()
            .add("x", DataTypes.createArrayType(DataTypes.FloatType, false), false)
            .add("label", DataTypes.LongType, false)
            .add("target", DataTypes.FloatType, false)
            .add("constant", DataTypes.FloatType, false);
    spark.createDataFrame(rows, schema).coalesce(2).write().format(format).save(p(name).toString());
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

  private static JsonNode json(String text) throws IOException {
    return new ObjectMapper().readTree(text);
  }

  private static String[] train(String out, String normalize, String... more) {
    List<String> a =
        new ArrayList<>(
            List.of(
                "train",
                "--data",
                p("train").toString(),
                "--validation-data",
                p("test").toString(),
                "--features",
                "x,constant",
                "--label",
                "label",
                "--num-classes",
                "2",
                "--model",
                "mlp:32",
                "--workers",
                "2",
                "--epochs",
                "6",
                "--batch-size",
                "32",
                "--learning-rate",
                "0.01",
                "--seed",
                "7",
                "--progress",
                "none",
                "--normalize",
                normalize,
                "--output",
                p(out).toString()));
    a.addAll(List.of(more));
    return a.toArray(new String[0]);
  }

  @Test
  @Order(1)
  void normalizationLearnsWhatRawFeaturesAtScales1eMinus3To1e4DoNot() throws IOException {
    ok(train("raw", "none"));
    ok(train("standard", "standard"));
    ok(train("minmax", "minmax"));
    double raw =
        json(Files.readString(p("raw/metrics.json"))).get("final").get("val_accuracy").asDouble();
    double standard =
        json(Files.readString(p("standard/metrics.json")))
            .get("final")
            .get("val_accuracy")
            .asDouble();
    double minmax =
        json(Files.readString(p("minmax/metrics.json")))
            .get("final")
            .get("val_accuracy")
            .asDouble();
    System.out.printf(
        "held-out accuracy: raw %.4f, standard %.4f, minmax %.4f%n", raw, standard, minmax);
    assertThat(standard).isGreaterThan(0.9).isGreaterThan(raw + 0.15);
    assertThat(minmax).isGreaterThan(raw + 0.1);

    // Saved with the model: the training data's statistics (not the validation data's), the
    // constant
    // column's std 0 (it became 0, not NaN: the accuracy above says the model trained).
    List<String> csv = Files.readAllLines(p("standard/model/normalization.csv"));
    assertThat(csv.get(0)).isEqualTo("feature,index,count,mean,std,min,max");
    assertThat(csv).hasSize(1 + FEATURES + 1);
    double[] mean = new double[FEATURES];
    for (Row r : spark.read().parquet(p("train").toString()).selectExpr("x").collectAsList()) {
      List<Float> x = r.getList(0);
      for (int j = 0; j < FEATURES; j++) {
        mean[j] += x.get(j) / 4000.0;
      }
    }
    for (int j = 0; j < FEATURES; j++) {
      String[] f = csv.get(1 + j).split(",");
      assertThat(f[0]).isEqualTo("x");
      assertThat(Long.parseLong(f[2])).isEqualTo(4000);
      assertThat(Double.parseDouble(f[3])).isCloseTo(mean[j], within(1e-9 * Math.pow(10, j)));
      assertThat(Double.parseDouble(f[4]))
          .isCloseTo(Math.pow(10, j - 3), within(0.1 * Math.pow(10, j - 3)));
    }
    assertThat(csv.get(FEATURES + 1)).startsWith("constant,0,4000,5.0,0.0,5.0,5.0");
    assertThat(p("raw/model/normalization.csv")).doesNotExist();
    assertThat(p("standard/model/model.properties")).content().contains("normalize=standard");
  }

  @Test
  @Order(2)
  void evaluateAndPredictApplyTheSavedNormalization() throws IOException {
    JsonNode fin = json(Files.readString(p("standard/metrics.json"))).get("final");
    JsonNode eval =
        json(
            ok(
                    "evaluate",
                    "--model",
                    p("standard/model").toString(),
                    "--data",
                    p("test").toString(),
                    "--batch-size",
                    "64")
                .out());
    // The numbers the trainer reported for the same (normalized) validation data.
    assertThat(eval.get("count").asLong()).isEqualTo(1000);
    assertThat(eval.get("accuracy").asDouble())
        .isCloseTo(fin.get("val_accuracy").asDouble(), within(1e-9));
    assertThat(eval.get("loss").asDouble()).isCloseTo(fin.get("val_loss").asDouble(), within(1e-4));

    ok(
        "predict",
        "--model",
        p("standard/model").toString(),
        "--data",
        p("test").toString(),
        "--output",
        p("standard-predictions").toString());
    List<Row> rows = spark.read().parquet(p("standard-predictions").toString()).collectAsList();
    long correct =
        rows.stream()
            .filter(r -> r.<Double>getAs("prediction") == (double) r.<Long>getAs("label"))
            .count();
    assertThat(correct / 1000.0).isCloseTo(eval.get("accuracy").asDouble(), within(1e-9));
  }

  @Test
  @Order(3)
  void regressionReportsMseMaeAndR2PerEpochAndInEvaluate() throws IOException {
    CliRunner r =
        ok(
            "train",
            "--data",
            p("rtrain").toString(),
            "--validation-data",
            p("rtest").toString(),
            "--features",
            "x",
            "--label",
            "target",
            "--loss",
            "l2",
            "--model",
            "mlp:32",
            "--workers",
            "2",
            "--epochs",
            "6",
            "--batch-size",
            "32",
            "--learning-rate",
            "0.01",
            "--normalize",
            "standard",
            "--progress",
            "log",
            "--output",
            p("reg").toString());
    assertThat(r.out()).contains("Held-out R²: ");
    assertThat(r.err())
        .containsPattern(
            "epoch 6 done in .* mse \\S+ mae \\S+ r2 \\S+ val_mse \\S+ val_mae \\S+ val_r2 ");
    JsonNode m = json(Files.readString(p("reg/metrics.json")));
    assertThat(m.get("epochs")).hasSize(6);
    for (JsonNode e : m.get("epochs")) {
      assertThat(e.get("accuracy").isNull()).isTrue();
      // The l2 loss is half the squared error.
      assertThat(e.get("val_mse").asDouble())
          .isCloseTo(2 * e.get("val_loss").asDouble(), within(1e-4 * e.get("val_mse").asDouble()));
      assertThat(e.get("mae").asDouble()).isPositive();
    }
    JsonNode fin = m.get("final");
    assertThat(fin.get("val_r2").asDouble()).isGreaterThan(0.9);
    assertThat(m.get("epochs").get(5).get("val_r2").asDouble())
        .isGreaterThan(m.get("epochs").get(0).get("val_r2").asDouble() - 0.05);
    assertThat(p("reg/model/history.json")).content().contains("\"validation_r2\":");
    assertThat(ImageIO.read(p("reg/training.png").toFile()).getWidth()).isEqualTo(900);

    JsonNode eval =
        json(
            ok("evaluate", "--model", p("reg/model").toString(), "--data", p("rtest").toString())
                .out());
    assertThat(eval.get("accuracy").isNull()).isTrue();
    assertThat(eval.get("mse").asDouble())
        .isCloseTo(fin.get("val_mse").asDouble(), within(1e-4 * eval.get("mse").asDouble()));
    assertThat(eval.get("mae").asDouble())
        .isCloseTo(fin.get("val_mae").asDouble(), within(1e-4 * eval.get("mae").asDouble()));
    assertThat(eval.get("r2").asDouble()).isCloseTo(fin.get("val_r2").asDouble(), within(1e-5));

    // predict: the float target's predictions, whose R² is the one evaluate reports.
    ok(
        "predict",
        "--model",
        p("reg/model").toString(),
        "--data",
        p("rtest").toString(),
        "--output",
        p("reg-predictions").toString());
    List<Row> rows = spark.read().parquet(p("reg-predictions").toString()).collectAsList();
    assertThat(rows).hasSize(1000);
    double sse = 0;
    double sum = 0;
    double sq = 0;
    for (Row row : rows) {
      double y = row.<Float>getAs("target");
      double e = y - row.<Double>getAs("prediction");
      sse += e * e;
      sum += y;
      sq += y * y;
    }
    double r2 = 1 - sse / (sq - sum * sum / rows.size());
    assertThat(r2).isCloseTo(eval.get("r2").asDouble(), within(1e-5));
  }

  @Test
  @Order(4)
  void aFloatLabelInParquetTrainsARegression() throws IOException {
    ok(
        "train",
        "--data",
        p("train").toString(),
        "--validation-data",
        p("test").toString(),
        "--features",
        "x",
        "--label",
        "target",
        "--loss",
        "l2",
        "--model",
        "mlp:32",
        "--workers",
        "2",
        "--epochs",
        "4",
        "--batch-size",
        "32",
        "--learning-rate",
        "0.01",
        "--normalize",
        "minmax",
        "--progress",
        "none",
        "--output",
        p("preg").toString());
    JsonNode fin = json(Files.readString(p("preg/metrics.json"))).get("final");
    assertThat(fin.get("val_r2").asDouble()).isGreaterThan(0.9);
    JsonNode eval =
        json(
            ok("evaluate", "--model", p("preg/model").toString(), "--data", p("test").toString())
                .out());
    assertThat(eval.get("r2").asDouble()).isCloseTo(fin.get("val_r2").asDouble(), within(1e-5));
  }

  @Test
  @Order(5)
  void inspectShowsEachFeaturesMeanStdMinAndMax() {
    CliRunner i = ok("inspect", p("train").toString(), "--records", "0");
    assertThat(i.out()).contains("Feature statistics (4000 records):", "x[0]", "x[7]", "constant");
    String constant =
        i.out().lines().filter(l -> l.trim().startsWith("constant ")).findFirst().orElseThrow();
    assertThat(constant.trim().split("\\s+"))
        .containsExactly("constant", "5.00000", "0.00000", "5.00000", "5.00000");
  }

  /**
   * TFRecords whose list lengths vary are valid: inspect says the column's shape varies (the
   * lengths seen) and how to make it trainable, and still shows the other columns' statistics.
   */
  @Test
  @Order(6)
  void inspectSaysAColumnsLengthVariesInsteadOfCorrupt() {
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      List<Float> tokens = new ArrayList<>();
      for (int k = 0; k < 15 - i % 9; k++) { // 15, 14, ..., 7 values
        tokens.add((float) k);
      }
      rows.add(RowFactory.create(tokens, (float) i, (long) (i % 2)));
    }
    StructType schema =
        new StructType()
            .add("tokens", DataTypes.createArrayType(DataTypes.FloatType, false), false)
            .add("x", DataTypes.FloatType, false)
            .add("label", DataTypes.LongType, false);
    String path = p("varying").toString();
    spark.createDataFrame(rows, schema).coalesce(1).write().format("tfrecord").save(path);

    CliRunner i = ok("inspect", path, "--records", "0");
    assertThat(i.err())
        .doesNotContain("Corrupt")
        .contains(
            "Feature column 'tokens' in "
                + path
                + " varies in length: 7..15 values per record,"
                + " where a feature column has one shape");
    assertThat(i.err()).contains("pad or truncate", "--features");
    assertThat(i.out()).contains("Feature statistics (60 records):", "x ");

    CliRunner named = CliRunner.run("inspect", path, "--records", "0", "--features", "tokens");
    assertThat(named.code()).isNotZero();
    assertThat(named.error())
        .doesNotContain("Corrupt")
        .contains("Feature column 'tokens' in " + path + " varies in length: 7..15");
  }

  @Test
  @Order(7)
  void badNormalizeValueIsRefusedNamingTheAllowedOnes() {
    CliRunner r = CliRunner.run(train("bad", "zscore"));
    assertThat(r.code()).isNotZero();
    assertThat(r.error())
        .contains("Invalid --normalize 'zscore': expected standard, minmax or none");
  }
}
