package dev.sparktrainer.ml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.train.TestModels;
import dev.sparktrainer.train.TrainedModel;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The executor's model cache never closes a model a task is still running: with room for one model,
 * tasks of two models take turns, concurrently, and every output is right.
 */
class BatchInferenceCacheTest {
  private static SparkSession spark;
  private static Dataset<Row> df;
  private static List<Row> rows;
  private static final TrainedModel A =
      TestModels.random(MlpSpec.of(8, 3, 16), LossSpec.SOFTMAX_CROSS_ENTROPY, 1);
  private static final TrainedModel B =
      TestModels.random(MlpSpec.of(8, 3, 16), LossSpec.SOFTMAX_CROSS_ENTROPY, 2);

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("batch-inference-cache")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate();
    StructType schema = new StructType().add("x", DataTypes.createArrayType(DataTypes.DoubleType));
    rows = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      List<Double> x = new ArrayList<>();
      for (int k = 0; k < 8; k++) {
        x.add(Math.sin(i * 8 + k));
      }
      rows.add(RowFactory.create(x));
    }
    df = spark.createDataFrame(rows, schema);
  }

  @AfterAll
  static void stop() {
    BatchInference.cacheSize = 4;
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  @AfterEach
  void resetCache() {
    BatchInference.cacheSize = 4;
  }

  private static BatchInference job(TrainedModel m) {
    return BatchInference.prepare(df, m, List.of("x"), 4);
  }

  /** The raw outputs of every row. */
  private static List<List<Double>> outputs(Iterator<Row> it) {
    List<List<Double>> out = new ArrayList<>();
    while (it.hasNext()) {
      Row r = it.next();
      Vector raw = r.getAs(r.size() - 1);
      List<Double> v = new ArrayList<>();
      for (double d : raw.toArray()) {
        v.add(d);
      }
      out.add(v);
    }
    return out;
  }

  @Test
  void aModelEvictedWhileATaskRunsItStaysOpenUntilTheTaskEnds() throws Exception {
    BatchInference.cacheSize = 1;
    List<List<Double>> expectedA = outputs(job(A).predict(rows.iterator(), true, true));
    List<List<Double>> expectedB = outputs(job(B).predict(rows.iterator(), true, true));
    assertThat(expectedA).hasSize(40).isNotEqualTo(expectedB);

    // A task of A has run its first batch when a task of B loads B, which evicts A.
    Iterator<Row> a = job(A).predict(rows.iterator(), true, true);
    assertThat(a.hasNext()).isTrue();
    Iterator<Row> b = job(B).predict(rows.iterator(), true, true);
    List<List<Double>> gotA = new ArrayList<>();
    assertThatCode(() -> gotA.addAll(outputs(a)))
        .as("A's task goes on after the eviction")
        .doesNotThrowAnyException();
    assertThat(gotA).isEqualTo(expectedA);
    assertThat(outputs(b)).isEqualTo(expectedB);

    // Tasks of both models, four at a time, a cache of one: no model closed under a running task.
    long loadsBefore = BatchInference.MODEL_LOADS.get();
    long closesBefore = BatchInference.MODEL_CLOSES.get();
    BatchInference[] jobs = {job(A), job(B)};
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<?>> tasks = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        int first = t;
        tasks.add(
            pool.submit(
                () -> {
                  for (int i = 0; i < 25; i++) {
                    int which = (first + i) % 2;
                    assertThat(outputs(jobs[which].predict(rows.iterator(), true, true)))
                        .isEqualTo(which == 0 ? expectedA : expectedB);
                  }
                  return null;
                }));
      }
      for (Future<?> f : tasks) {
        f.get(120, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
      assertThat(pool.awaitTermination(60, TimeUnit.SECONDS)).isTrue();
    }
    long loads = BatchInference.MODEL_LOADS.get() - loadsBefore;
    long closes = BatchInference.MODEL_CLOSES.get() - closesBefore;
    assertThat(loads).as("models took turns in the cache").isGreaterThan(2);
    // Every evicted model was closed once its last task ended; one stays cached.
    assertThat(loads - closes).isBetween(0L, 1L);
  }
}
