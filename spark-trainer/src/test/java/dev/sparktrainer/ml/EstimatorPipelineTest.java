package dev.sparktrainer.ml;

import static org.apache.spark.sql.functions.col;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.config.TrainingConfig;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;
import org.apache.spark.ml.Pipeline;
import org.apache.spark.ml.PipelineModel;
import org.apache.spark.ml.PipelineStage;
import org.apache.spark.ml.feature.StandardScaler;
import org.apache.spark.ml.feature.VectorAssembler;
import org.apache.spark.ml.linalg.Vector;
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
 * The Estimator in a Spark ML Pipeline after VectorAssembler and StandardScaler; persistence;
 * transform.
 */
class EstimatorPipelineTest {
  private static SparkSession spark;
  private static Dataset<Row> train;
  private static Dataset<Row> test;
  private static String[] pixelCols;
  @TempDir static Path tmp;

  @BeforeAll
  static void start() throws IOException {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("estimator-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    // The digits as 64 double columns p0..p63 and an int label: what VectorAssembler starts from.
    StructType schema = new StructType();
    pixelCols = new String[64];
    for (int i = 0; i < 64; i++) {
      pixelCols[i] = "p" + i;
      schema = schema.add(pixelCols[i], DataTypes.DoubleType);
    }
    schema = schema.add("label", DataTypes.IntegerType);
    List<Row> rows = new ArrayList<>();
    try (InputStream raw =
            EstimatorPipelineTest.class.getResourceAsStream("/sample-data/digits.csv.gz");
        BufferedReader r =
            new BufferedReader(
                new InputStreamReader(new GZIPInputStream(raw), StandardCharsets.US_ASCII))) {
      for (String line; (line = r.readLine()) != null; ) {
        if (!line.isBlank()) {
          String[] f = line.split(",");
          Object[] v = new Object[65];
          for (int i = 0; i < 64; i++) {
            v[i] = Double.parseDouble(f[i]);
          }
          v[64] = Integer.parseInt(f[64].trim());
          rows.add(RowFactory.create(v));
        }
      }
    }
    Dataset<Row>[] split =
        spark.createDataFrame(rows, schema).randomSplit(new double[] {0.8, 0.2}, 7);
    train = split[0].cache();
    test = split[1].repartition(3).cache();
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  @Test
  void pipelineTrainsPersistsAndPredictsInBatches() throws IOException {
    VectorAssembler assembler = new VectorAssembler().setInputCols(pixelCols).setOutputCol("raw");
    StandardScaler scaler = new StandardScaler().setInputCol("raw").setOutputCol("features");
    SparkTrainerEstimator trainer =
        new SparkTrainerEstimator()
            .setModelSpec("mlp:64")
            .setNumWorkers(2)
            .setEpochs(6)
            .setBatchSize(32)
            .setLearningRate(0.01)
            .setSeed(3)
            .setInferenceBatchSize(64)
            .setStagingDir(tmp.resolve("staging").toString());
    PipelineModel model =
        new Pipeline().setStages(new PipelineStage[] {assembler, scaler, trainer}).fit(train);

    SparkTrainerModel stage = (SparkTrainerModel) model.stages()[2];
    assertThat(stage.history().epochs()).hasSize(6);
    assertThat(stage.parent()).isSameAs(trainer);
    assertThat(stage.trainedModel().spec().toProperties())
        .containsEntry("outputs", "10")
        .containsEntry("hidden", "64");

    long loadsBefore = BatchInference.MODEL_LOADS.get();
    long batchesBefore = BatchInference.BATCHES.get();
    List<Row> predicted =
        model
            .transform(test)
            .select("label", "prediction", "probability", "rawPrediction")
            .collectAsList();
    long rows = test.count();
    assertThat(predicted).hasSize((int) rows);
    // One JVM (local mode) is one executor: the model was built once, and rows went through in
    // batches of 64 per partition (3 partitions), not one by one.
    assertThat(BatchInference.MODEL_LOADS.get() - loadsBefore).isEqualTo(1);
    assertThat(BatchInference.BATCHES.get() - batchesBefore)
        .isBetween((rows + 63) / 64, (rows + 63) / 64 + 3);
    double accuracy =
        predicted.stream().filter(r -> r.getDouble(1) == r.getInt(0)).count() / (double) rows;
    assertThat(accuracy).isGreaterThan(0.9);
    Vector p = predicted.get(0).getAs("probability");
    assertThat(p.size()).isEqualTo(10);
    assertThat((double) p.argmax()).isEqualTo(predicted.get(0).getDouble(1));

    // MLWritable / MLReadable: the fitted pipeline and the estimator round-trip.
    String path = tmp.resolve("pipeline-model").toString();
    model.write().overwrite().save(path);
    PipelineModel loaded = PipelineModel.load(path);
    List<Row> again = loaded.transform(test).select("prediction", "probability").collectAsList();
    for (int i = 0; i < again.size(); i++) {
      assertThat(again.get(i).getDouble(0)).isEqualTo(predicted.get(i).getDouble(1));
      assertThat(((Vector) again.get(i).getAs(1)).toArray())
          .isEqualTo(((Vector) predicted.get(i).getAs(2)).toArray());
    }
    SparkTrainerModel loadedStage = (SparkTrainerModel) loaded.stages()[2];
    assertThat(loadedStage.uid()).isEqualTo(stage.uid());
    assertThat(loadedStage.getOrDefault(loadedStage.inferenceBatchSize())).isEqualTo(64);

    String estimatorPath = tmp.resolve("estimator").toString();
    trainer.write().overwrite().save(estimatorPath);
    SparkTrainerEstimator e = SparkTrainerEstimator.load(estimatorPath);
    assertThat(e.uid()).isEqualTo(trainer.uid());
    assertThat(e.getOrDefault(e.modelSpec())).isEqualTo("mlp:64");
    assertThat(e.getOrDefault(e.epochs())).isEqualTo(6);
    assertThat(e.getOrDefault(e.learningRate())).isEqualTo(0.01);
    assertThat(e.explainParams())
        .contains("numWorkers", "batchSize", "checkpointDir", "seed", "featuresCol");
  }

  /**
   * Examples the transform of {@link #aTransformAugmentsTheTrainingDataOnTheExecutors} saw (local
   * mode: one JVM).
   */
  private static final AtomicLong MAPPED = new AtomicLong();

  /**
   * The settings the Estimator gained from the option table reach the trainer: a checkpoint every 5
   * steps as well as at epoch ends, 2 kept (the default keeps 3), gradients as bfloat16, SGD with
   * momentum and warm-up, a collective timeout in seconds. The configuration the tasks run with is
   * read from the trainer the Estimator builds; then a real fit keeps exactly 2 checkpoints.
   *
   * <p>Why not which checkpoints are kept: rank 0 writes them in the background and a snapshot
   * waiting behind a slow write is replaced by a newer one (newest wins), so on a loaded machine a
   * mid-epoch checkpoint may never be written. That at least 2 are written holds whatever the
   * timing: the first snapshot (step 5) meets an idle writer, and the last is drained at the end.
   */
  @Test
  void theOptionTablesParamsReachTheTrainer() throws IOException {
    Dataset<Row> assembled =
        new VectorAssembler().setInputCols(pixelCols).setOutputCol("features").transform(train);
    Path ckpt = tmp.resolve("ckpt-params");
    SparkTrainerEstimator estimator =
        new SparkTrainerEstimator()
            .setModelSpec("mlp:16")
            .setNumWorkers(2)
            .setEpochs(2)
            .setBatchSize(32)
            .setSeed(5)
            .setStagingDir(tmp.resolve("staging-params").toString())
            .setCheckpointDir(ckpt.toString())
            .setCheckpointEverySteps(5)
            .setKeepCheckpoints(2)
            .setGradientPrecision("bf16")
            .setOptimizer("sgd")
            .setLearningRate(0.05)
            .setMomentum(0.5)
            .setWarmupSteps(2)
            .setCollectiveTimeout(60)
            .setSlotWait(10);
    TrainingConfig cfg = estimator.trainer(assembled).config();
    assertThat(cfg.checkpoints().everySteps()).as("checkpointEverySteps").isEqualTo(5);
    assertThat(cfg.checkpoints().keep()).as("keepCheckpoints").isEqualTo(2);
    assertThat(cfg.comm().wirePrecision()).as("gradientPrecision").isEqualTo(WirePrecision.BF16);
    assertThat(cfg.comm().operationTimeout()).as("collectiveTimeout").hasSeconds(60);
    assertThat(cfg.model().optimizer().kind()).isEqualTo(OptimizerSpec.Kind.SGD);
    assertThat(cfg.model().optimizer().toString())
        .as("optimizer")
        .contains("lr=0.05", "momentum=0.5", "warmup=2");
    assertThat(cfg.data().epochs()).isEqualTo(2);
    assertThat(cfg.elastic().numWorkers()).isEqualTo(2);

    SparkTrainerModel model = estimator.fit(assembled);
    assertThat(model.history().epochs()).hasSize(2);
    List<Long> steps;
    try (Stream<Path> files = Files.list(ckpt)) {
      steps =
          files
              .map(f -> f.getFileName().toString())
              .filter(n -> n.matches("ckpt-\\d{19}\\.bin"))
              .map(n -> Long.parseLong(n.substring(5, 24)))
              .sorted()
              .toList();
    }
    assertThat(steps).as("checkpoints kept (keepCheckpoints 2)").hasSize(2);
    assertThat(steps.get(1))
        .as("the last checkpoint is the run's end")
        .isEqualTo(model.history().epochs().stream().mapToLong(e -> e.steps()).sum());
  }

  /**
   * The Estimator's transform travels to the executors and maps the training examples (the digits'
   * 64 values seen as one 8x8 image), not the rows {@code transform} predicts; it survives the
   * Estimator's save and load.
   */
  @Test
  void aTransformAugmentsTheTrainingDataOnTheExecutors() throws IOException {
    Dataset<Row> assembled =
        new VectorAssembler().setInputCols(pixelCols).setOutputCol("features").transform(train);
    ExampleTransform augment =
        ImageAugment.parse("flip,crop:1", ImageAugment.Layout.CHW)
            .withImageShape(1, 8, 8)
            .training();
    SparkTrainerEstimator trainer =
        new SparkTrainerEstimator()
            .setModelSpec("mlp:32")
            .setNumWorkers(2)
            .setEpochs(2)
            .setBatchSize(32)
            .setSeed(5)
            .setStagingDir(tmp.resolve("staging-map").toString())
            .setTransform(augment.andThen(ex -> MAPPED.incrementAndGet()));
    MAPPED.set(0);
    SparkTrainerModel model = trainer.fit(assembled);
    long rows = assembled.count();
    assertThat(model.history().epochs()).hasSize(2);
    assertThat(MAPPED.get()).as("examples mapped in 2 epochs").isBetween(2 * (rows - 64), 2 * rows);
    long mapped = MAPPED.get();
    model.transform(assembled).count();
    assertThat(MAPPED.get()).as("prediction is not augmented").isEqualTo(mapped);

    String path = tmp.resolve("estimator-with-transform").toString();
    trainer.write().overwrite().save(path);
    SparkTrainerEstimator loaded = SparkTrainerEstimator.load(path);
    assertThat(loaded.isDefined(loaded.transform())).isTrue();
    assertThat(loaded.getOrDefault(loaded.transform())).isInstanceOf(ExampleTransform.class);
    SparkTrainerEstimator plain = new SparkTrainerEstimator();
    assertThat(plain.isDefined(plain.transform())).as("no default").isFalse();
  }

  @Test
  void normalizeFitsOnTheTrainingDataAndTransformAppliesIt() throws IOException {
    // Pixel column j scaled by 10^(j % 8 - 3): the same digits with features from 1e-3 to 1e4.
    String[] scaled = new String[64];
    for (int j = 0; j < 64; j++) {
      scaled[j] = "p" + j + " * " + Math.pow(10, j % 8 - 3) + " AS s" + j;
    }
    VectorAssembler assembler =
        new VectorAssembler()
            .setInputCols(
                Arrays.stream(scaled)
                    .map(c -> c.substring(c.lastIndexOf(' ') + 1))
                    .toArray(String[]::new))
            .setOutputCol("features");
    String[] cols = Arrays.copyOf(scaled, 65);
    cols[64] = "label";
    Dataset<Row> scaledTrain = assembler.transform(train.selectExpr(cols));
    Dataset<Row> scaledTest = assembler.transform(test.selectExpr(cols));
    SparkTrainerEstimator trainer =
        new SparkTrainerEstimator()
            .setModelSpec("mlp:64")
            .setNumWorkers(2)
            .setEpochs(6)
            .setBatchSize(32)
            .setLearningRate(0.01)
            .setSeed(3)
            .setNormalize("standard")
            .setStagingDir(tmp.resolve("staging-normalized").toString());
    SparkTrainerModel model = trainer.fit(scaledTrain);
    Normalization n = model.trainedModel().normalization();
    assertThat(n.mode()).isEqualTo(Normalization.Mode.STANDARD);
    assertThat(n.statistics().count())
        .isEqualTo(scaledTrain.count()); // the training rows, nothing else
    List<Row> predicted = model.transform(scaledTest).select("label", "prediction").collectAsList();
    double accuracy =
        predicted.stream().filter(r -> r.getDouble(1) == r.getInt(0)).count()
            / (double) predicted.size();
    assertThat(accuracy).isGreaterThan(0.9);
    String path = tmp.resolve("normalized-model").toString();
    model.write().overwrite().save(path);
    List<Row> again =
        SparkTrainerModel.load(path)
            .transform(scaledTest)
            .select("label", "prediction")
            .collectAsList();
    assertThat(again).isEqualTo(predicted);
    assertThatThrownBy(() -> new SparkTrainerEstimator().setNormalize("zscore"))
        .hasMessageContaining("normalize");
  }

  /**
   * The Estimator trains the user's TorchScript module ({@code modelSpec = "torchscript:PATH"}),
   * and its model, saved and loaded as a Spark ML model, predicts with the trained module.
   */
  @Test
  void fitsATorchScriptModule() throws IOException {
    Dataset<Row> assembled =
        new VectorAssembler().setInputCols(pixelCols).setOutputCol("features").transform(train);
    String module =
        java.nio.file.Path.of("src/test/resources/torchscript/digits_bn.pt")
            .toAbsolutePath()
            .toString();
    SparkTrainerModel model =
        new SparkTrainerEstimator()
            .setModelSpec("torchscript:" + module)
            .setNumWorkers(2)
            .setEpochs(3)
            .setBatchSize(32)
            .setLearningRate(0.005)
            .setSeed(3)
            .setStagingDir(tmp.resolve("staging-ts").toString())
            .fit(assembled);
    assertThat(model.trainedModel().spec().toProperties())
        .containsEntry("type", "torchscript")
        .containsEntry("outputs", "10");
    Dataset<Row> testSet =
        new VectorAssembler().setInputCols(pixelCols).setOutputCol("features").transform(test);
    List<Row> predicted = model.transform(testSet).select("label", "prediction").collectAsList();
    long correct = predicted.stream().filter(r -> r.getInt(0) == (int) r.getDouble(1)).count();
    assertThat(correct / (double) predicted.size()).isGreaterThan(0.85);

    String path = tmp.resolve("ts-model").toString();
    model.write().overwrite().save(path);
    List<Row> again =
        SparkTrainerModel.load(path)
            .transform(testSet)
            .select("label", "prediction")
            .collectAsList();
    assertThat(again).containsExactlyElementsOf(predicted);
  }

  @Test
  void badColumnsFailBeforeTraining() {
    Dataset<Row> noVector =
        train.select(col("p0").as("features"), col("label").cast("string").as("label"));
    assertThatThrownBy(() -> new SparkTrainerEstimator().fit(noVector))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "Label column 'label' has type string: expected a number (a class index; StringIndexer turns"
                + " strings into one)");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setFeaturesCol("pixels").fit(train))
        .hasMessageStartingWith("No feature column 'pixels' in the data (columns: p0, p1");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setNumWorkers(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("numWorkers");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setRingTransport("udp"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ringTransport");
    SparkTrainerEstimator defaults = new SparkTrainerEstimator();
    assertThat(defaults.getOrDefault(defaults.ringTransport())).isEqualTo("auto");
    assertThat(defaults.getOrDefault(defaults.deterministic())).isEqualTo(true);
    assertThat(defaults.getOrDefault(defaults.accumulateSteps())).isEqualTo(1);
    assertThat(defaults.getOrDefault(defaults.rescale())).isEqualTo("batch");
    assertThat(defaults.getOrDefault(defaults.minWorkers())).isEqualTo(0);
    assertThatThrownBy(() -> new SparkTrainerEstimator().setRescale("epochs"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("rescale");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setAccumulateSteps(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("accumulateSteps");
  }

  @Test
  void useGpusReachesTheTrainersPreflight() {
    Dataset<Row> assembled =
        new VectorAssembler().setInputCols(pixelCols).setOutputCol("features").transform(train);
    // This local session has no GPU resources configured: the trainer refuses before any task
    // starts.
    assertThatThrownBy(
            () -> new SparkTrainerEstimator().setUseGpus(true).setEpochs(1).fit(assembled))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("spark.task.resource.gpu.amount");
    SparkTrainerEstimator defaults = new SparkTrainerEstimator();
    assertThat(defaults.getOrDefault(defaults.useGpus())).isEqualTo(false);
  }
}
