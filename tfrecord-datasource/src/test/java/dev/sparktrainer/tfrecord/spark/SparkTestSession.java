package dev.sparktrainer.tfrecord.spark;

import org.apache.spark.sql.SparkSession;

/** One local SparkSession per test JVM: UI off, few shuffle partitions. */
final class SparkTestSession {
  private static SparkSession session;

  private SparkTestSession() {}

  static synchronized SparkSession get() {
    if (session == null) {
      session =
          SparkSession.builder()
              .master("local[2]")
              .appName("tfrecord-tests")
              .config("spark.ui.enabled", "false")
              .config("spark.sql.shuffle.partitions", "2")
              .config("spark.driver.bindAddress", "127.0.0.1")
              .config("spark.driver.host", "127.0.0.1")
              .getOrCreate();
      Runtime.getRuntime().addShutdownHook(new Thread(session::stop));
    }
    return session;
  }
}
