package dev.sparktrainer.it.deploy;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A JVM the test starts (spark-submit, a notebook's REPL): output to a file, waited for with a
 * deadline, and always stopped by its own process handle ({@link #close}).
 */
public final class ChildJvm implements AutoCloseable {
  private final Process process;
  private final Path log;
  private final List<String> command;

  private ChildJvm(Process process, Path log, List<String> command) {
    this.process = process;
    this.log = log;
    this.command = command;
  }

  /** {@code java OPTIONS -cp CLASSPATH MAIN ARGS}, with this JVM's java. */
  public static List<String> java(
      List<String> options, List<String> classPath, String main, List<String> args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(options);
    cmd.add("-cp");
    cmd.add(String.join(File.pathSeparator, classPath));
    cmd.add(main);
    cmd.addAll(args);
    return cmd;
  }

  /**
   * Starts {@code command} in {@code dir} with extra environment; stdout and stderr go to {@code
   * log}.
   */
  public static ChildJvm start(List<String> command, Map<String, String> env, Path dir, Path log)
      throws IOException {
    ProcessBuilder pb =
        new ProcessBuilder(command)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile());
    pb.environment().putAll(env);
    return new ChildJvm(pb.start(), log, command);
  }

  /** Waits for the exit; false (the process still running) after {@code timeout}. */
  public boolean waitFor(Duration timeout) throws InterruptedException {
    return process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  /**
   * Polls {@code condition} until it holds (true), the process exits or the deadline passes
   * (false).
   */
  public boolean waitUntil(BooleanSupplier condition, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (condition.getAsBoolean()) {
        return true;
      }
      if (!process.isAlive()) {
        return condition.getAsBoolean();
      }
      process.waitFor(100, TimeUnit.MILLISECONDS); // returns early when the process exits
    }
    return condition.getAsBoolean();
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  public int exitValue() {
    return process.exitValue();
  }

  public long pid() {
    return process.pid();
  }

  public String output() throws IOException {
    return Files.readString(log, StandardCharsets.UTF_8);
  }

  /** The command and the output's last lines, for assertion messages. */
  public String describe() {
    String out;
    try {
      String all = output();
      out = all.length() > 12_000 ? "...\n" + all.substring(all.length() - 12_000) : all;
    } catch (IOException e) {
      out = "(no output: " + e + ")";
    }
    String cmd = String.join(" ", command);
    return "command: "
        + (cmd.length() > 2000 ? cmd.substring(0, 2000) + "..." : cmd)
        + "\noutput ("
        + log
        + "):\n"
        + out;
  }

  /** Kills the process (SIGKILL, by its pid) if it still runs, and waits for it to go. */
  public void kill() throws InterruptedException {
    if (process.isAlive()) {
      process.destroyForcibly();
      process.waitFor(30, TimeUnit.SECONDS);
    }
  }

  @Override
  public void close() throws InterruptedException {
    kill();
  }
}
