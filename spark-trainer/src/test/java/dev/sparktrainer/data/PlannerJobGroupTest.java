package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Planning runs Spark jobs inside the caller's job group (a notebook or an Airflow task that
 * cancels its group cancels them too) and leaves the caller's group and description as they were.
 */
class PlannerJobGroupTest {
  private static SparkSession spark;
  private static final List<Properties> jobs = new CopyOnWriteArrayList<>();

  @TempDir static Path dir;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("planner-job-group")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate();
    spark
        .sparkContext()
        .addSparkListener(
            new SparkListener() {
              @Override
              public void onJobStart(SparkListenerJobStart e) {
                jobs.add(e.properties());
              }
            });
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  @Test
  void planningKeepsTheCallersJobGroupAndDescription() throws Exception {
    TestData.writeTFRecords(dir.resolve("d"), 4, 0, TFRecordCompression.NONE, 10, 20, 30);
    SparkContext sc = spark.sparkContext();
    sc.setJobGroup("nightly-etl", "the caller's work", true);
    try {
      jobs.clear();
      DatasetPlan plan =
          DatasetPlanner.plan(
              TestData.spec(dir.resolve("d"), 4), PipelineOptions.builder().build(), spark);
      assertThat(plan.totalRecords()).isEqualTo(60);
      sc.listenerBus().waitUntilEmpty();

      // The caller's group, description and interrupt flag are theirs again.
      assertThat(sc.getLocalProperty("spark.jobGroup.id")).isEqualTo("nightly-etl");
      assertThat(sc.getLocalProperty("spark.job.description")).isEqualTo("the caller's work");
      assertThat(sc.getLocalProperty("spark.job.interruptOnCancel")).isEqualTo("true");
      assertThat(CollectionConverters.asJava(sc.getJobTags())).isEmpty();
      // The counting job ran in the caller's group: sc.cancelJobGroup("nightly-etl") covers it.
      assertThat(jobs)
          .isNotEmpty()
          .allSatisfy(
              p -> {
                assertThat(p.getProperty("spark.jobGroup.id")).isEqualTo("nightly-etl");
                assertThat(p.getProperty("spark.job.tags", "")).contains("spark-trainer-plan");
              });
    } finally {
      sc.clearJobGroup();
    }
  }
}
