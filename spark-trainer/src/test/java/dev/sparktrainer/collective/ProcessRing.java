package dev.sparktrainer.collective;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * N ranks as separate JVMs on this machine. Each child binds a {@link RingListener}, prints {@code
 * ADDR host:port}; the parent answers every child with {@code PEERS a,b,...} on its stdin (the
 * rendezvous, as BarrierTaskContext.allGather does in Spark). The job secret travels in the
 * environment, never on the command line. Close destroys every child.
 */
final class ProcessRing implements AutoCloseable {
  static final String SECRET_ENV = "SPARK_TRAINER_RING_SECRET";

  final List<Process> processes = new ArrayList<>();
  private final List<BlockingQueue<String>> lines = new ArrayList<>();
  private final List<List<String>> transcripts = new ArrayList<>();

  /** Starts {@code n} children running {@code mainClass rank n args...}. */
  static ProcessRing launch(int n, Class<?> mainClass, List<String> jvmArgs, List<String> args)
      throws IOException {
    ProcessRing ring = new ProcessRing();
    JobSecret secret = JobSecret.generate();
    try {
      for (int r = 0; r < n; r++) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(jvmArgs);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(mainClass.getName());
        cmd.add(Integer.toString(r));
        cmd.add(Integer.toString(n));
        cmd.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put(SECRET_ENV, secret.toHex());
        Process p = pb.start();
        ring.processes.add(p);
        BlockingQueue<String> queue = new LinkedBlockingQueue<>();
        List<String> transcript = Collections.synchronizedList(new ArrayList<>());
        ring.lines.add(queue);
        ring.transcripts.add(transcript);
        Thread pump =
            new Thread(
                () -> {
                  try (BufferedReader in =
                      new BufferedReader(
                          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = in.readLine()) != null; ) {
                      transcript.add(line);
                      queue.add(line);
                    }
                  } catch (IOException ignored) {
                    // the child is gone
                  }
                },
                "test-pump-" + r);
        pump.setDaemon(true);
        pump.start();
      }
      List<String> peers = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        peers.add(
            ring.awaitLine(r, l -> l.startsWith("ADDR "), Duration.ofSeconds(60)).substring(5));
      }
      byte[] answer = ("PEERS " + String.join(",", peers) + "\n").getBytes(StandardCharsets.UTF_8);
      for (Process p : ring.processes) {
        OutputStream in = p.getOutputStream();
        in.write(answer);
        in.flush();
      }
      return ring;
    } catch (IOException | RuntimeException | Error e) {
      ring.close();
      throw e;
    }
  }

  /**
   * The next line of rank {@code r} matching {@code match}; fails at the deadline or if the child
   * exits.
   */
  String awaitLine(int r, Predicate<String> match, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    try {
      while (true) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new AssertionError(
              "rank " + r + ": no expected line within " + timeout + "; output:\n" + transcript(r));
        }
        String line =
            lines
                .get(r)
                .poll(Math.min(left, TimeUnit.MILLISECONDS.toNanos(200)), TimeUnit.NANOSECONDS);
        if (line == null) {
          if (!processes.get(r).isAlive() && lines.get(r).isEmpty()) {
            // drain what the pump may still deliver
            line = lines.get(r).poll(500, TimeUnit.MILLISECONDS);
            if (line == null) {
              throw new AssertionError(
                  "rank "
                      + r
                      + " exited ("
                      + processes.get(r).exitValue()
                      + "); output:\n"
                      + transcript(r));
            }
          } else {
            continue;
          }
        }
        if (match.test(line)) {
          return line;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  String transcript(int r) {
    synchronized (transcripts.get(r)) {
      return String.join("\n", transcripts.get(r));
    }
  }

  /** Waits for every child to exit, up to {@code timeout}; returns exit codes. */
  int[] awaitExit(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    int[] codes = new int[processes.size()];
    for (int r = 0; r < codes.length; r++) {
      Process p = processes.get(r);
      if (!p.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
        throw new AssertionError(
            "rank " + r + " did not exit within " + timeout + "; output:\n" + transcript(r));
      }
      codes[r] = p.exitValue();
    }
    return codes;
  }

  @Override
  public void close() {
    for (Process p : processes) {
      p.destroyForcibly();
    }
    for (Process p : processes) {
      try {
        p.waitFor(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
