package dev.sparktrainer.cli;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;

/**
 * What a command gets: the output streams, the environment, and the Spark session (started lazily).
 */
final class CliContext {
  final PrintStream out;
  final PrintStream err;
  final Map<String, String> env;
  private final Supplier<SparkSession> sessions;
  private SparkSession spark;

  /** Sessions asked for in this JVM (tests check that bad input never gets that far). */
  static final AtomicInteger SESSIONS = new AtomicInteger();

  private boolean ownSession;

  CliContext(
      PrintStream out, PrintStream err, Map<String, String> env, Supplier<SparkSession> sessions) {
    this.out = out;
    this.err = err;
    this.env = env;
    this.sessions = sessions;
  }

  /** The session: started on first use, after the command's own checks passed. */
  SparkSession spark() {
    if (spark == null) {
      // A session that already runs in this JVM (a notebook, a test) is used, and left running.
      ownSession =
          SparkSession.getActiveSession().isEmpty() && SparkSession.getDefaultSession().isEmpty();
      SESSIONS.incrementAndGet();
      spark = sessions.get();
    }
    return spark;
  }

  /** Whether this command started the session (and so stops it when done). */
  boolean ownsSession() {
    return spark != null && ownSession;
  }

  Configuration hadoopConf() {
    return spark != null ? spark.sparkContext().hadoopConfiguration() : new Configuration();
  }

  static String join(List<String> items) {
    return String.join(", ", items);
  }
}
