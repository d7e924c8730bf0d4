package dev.sparktrainer.train;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/** A child process, its output pumped into a queue and its log file; stopped by process id. */
public final class BenchChild {
  final Process process;
  public final Path log;
  private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
  private final List<String> transcript = Collections.synchronizedList(new ArrayList<>());
  private final Thread pump;

  private BenchChild(Process process, Path log) {
    this.process = process;
    this.log = log;
    this.pump = new Thread(this::pump, "bench-pump-" + process.pid());
    pump.setDaemon(true);
    pump.start();
  }

  public static BenchChild start(List<String> cmd, Map<String, String> env, Path log)
      throws IOException {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().putAll(env);
    Process p = pb.start();
    LIVE.add(p);
    return new BenchChild(p, log);
  }

  private void pump() {
    try (BufferedReader in =
            new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        BufferedWriter w = Files.newBufferedWriter(log, StandardCharsets.UTF_8)) {
      for (String line; (line = in.readLine()) != null; ) {
        transcript.add(line);
        lines.add(line);
        w.write(line);
        w.newLine();
        w.flush();
      }
    } catch (IOException e) {
      transcript.add("(output pump ended: " + e + ")");
    }
  }

  /** Writes one line to the child's stdin. */
  public void send(String line) throws IOException {
    OutputStream in = process.getOutputStream();
    in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
    in.flush();
  }

  /** The next output line that matches; fails at the deadline or when the child has exited. */
  public String awaitLine(Predicate<String> match, long deadline) throws InterruptedException {
    while (true) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        throw new IllegalStateException(
            "pid " + process.pid() + ": no expected line before the deadline (log " + log + ")");
      }
      String line =
          lines.poll(Math.min(left, TimeUnit.MILLISECONDS.toNanos(200)), TimeUnit.NANOSECONDS);
      if (line == null) {
        if (!process.isAlive()) {
          pump.join(2000);
          line = lines.poll();
          if (line == null) {
            throw new IllegalStateException(
                "pid "
                    + process.pid()
                    + " exited with "
                    + process.exitValue()
                    + " before the expected line (log "
                    + log
                    + ")");
          }
        } else {
          continue;
        }
      }
      if (match.test(line)) {
        return line;
      }
    }
  }

  public String tail(int n) {
    synchronized (transcript) {
      return String.join(
          "\n", transcript.subList(Math.max(0, transcript.size() - n), transcript.size()));
    }
  }

  /**
   * Closes its stdin (a child exits when it sees the end of its stdin), then stops it by process
   * id: TERM, and KILL after 10 s.
   */
  public void stop() {
    try {
      process.getOutputStream().close();
    } catch (IOException e) {
      System.err.println("closing the stdin of pid " + process.pid() + ": " + e);
    }
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly();
          process.waitFor(10, TimeUnit.SECONDS);
        }
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    } finally {
      LIVE.remove(process);
    }
    try {
      pump.join(2000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Child processes alive now: the shutdown hook stops them (by process id) if this JVM ends. */
  private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(BenchChild::stopAll, "bench-stop-children"));
  }

  /** The shutdown hook: every child still alive, by process id. */
  private static void stopAll() {
    for (Process p : LIVE) {
      if (p.isAlive()) {
        System.err.println("stopping child pid " + p.pid());
        p.destroyForcibly();
      }
    }
  }
}
