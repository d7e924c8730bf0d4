package dev.sparktrainer.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** Runs the command line in this JVM and captures its exit code, stdout and stderr. */
record CliRunner(int code, String out, String err) {
  static CliRunner run(Map<String, String> env, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code =
        new SparkTrainerCli(
                new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8),
                env)
            .run(args);
    return new CliRunner(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  static CliRunner run(String... args) {
    return run(Map.of(), args);
  }

  /** The error line (bad input prints exactly one line). */
  String error() {
    return err.strip();
  }
}
