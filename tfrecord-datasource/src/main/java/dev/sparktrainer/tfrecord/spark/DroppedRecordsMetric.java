package dev.sparktrainer.tfrecord.spark;

import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;

/**
 * The scan's task metric of records dropped under DROPMALFORMED (shown in the SQL tab of the Spark
 * UI as "dropped malformed records").
 */
public final class DroppedRecordsMetric extends CustomSumMetric {
  public static final String NAME = "droppedMalformedRecords";

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public String description() {
    return "dropped malformed records";
  }

  static CustomTaskMetric value(long v) {
    return new CustomTaskMetric() {
      @Override
      public String name() {
        return NAME;
      }

      @Override
      public long value() {
        return v;
      }
    };
  }
}
