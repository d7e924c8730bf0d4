package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.parseFlatJson;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The PyTorch anchor of bin/bench-train and bin/bench-scaling: one run of bin/torch-train.py, in
 * one process or as {@code world} DDP ranks over gloo on loopback, each started and stopped by
 * process id; returns rank 0's JSON line.
 */
final class TorchTrain {
  private TorchTrain() {}

  /**
   * @param logPrefix each rank logs to {@code logs/<logPrefix>-rank<r>.log}
   */
  static Map<String, Object> run(
      String python,
      String script,
      Path data,
      String model,
      int batch,
      int steps,
      int epochs,
      int threads,
      int world,
      Path logs,
      String logPrefix,
      Duration timeout)
      throws Exception {
    Files.createDirectories(logs);
    int port = world > 1 ? freePort() : 0;
    List<BenchChild> ranks = new ArrayList<>();
    long deadline = System.nanoTime() + timeout.toNanos();
    try {
      for (int rank = 0; rank < world; rank++) {
        List<String> cmd =
            List.of(
                python,
                script,
                "--data",
                data.toString(),
                "--model",
                model,
                "--batch",
                Integer.toString(batch),
                "--steps",
                Integer.toString(steps),
                "--epochs",
                Integer.toString(epochs),
                "--threads",
                Integer.toString(threads),
                "--world",
                Integer.toString(world),
                "--rank",
                Integer.toString(rank),
                "--master-port",
                Integer.toString(port));
        ranks.add(
            BenchChild.start(cmd, Map.of(), logs.resolve(logPrefix + "-rank" + rank + ".log")));
      }
      Map<String, Object> j =
          parseFlatJson(ranks.get(0).awaitLine(l -> l.startsWith("{\"anchor\""), deadline));
      for (BenchChild ch : ranks) {
        if (!ch.process.waitFor(60, TimeUnit.SECONDS) || ch.process.exitValue() != 0) {
          throw new IllegalStateException(
              "PyTorch rank pid "
                  + ch.process.pid()
                  + " did not exit cleanly (log "
                  + ch.log
                  + "):\n"
                  + ch.tail(20));
        }
      }
      return j;
    } catch (Exception e) {
      for (BenchChild ch : ranks) {
        System.err.println("PyTorch run failed; " + ch.log + " ends:\n" + ch.tail(20));
      }
      throw e;
    } finally {
      for (BenchChild ch : ranks) {
        ch.stop();
      }
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }
}
