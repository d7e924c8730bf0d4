package dev.sparktrainer.ml;

import static org.apache.spark.sql.functions.col;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.DataFrameInput;
import dev.sparktrainer.data.DatasetSpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Estimator with a sequence model: {@code embed:DIM} trained on a DataFrame's {@code
 * array<bigint>} column of token ids (vocabulary size and maximum length from the data unless
 * given), and the fitted model's {@code transform} predicting on such a column; the bad inputs.
 */
class EstimatorSequenceTest {
  private static SparkSession spark;
  private static Dataset<Row> data;
  @TempDir static Path tmp;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("estimator-sequence-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    // Label 0: ids 0..9; label 1: ids 10..19; 1..12 ids a row, some rows empty or null.
    StructType schema =
        new StructType()
            .add("tokens", DataTypes.createArrayType(DataTypes.LongType))
            .add("label", DataTypes.IntegerType);
    Random r = new Random(5);
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 240; i++) {
      int label = i % 2;
      int n = 1 + r.nextInt(12);
      List<Long> ids = new ArrayList<>();
      for (int j = 0; j < n; j++) {
        ids.add(10L * label + r.nextInt(10));
      }
      rows.add(RowFactory.create(ids, label));
    }
    rows.set(7, RowFactory.create(List.of(), 1)); // empty
    rows.set(9, RowFactory.create(null, 1)); // null: empty too
    data = spark.createDataFrame(rows, schema);
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  private static SparkTrainerEstimator embed() {
    return new SparkTrainerEstimator()
        .setFeaturesCol("tokens")
        .setModelSpec("embed:8")
        .setNumWorkers(1)
        .setEpochs(2)
        .setNumClasses(2)
        .setBatchSize(16)
        .setLearningRate(0.05)
        .setSeed(3)
        .setShuffleBuffer(64)
        .setStagingDir(tmp.resolve("staging").toString());
  }

  @Test
  void embedTrainsOnTokenIdsAndTransformPredictsOnThem() {
    SparkTrainerModel model =
        embed().setBucketBoundaries(new int[] {4, 8}).setPadValue(0).fit(data);
    assertThat(model.trainedModel().spec().toProperties())
        .as("vocabulary and maximum length from the data")
        .containsEntry("vocabSize", "20")
        .containsEntry("maxLength", "12")
        .containsEntry("outputs", "2");
    // Predict on array<int> ids (bigint in training): both are token ids.
    Dataset<Row> ints = data.withColumn("tokens", col("tokens").cast("array<int>"));
    List<Row> out = model.transform(ints).select("label", "prediction").collectAsList();
    assertThat(out).hasSize(240);
    long right = out.stream().filter(x -> x.getInt(0) == (int) x.getDouble(1)).count();
    assertThat(right).as("accuracy of a separable task").isGreaterThan(200);

    // An id outside the model's vocabulary fails transform, naming the column.
    Dataset<Row> bad =
        spark.createDataFrame(List.of(RowFactory.create(List.of(1L, 25L), 0)), data.schema());
    assertThatThrownBy(() -> model.transform(bad).collectAsList())
        .hasStackTraceContaining(
            "Feature column 'tokens' value 1 is 25: outside the vocabulary [0, 20)");
  }

  @Test
  void sequenceParamsAreCheckedNamingWhatIsWrong() {
    assertThatThrownBy(
            () ->
                new SparkTrainerEstimator().setFeaturesCol("tokens").setMaxLength(8).trainer(data))
        .hasMessage(
            "Invalid maxLength: it applies to sequence models (embed:DIM, transformer:...), and"
                + " modelSpec is 'mlp:128'");
    assertThatThrownBy(() -> embed().setVocabSize(10).trainer(data))
        .hasMessage(
            "Feature column 'tokens' in the training data holds ids 0..19: outside the vocabulary"
                + " 0..9 (vocabSize)");
    Dataset<Row> floats = data.withColumn("tokens", col("tokens").cast("array<double>"));
    assertThatThrownBy(() -> embed().trainer(floats))
        .hasMessage(
            "Feature column 'tokens' has type array<double>: the sequence model 'embed:8' reads"
                + " token ids, expected array<int> or array<bigint>");
    assertThatThrownBy(() -> embed().setBucketBoundaries(new int[] {8, 4}))
        .hasMessageStartingWith("Invalid bucketBoundaries");
    // Given values are the model's.
    assertThat(
            embed()
                .setVocabSize(32)
                .setMaxLength(5)
                .trainer(data)
                .config()
                .model()
                .spec()
                .toProperties())
        .containsEntry("vocabSize", "32")
        .containsEntry("maxLength", "5");
  }

  @Test
  void dataFrameInputChecksIntegerColumns() {
    DatasetSpec ids =
        DatasetSpec.builder()
            .addPath("x")
            .addSequenceFeature("tokens", DatasetSpec.ValueType.INT64, 8, 0)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    Dataset<Row> floats = data.withColumn("tokens", col("tokens").cast("array<float>"));
    assertThatThrownBy(() -> DataFrameInput.of(floats, ids, tmp.toString()))
        .hasMessage(
            "Feature column 'tokens' has type array<float>: declared a sequence of int64 ids,"
                + " expected int or bigint, or an array of them");
    DatasetSpec int64 =
        DatasetSpec.builder()
            .addPath("x")
            .addIntFeature("label")
            .setLabel("tokens", DatasetSpec.LabelType.INT)
            .build();
    Dataset<Row> doubles = data.withColumn("label", col("label").cast("double"));
    assertThatThrownBy(() -> DataFrameInput.of(doubles, int64, tmp.toString()))
        .hasMessage(
            "Feature column 'label' has type double: declared int64, expected int or bigint (or an"
                + " array of them)");
  }
}
