package dev.sparktrainer.collective;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * All-reduce benchmark over loopback, N processes (not a test: run by {@code bin/bench-allreduce}).
 *
 * <p>{@code AllReduceBench launch --workers 2,4 --max-bytes 67108864 --out file}: for each N,
 * launches N JVMs; each all-reduces direct buffers (FLOAT32 MEAN, the gradient case) of 4 KB to
 * max-bytes, then measures the bound: every rank streams plain bytes to its right neighbour while
 * receiving from its left, all at once, through buffers as large as the largest message. Prints a table, writes JSON lines and fits a cost model.
 */
public final class AllReduceBench {
  private static final int[] DEFAULT_WORKERS = {2, 4};

  private AllReduceBench() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("launch")) {
      launch(args);
    } else {
      child(Integer.parseInt(args[0]), Integer.parseInt(args[1]), Long.parseLong(args[2]), Integer.parseInt(args[3]));
    }
  }

  // --------------------------------------------------------------------------------------------
  // parent

  private static final class Point {
    final int workers;
    final long bytes;
    final double seconds;

    Point(int workers, long bytes, double seconds) {
      this.workers = workers;
      this.bytes = bytes;
      this.seconds = seconds;
    }
  }

  private static void launch(String[] args) throws Exception {
    int[] workers = DEFAULT_WORKERS;
    long maxBytes = 64L << 20;
    Path out = Path.of("target/bench/allreduce.jsonl");
    int chunkBytes = Communicator.DEFAULT_CHUNK_BYTES;
    for (int i = 1; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--workers":
          workers = Arrays.stream(args[i + 1].split(",")).mapToInt(Integer::parseInt).toArray();
          break;
        case "--max-bytes":
          maxBytes = Long.parseLong(args[i + 1]);
          break;
        case "--chunk-bytes":
          chunkBytes = Integer.parseInt(args[i + 1]);
          break;
        case "--out":
          out = Path.of(args[i + 1]);
          break;
        default:
          throw new IllegalArgumentException("Invalid option '" + args[i] + "': expected --workers, --max-bytes or --out");
      }
    }
    Files.createDirectories(out.toAbsolutePath().getParent());
    List<Point> points = new ArrayList<>();
    List<String> json = new ArrayList<>();
    System.out.printf(Locale.ROOT, "%7s %11s %11s %11s %11s %11s%n", "workers", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s", "bus/bound");
    double[] bounds = new double[workers.length];
    for (int w = 0; w < workers.length; w++) {
      int n = workers[w];
      List<String> lines = new ArrayList<>();
      try (ProcessRing ring =
          ProcessRing.launch(n, AllReduceBench.class,
              List.of("-Xmx1g", "-XX:+UseParallelGC", "-XX:-UsePerfData"), List.of(Long.toString(maxBytes), Integer.toString(chunkBytes)))) {
        while (true) {
          String line = ring.awaitLine(0, l -> l.startsWith("BENCH ") || l.startsWith("STREAM ") || l.equals("DONE"), Duration.ofMinutes(10));
          if (line.equals("DONE")) {
            break;
          }
          lines.add(line);
        }
        ring.awaitExit(Duration.ofSeconds(60));
      }
      double bound = 0;
      for (String l : lines) {
        if (l.startsWith("STREAM ")) {
          bound = Double.parseDouble(l.substring(7).trim());
        }
      }
      bounds[w] = bound;
      for (String l : lines) {
        if (!l.startsWith("BENCH ")) {
          continue;
        }
        String[] f = l.substring(6).trim().split(" ");
        long bytes = Long.parseLong(f[0]);
        double seconds = Double.parseDouble(f[1]);
        double algbw = bytes / seconds / 1e9;
        double busbw = algbw * 2.0 * (n - 1) / n;
        points.add(new Point(n, bytes, seconds));
        System.out.printf(Locale.ROOT, "%7d %11d %11.1f %11.3f %11.3f %10.0f%%%n", n, bytes, seconds * 1e6, algbw, busbw, 100 * busbw / bound);
        json.add(String.format(Locale.ROOT, "{\"workers\": %d, \"bytes\": %d, \"time_us\": %.1f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f}",
            n, bytes, seconds * 1e6, algbw, busbw));
      }
      System.out.printf(Locale.ROOT, "%7d   loopback bound (per-stream, all %d streams at once): %.3f GB/s%n", n, n, bound);
      json.add(String.format(Locale.ROOT, "{\"workers\": %d, \"loopback_gbps\": %.4f}", n, bound));
    }
    try (PrintWriter pw = new PrintWriter(Files.newBufferedWriter(out, StandardCharsets.UTF_8))) {
      json.forEach(pw::println);
    }
    System.out.println();
    System.out.println("JSON lines: " + out);
    costModel(points);
  }

  /**
   * Fits time = hops(N)·α + bytes(N, S)·β, weighting residuals by 1/time (relative error). For the
   * ring path (S above the small-message threshold) hops = 2(N−1) and bytes = 2(N−1)/N·S; the small
   * path does N−1 hops carrying (N−1)·S bytes.
   */
  private static void costModel(List<Point> points) {
    long small = Communicator.DEFAULT_SMALL_MESSAGE_BYTES;
    double saa = 0, sab = 0, sbb = 0, sat = 0, sbt = 0;
    for (Point p : points) {
      double[] x = features(p.workers, p.bytes, small);
      double w = 1 / (p.seconds * p.seconds);
      saa += w * x[0] * x[0];
      sab += w * x[0] * x[1];
      sbb += w * x[1] * x[1];
      sat += w * x[0] * p.seconds;
      sbt += w * x[1] * p.seconds;
    }
    double det = saa * sbb - sab * sab;
    double alpha = (sat * sbb - sbt * sab) / det;
    double beta = (saa * sbt - sab * sat) / det;
    System.out.printf(Locale.ROOT, "Cost model fitted to the measurements (relative least squares):%n");
    System.out.printf(Locale.ROOT, "  ring:  t = 2(N-1)*alpha + 2(N-1)/N*S*beta     small path (S <= %d B): t = (N-1)*alpha + (N-1)*S*beta%n", small);
    System.out.printf(Locale.ROOT, "  alpha = %.1f us per hop, beta = %.4f ns/byte (%.2f GB/s per link)%n", alpha * 1e6, beta * 1e9, 1 / beta / 1e9);
    System.out.printf(Locale.ROOT, "  %7s %11s %11s %11s %7s%n", "workers", "bytes", "measured_us", "model_us", "ratio");
    for (Point p : points) {
      double[] x = features(p.workers, p.bytes, small);
      double model = x[0] * alpha + x[1] * beta;
      System.out.printf(Locale.ROOT, "  %7d %11d %11.1f %11.1f %7.2f%n", p.workers, p.bytes, p.seconds * 1e6, model * 1e6, p.seconds / model);
    }
    double netAlpha = 30e-6;
    double netBeta = 8 / 25e9;
    System.out.println();
    System.out.printf(Locale.ROOT, "Prediction on a 25 Gbit/s network (beta = %.3f ns/byte), alpha = %.0f us per hop (a typical"
        + " datacenter TCP hop including the software stack; the measured loopback alpha above is %.1f us):%n",
        netBeta * 1e9, netAlpha * 1e6, alpha * 1e6);
    System.out.printf(Locale.ROOT, "  flat ring t = 2(N-1)*alpha + 2(N-1)/N*S*beta; hierarchical with G=8 ranks per host:"
        + " intra-host ring (measured loopback alpha/beta) + ring over H=N/8 hosts%n");
    System.out.printf(Locale.ROOT, "  %7s %11s %12s %12s %12s %9s%n", "workers", "bytes", "latency_ms", "flat_ms", "hier_ms", "hier/flat");
    long[] sizes = {4 << 10, 4 << 20, 64 << 20, 256L << 20};
    int g = 8;
    for (int n : new int[] {64, 256, 1024}) {
      for (long s : sizes) {
        double latency = 2.0 * (n - 1) * netAlpha;
        double flat = latency + 2.0 * (n - 1) / n * s * netBeta;
        int h = n / g;
        double hier = 2.0 * (g - 1) * alpha + 2.0 * (g - 1) / g * s * beta + 2.0 * (h - 1) * netAlpha + 2.0 * (h - 1) / h * s * netBeta;
        System.out.printf(Locale.ROOT, "  %7d %11d %12.2f %12.2f %12.2f %9.2f%n", n, s, latency * 1e3, flat * 1e3, hier * 1e3, hier / flat);
      }
      // hierarchical pays while the saved inter-host hops outweigh the intra-host passes
      int h = n / g;
      double saved = 2.0 * (n - h) * netAlpha - 2.0 * (g - 1) * alpha;
      double perByte = 2.0 * (g - 1) / g * beta + (2.0 * (h - 1) / h - 2.0 * (n - 1) / n) * netBeta;
      System.out.printf(Locale.ROOT, "  N=%d: latency term equals bandwidth term at S = %.1f MB; hierarchical is faster for S < %.0f MB%n",
          n, 2.0 * (n - 1) * netAlpha / (2.0 * (n - 1) / n * netBeta) / 1e6, saved / perByte / 1e6);
    }
  }

  private static double[] features(int n, long bytes, long small) {
    if (bytes <= small) {
      return new double[] {n - 1, (double) (n - 1) * bytes};
    }
    return new double[] {2.0 * (n - 1), 2.0 * (n - 1) / n * bytes};
  }

  // --------------------------------------------------------------------------------------------
  // child

  private static void child(int rank, int n, long maxBytes, int chunkBytes) throws Exception {
    JobSecret secret = JobSecret.fromHex(System.getenv(ProcessRing.SECRET_ENV));
    RingListener listener = RingListener.bind("127.0.0.1");
    System.out.println("ADDR " + listener.address());
    System.out.flush();
    String line = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
    List<String> peers = Arrays.asList(line.substring("PEERS ".length()).split(","));
    try (Communicator c = Communicator.builder().setRank(rank).setPeers(peers).setSecret(secret).setListener(listener)
        .optOperationTimeout(Duration.ofSeconds(60)).optChunkBytes(chunkBytes).build()) {
      ByteBuffer buf = ByteBuffer.allocateDirect((int) maxBytes).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < maxBytes / 4; i++) {
        buf.putFloat(4 * i, 1.0f + (i % 7));
      }
      for (long bytes = 4096; bytes <= maxBytes; bytes *= 4) {
        int iters = bytes <= (64 << 10) ? 2000 : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 30 : 10;
        int warmup = bytes <= (1 << 20) ? iters : 3;
        ByteBuffer slice = buf.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        slice.limit((int) bytes);
        long[] times = new long[iters];
        c.barrier();
        for (int it = 0; it < warmup; it++) {
          c.allReduce(slice, ElementType.FLOAT32, ReduceOp.MEAN);
        }
        c.barrier();
        for (int it = 0; it < iters; it++) {
          long t0 = System.nanoTime();
          c.allReduce(slice, ElementType.FLOAT32, ReduceOp.MEAN);
          times[it] = System.nanoTime() - t0;
        }
        // The operation's time is the slowest rank's; report the median over iterations.
        long[] slowest = maxOverRanks(c, times);
        Arrays.sort(slowest);
        if (rank == 0) {
          System.out.printf(Locale.ROOT, "BENCH %d %.9f%n", bytes, slowest[iters / 2] / 1e9);
          System.out.flush();
        }
      }
      double bound = streamBound(c, 512L << 20, (int) maxBytes);
      if (rank == 0) {
        System.out.printf(Locale.ROOT, "STREAM %.4f%n", bound);
        System.out.println("DONE");
        System.out.flush();
      }
    }
  }

  private static long[] maxOverRanks(Communicator c, long[] times) {
    ByteBuffer mine = ByteBuffer.allocate(times.length * 8).order(ByteOrder.LITTLE_ENDIAN);
    mine.asLongBuffer().put(times);
    long[] max = new long[times.length];
    for (byte[] other : c.allGather(mine.array())) {
      ByteBuffer b = ByteBuffer.wrap(other).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < max.length; i++) {
        max[i] = Math.max(max[i], b.getLong(8 * i));
      }
    }
    return max;
  }

  /**
   * Every rank streams {@code bytes} plain bytes to its right neighbour while receiving as many from
   * its left, all at once, over the ring's own sockets (no frames, no reduction). Returns the
   * per-stream throughput in GB/s: bytes over the time the slowest rank needed to finish both.
   */
  private static double streamBound(Communicator c, long bytes, int bufferBytes) throws Exception {
    if (c.size() == 1) {
      return Double.NaN;
    }
    int chunk = 1 << 20;
    // Stream through buffers as large as the largest message, so both sides of the comparison
    // touch the same amount of memory (a 1 MB buffer would stay in cache).
    int span = Math.max(chunk, bufferBytes / chunk * chunk);
    ByteBuffer out = ByteBuffer.allocateDirect(span);
    ByteBuffer in = ByteBuffer.allocateDirect(span);
    // warm up the socket buffers and the code path once
    for (int pass = 0; pass < 2; pass++) {
      long total = pass == 0 ? bytes / 8 : bytes;
      c.barrier();
      long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
      Throwable[] writerError = new Throwable[1];
      long t0 = System.nanoTime();
      Thread writer =
          new Thread(
              () -> {
                try {
                  for (long sent = 0; sent < total; sent += chunk) {
                    int at = (int) (sent % span);
                    out.clear().position(at).limit(at + chunk);
                    c.rightLink().writeFully(out, null, deadline);
                  }
                } catch (Throwable e) {
                  writerError[0] = e;
                }
              },
              "bench-stream-writer");
      writer.start();
      for (long got = 0; got < total; got += chunk) {
        int at = (int) (got % span);
        in.clear().position(at).limit(at + chunk);
        c.leftLink().readFully(in, deadline);
      }
      writer.join();
      long elapsed = System.nanoTime() - t0;
      if (writerError[0] != null) {
        throw new IllegalStateException("streaming failed", writerError[0]);
      }
      if (pass == 1) {
        long[] slowest = maxOverRanks(c, new long[] {elapsed});
        return total / (slowest[0] / 1e9) / 1e9;
      }
    }
    throw new AssertionError();
  }
}
