package dev.sparktrainer.it.faults;

import dev.sparktrainer.tfrecord.spark.DroppedRecordsMetric;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.metric.SQLMetric;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Reads the {@code tfrecord} scan's task metric the way the Spark UI shows it: from the executed
 * plan.
 */
public final class ScanMetrics {
  private ScanMetrics() {}

  /**
   * The {@code droppedMalformedRecords} of every tfrecord scan in {@code df}'s executed plan,
   * summed. Call after an action ({@code collect}, {@code count}) ran on this very Dataset.
   */
  public static long droppedMalformedRecords(Dataset<?> df) {
    return sum(df.queryExecution().executedPlan());
  }

  private static long sum(SparkPlan plan) {
    if (plan instanceof AdaptiveSparkPlanExec) {
      return sum(((AdaptiveSparkPlanExec) plan).executedPlan());
    }
    if (plan instanceof QueryStageExec) {
      return sum(((QueryStageExec) plan).plan());
    }
    long total = 0;
    scala.Option<SQLMetric> m = plan.metrics().get(DroppedRecordsMetric.NAME);
    if (m.isDefined()) {
      total += m.get().value();
    }
    for (SparkPlan child : CollectionConverters.asJava(plan.children())) {
      total += sum(child);
    }
    return total;
  }
}
