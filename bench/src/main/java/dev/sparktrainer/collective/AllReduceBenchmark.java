package dev.sparktrainer.collective;

import java.io.BufferedReader;
import java.io.IOException;
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
import java.util.concurrent.Semaphore;

/**
 * All-reduce benchmark over loopback, N processes (not a test: run by {@code bin/bench-allreduce}).
 *
 * <p>Why this file is long: parent and child in one class. The parent ({@code launch}: a {@code
 * ProcessRing} per worker count and transport, the table, JSON lines, the fitted alpha-beta cost
 * model) and the child (the timed all-reduce loop, paired from 1 MB with a plain stream, and the
 * {@code Streamer} bound) speak the BENCH/STREAM/DONE lines and share the stream constants; both
 * need this package ({@code ProcessRing} and {@code Communicator.leftLink()/rightLink()} are
 * package-private). The cost model ({@code costModel}) could move out if it grows.
 *
 * <p>{@code AllReduceBenchmark launch --workers 2,4 --max-bytes 67108864 [--chunk-bytes B] --out
 * file}: for each N, launches N JVMs; each all-reduces direct buffers (FLOAT32 MEAN, the gradient
 * case) of 4 KB to max-bytes. The bound is what the same sockets carry when every rank streams
 * plain bytes to its right neighbour while receiving from its left, all at once. On a shared
 * machine it drifts by 2x within a minute, so from 1 MB up every timed all-reduce is paired with a
 * stream of the bytes it sends, right after it, and bus/bound is the median of the per-pair ratios;
 * the long-stream bound (512 MB per rank, median of three measurements spread over the run) is
 * printed too and is the reference of the smaller sizes. Prints a table, writes JSON lines and fits
 * a cost model.
 */
public final class AllReduceBenchmark {
  private static final int[] DEFAULT_WORKERS = {2, 4};

  private AllReduceBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("launch")) {
      launch(args);
    } else {
      child(
          Integer.parseInt(args[0]),
          Integer.parseInt(args[1]),
          Long.parseLong(args[2]),
          Long.parseLong(args[3]),
          Integer.parseInt(args[4]),
          args[5]);
    }
  }

  // --------------------------------------------------------------------------------------------
  // parent

  private static final class Point {
    final int workers;
    final String transport;
    final long bytes;
    final double seconds;

    Point(int workers, String transport, long bytes, double seconds) {
      this.workers = workers;
      this.transport = transport;
      this.bytes = bytes;
      this.seconds = seconds;
    }
  }

  /** {@code --transport} values: what the ring between the rank processes uses. */
  private static final List<String> TRANSPORTS = List.of("tcp", "shm");

  private static void launch(String[] args) throws Exception {
    int[] workers = DEFAULT_WORKERS;
    long maxBytes = 64L << 20;
    long minBytes = 4096;
    Path out = Path.of("target/bench/allreduce.jsonl");
    int chunkBytes = Communicator.DEFAULT_CHUNK_BYTES;
    List<String> transports = TRANSPORTS;
    for (int i = 1; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--workers":
          workers = Arrays.stream(args[i + 1].split(",")).mapToInt(Integer::parseInt).toArray();
          break;
        case "--max-bytes":
          maxBytes = Long.parseLong(args[i + 1]);
          break;
        case "--min-bytes":
          minBytes = Long.parseLong(args[i + 1]);
          break;
        case "--chunk-bytes":
          chunkBytes = Integer.parseInt(args[i + 1]);
          break;
        case "--out":
          out = Path.of(args[i + 1]);
          break;
        case "--transport":
          transports = Arrays.asList(args[i + 1].split(","));
          for (String t : transports) {
            if (!TRANSPORTS.contains(t)) {
              throw new IllegalArgumentException(
                  "Invalid --transport '" + t + "': expected tcp, shm or both (tcp,shm)");
            }
          }
          break;
        default:
          throw new IllegalArgumentException(
              "Invalid option '"
                  + args[i]
                  + "': expected --workers, --min-bytes, --max-bytes, --chunk-bytes, --transport"
                  + " or --out");
      }
    }
    if (maxBytes < 4096 || maxBytes > (1L << 30)) {
      throw new IllegalArgumentException(
          "Invalid --max-bytes " + maxBytes + ": expected 4096..1073741824");
    }
    if (minBytes < 4 || minBytes % 4 != 0 || minBytes > maxBytes) {
      throw new IllegalArgumentException(
          "Invalid --min-bytes " + minBytes + ": expected a multiple of 4 in 4.." + maxBytes);
    }
    Files.createDirectories(out.toAbsolutePath().getParent());
    List<Point> points = new ArrayList<>();
    List<String> json = new ArrayList<>();
    System.out.printf(
        Locale.ROOT,
        "%7s %9s %11s %11s %11s %11s %11s %11s%n",
        "workers",
        "transport",
        "bytes",
        "time_us",
        "algbw_GB/s",
        "busbw_GB/s",
        "bound_GB/s",
        "bus/bound");
    for (int n : workers) {
      for (String transport : transports) {
        List<String> lines = new ArrayList<>();
        try (ProcessRing ring =
            ProcessRing.launch(
                n,
                AllReduceBenchmark.class,
                childJvmArgs(),
                List.of(
                    Long.toString(minBytes),
                    Long.toString(maxBytes),
                    Integer.toString(chunkBytes),
                    transport))) {
          while (true) {
            String line =
                ring.awaitLine(
                    0,
                    l -> l.startsWith("BENCH ") || l.startsWith("STREAM ") || l.equals("DONE"),
                    Duration.ofMinutes(10));
            if (line.equals("DONE")) {
              break;
            }
            lines.add(line);
          }
          ring.awaitExit(Duration.ofSeconds(60));
        }
        double bound = Double.NaN;
        for (String l : lines) {
          if (l.startsWith("STREAM ")) {
            bound = Double.parseDouble(l.substring(7).trim());
          }
        }
        for (String l : lines) {
          if (!l.startsWith("BENCH ")) {
            continue;
          }
          // BENCH bytes seconds [paired-stream GB/s, median of the per-iteration busbw/stream
          // ratios]
          String[] f = l.substring(6).trim().split(" ");
          long bytes = Long.parseLong(f[0]);
          double seconds = Double.parseDouble(f[1]);
          boolean paired = f.length > 2;
          double rowBound = paired ? Double.parseDouble(f[2]) : bound;
          double ratio = n == 1 ? Double.NaN : paired ? Double.parseDouble(f[3]) : 0;
          double algbw = bytes / seconds / 1e9;
          double busbw = algbw * 2.0 * (n - 1) / n;
          if (!paired) {
            ratio = busbw / bound;
          }
          points.add(new Point(n, transport, bytes, seconds));
          System.out.printf(
              Locale.ROOT,
              "%7d %9s %11d %11.1f %11.3f %11.3f %10.3f%s %10.0f%%%n",
              n,
              transport,
              bytes,
              seconds * 1e6,
              algbw,
              busbw,
              rowBound,
              paired ? "*" : " ",
              100 * ratio);
          json.add(
              String.format(
                  Locale.ROOT,
                  "{\"workers\": %d, \"transport\": \"%s\", \"bytes\": %d, \"time_us\": %.1f,"
                      + " \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"bound_gbps\": %.4f, \"bound_paired\": %s,"
                      + " \"bus_over_bound\": %.4f}",
                  n,
                  transport,
                  bytes,
                  seconds * 1e6,
                  algbw,
                  busbw,
                  rowBound,
                  paired,
                  ratio));
        }
        System.out.printf(
            Locale.ROOT,
            "%7d %9s bound (per-stream over the ring's links, all %d streams at once, %d MB each,"
                + " median of %d): %.3f GB/s%n",
            n,
            transport,
            n,
            STREAM_BYTES >> 20,
            STREAM_REPEATS,
            bound);
        json.add(
            String.format(
                Locale.ROOT,
                "{\"workers\": %d, \"transport\": \"%s\", \"loopback_gbps\": %.4f}",
                n,
                transport,
                bound));
      }
    }
    System.out.printf(
        Locale.ROOT,
        "%s%n%s%n",
        "* bound measured in pairs: every timed all-reduce is followed by the same ranks streaming the bytes it sends"
            + " (2(N-1)/N x size) as plain bytes,",
        "  all at once; bus/bound is the median of the per-pair ratios. Other rows: the loopback bound line below them.");
    try (PrintWriter pw = new PrintWriter(Files.newBufferedWriter(out, StandardCharsets.UTF_8))) {
      json.forEach(pw::println);
    }
    System.out.println();
    System.out.println("JSON lines: " + out);
    for (String transport : transports) {
      List<Point> mine = new ArrayList<>();
      for (Point p : points) {
        if (p.transport.equals(transport)) {
          mine.add(p);
        }
      }
      System.out.println();
      System.out.println("Transport " + transport + ":");
      costModel(mine);
    }
  }

  private static List<String> childJvmArgs() {
    return List.of("-Xmx1g", "-XX:+UseParallelGC", "-XX:-UsePerfData");
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
    System.out.printf(
        Locale.ROOT, "Cost model fitted to the measurements (relative least squares):%n");
    System.out.printf(
        Locale.ROOT,
        "  ring:  t = 2(N-1)*alpha + 2(N-1)/N*S*beta     small path (S <= %d B): t = (N-1)*alpha + (N-1)*S*beta%n",
        small);
    System.out.printf(
        Locale.ROOT,
        "  alpha = %.1f us per hop, beta = %.4f ns/byte (%.2f GB/s per link)%n",
        alpha * 1e6,
        beta * 1e9,
        1 / beta / 1e9);
    System.out.printf(
        Locale.ROOT,
        "  %7s %11s %11s %11s %7s%n",
        "workers",
        "bytes",
        "measured_us",
        "model_us",
        "ratio");
    for (Point p : points) {
      double[] x = features(p.workers, p.bytes, small);
      double model = x[0] * alpha + x[1] * beta;
      System.out.printf(
          Locale.ROOT,
          "  %7d %11d %11.1f %11.1f %7.2f%n",
          p.workers,
          p.bytes,
          p.seconds * 1e6,
          model * 1e6,
          p.seconds / model);
    }
    double netAlpha = 30e-6;
    double netBeta = 8 / 25e9;
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "Prediction on a 25 Gbit/s network (beta = %.3f ns/byte), alpha = %.0f us per hop (a typical"
            + " datacenter TCP hop including the software stack; the measured loopback alpha above is %.1f us):%n",
        netBeta * 1e9,
        netAlpha * 1e6,
        alpha * 1e6);
    System.out.printf(
        Locale.ROOT,
        "  flat ring t = 2(N-1)*alpha + 2(N-1)/N*S*beta; hierarchical with G=8 ranks per host:"
            + " intra-host ring (measured loopback alpha/beta) + ring over H=N/8 hosts%n");
    System.out.printf(
        Locale.ROOT,
        "  %7s %11s %12s %12s %12s %9s%n",
        "workers",
        "bytes",
        "latency_ms",
        "flat_ms",
        "hier_ms",
        "hier/flat");
    long[] sizes = {4 << 10, 4 << 20, 64 << 20, 256L << 20};
    int g = 8;
    for (int n : new int[] {64, 256, 1024}) {
      for (long s : sizes) {
        double latency = 2.0 * (n - 1) * netAlpha;
        double flat = latency + 2.0 * (n - 1) / n * s * netBeta;
        int h = n / g;
        double hier =
            2.0 * (g - 1) * alpha
                + 2.0 * (g - 1) / g * s * beta
                + 2.0 * (h - 1) * netAlpha
                + 2.0 * (h - 1) / h * s * netBeta;
        System.out.printf(
            Locale.ROOT,
            "  %7d %11d %12.2f %12.2f %12.2f %9.2f%n",
            n,
            s,
            latency * 1e3,
            flat * 1e3,
            hier * 1e3,
            hier / flat);
      }
      // hierarchical pays while the saved inter-host hops outweigh the intra-host passes
      int h = n / g;
      double saved = 2.0 * (n - h) * netAlpha - 2.0 * (g - 1) * alpha;
      double perByte = 2.0 * (g - 1) / g * beta + (2.0 * (h - 1) / h - 2.0 * (n - 1) / n) * netBeta;
      System.out.printf(
          Locale.ROOT,
          "  N=%d: latency term equals bandwidth term at S = %.1f MB; hierarchical is faster for S < %.0f MB%n",
          n,
          2.0 * (n - 1) * netAlpha / (2.0 * (n - 1) / n * netBeta) / 1e6,
          saved / perByte / 1e6);
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

  /** Sizes from this one up are timed in pairs with a plain stream of the same bytes. */
  private static final long PAIRED_FROM_BYTES = 1 << 20;

  /**
   * The long-stream bound: bytes per rank, and how many times it is measured (spread over the run).
   */
  private static final long STREAM_BYTES = 512L << 20;

  private static final int STREAM_REPEATS = 3;

  private static void child(
      int rank, int n, long minBytes, long maxBytes, int chunkBytes, String transport)
      throws Exception {
    JobSecret secret = JobSecret.fromHex(System.getenv(ProcessRing.SECRET_ENV));
    RingListener listener = RingListener.bind("127.0.0.1");
    System.out.println("ADDR " + listener.address());
    System.out.flush();
    String line =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
    List<String> peers = Arrays.asList(line.substring("PEERS ".length()).split(","));
    try (Communicator c =
            Communicator.builder()
                .setRank(rank)
                .setPeers(peers)
                .setSecret(secret)
                .setListener(listener)
                .optOperationTimeout(Duration.ofSeconds(60))
                .optChunkBytes(chunkBytes)
                .optSharedMemory(transport.equals("shm"))
                .build();
        Streamer streamer = n > 1 ? new Streamer(c, (int) maxBytes) : null) {
      LinkTransport expected =
          transport.equals("shm") ? LinkTransport.SHARED_MEMORY : LinkTransport.TCP;
      if (n > 1 && (c.leftTransport() != expected || c.rightTransport() != expected)) {
        throw new IllegalStateException(
            "rank "
                + rank
                + ": asked for "
                + transport
                + " but the links use "
                + c.leftTransport()
                + "/"
                + c.rightTransport());
      }
      ByteBuffer buf = ByteBuffer.allocateDirect((int) maxBytes).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < maxBytes / 4; i++) {
        buf.putFloat(4 * i, 1.0f + (i % 7));
      }
      double[] bounds = new double[STREAM_REPEATS];
      int boundsTaken = 0;
      if (streamer != null) {
        bounds[boundsTaken++] = streamer.bound(STREAM_BYTES);
      }
      for (long bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
        int iters =
            bytes <= (64 << 10) ? 2000 : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 30 : 15;
        int warmup = bytes <= (1 << 20) ? iters : 3;
        boolean paired = streamer != null && bytes >= PAIRED_FROM_BYTES;
        ByteBuffer slice = buf.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        slice.limit((int) bytes);
        long[] times = new long[iters];
        long[] streamTimes = new long[iters];
        long streamed =
            (long) (2.0 * (n - 1) / n * bytes); // what one rank sends in a ring all-reduce
        c.barrier();
        for (int it = 0; it < warmup; it++) {
          c.allReduce(slice, ElementType.FLOAT32, ReduceOp.MEAN);
        }
        if (paired) {
          streamer.stream(streamed, (int) bytes);
        }
        c.barrier();
        for (int it = 0; it < iters; it++) {
          if (paired) {
            c.barrier();
          }
          long t0 = System.nanoTime();
          c.allReduce(slice, ElementType.FLOAT32, ReduceOp.MEAN);
          times[it] = System.nanoTime() - t0;
          if (paired) {
            c.barrier();
            streamTimes[it] = streamer.stream(streamed, (int) bytes);
          }
        }
        // The operation's time is the slowest rank's; report the median over iterations.
        long[] slowest = maxOverRanks(c, times);
        long[] slowestStream = paired ? maxOverRanks(c, streamTimes) : null;
        if (rank == 0) {
          String extra = "";
          if (paired) {
            // busbw / stream throughput of one pair = stream time / all-reduce time (same bytes).
            double[] ratios = new double[iters];
            long[] st = slowestStream.clone();
            for (int it = 0; it < iters; it++) {
              ratios[it] = (double) slowestStream[it] / slowest[it];
            }
            Arrays.sort(ratios);
            Arrays.sort(st);
            extra =
                String.format(
                    Locale.ROOT,
                    " %.4f %.4f",
                    streamed / (st[iters / 2] / 1e9) / 1e9,
                    ratios[iters / 2]);
          }
          long[] sorted = slowest.clone();
          Arrays.sort(sorted);
          System.out.printf(
              Locale.ROOT, "BENCH %d %.9f%s%n", bytes, sorted[iters / 2] / 1e9, extra);
          System.out.flush();
        }
        if (streamer != null
            && boundsTaken < STREAM_REPEATS - 1
            && bytes * 16 > maxBytes
            && bytes * 4 <= maxBytes) {
          bounds[boundsTaken++] = streamer.bound(STREAM_BYTES); // once mid-run
        }
      }
      if (streamer != null) {
        while (boundsTaken < STREAM_REPEATS) {
          bounds[boundsTaken++] = streamer.bound(STREAM_BYTES);
        }
        Arrays.sort(bounds);
      }
      if (rank == 0) {
        System.out.printf(
            Locale.ROOT,
            "STREAM %.4f%n",
            streamer == null ? Double.NaN : bounds[STREAM_REPEATS / 2]);
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
   * Every rank streams plain bytes to its right neighbour while receiving as many from its left,
   * all at once, over the ring's own sockets (no frames, no reduction): the writer is a thread of
   * its own, started once, and the caller reads. Buffers as large as the message, so both sides of
   * a comparison touch the same amount of memory (a 1 MB buffer would stay in cache).
   */
  private static final class Streamer implements AutoCloseable {
    private static final int CHUNK = 1 << 20;
    private final Communicator c;
    private final ByteBuffer out;
    private final ByteBuffer in;
    private final Thread writer;
    private final Semaphore go = new Semaphore(0);
    private final Semaphore done = new Semaphore(0);
    private volatile long total;
    private volatile int span;
    private volatile long deadline;
    private volatile Throwable error;
    private volatile boolean stop;

    Streamer(Communicator c, int maxBytes) {
      this.c = c;
      out = ByteBuffer.allocateDirect(maxBytes);
      in = ByteBuffer.allocateDirect(maxBytes);
      writer = new Thread(this::write, "bench-stream-writer");
      writer.setDaemon(true);
      writer.start();
    }

    private void write() {
      while (true) {
        go.acquireUninterruptibly();
        if (stop) {
          return;
        }
        try {
          pump(out, c.rightLink(), true);
        } catch (Throwable e) {
          error = e;
        }
        done.release();
      }
    }

    private void pump(ByteBuffer b, Link link, boolean writing) throws IOException {
      for (long moved = 0; moved < total; ) {
        int at = (int) (moved % span);
        int n = (int) Math.min(Math.min(CHUNK, total - moved), span - at);
        b.clear().position(at).limit(at + n);
        if (writing) {
          link.writeFully(b, null, deadline);
        } else {
          link.readFully(b, deadline);
        }
        moved += n;
      }
    }

    /**
     * Streams {@code bytes} each way through the first {@code spanBytes} of the buffers; returns
     * this rank's nanoseconds.
     */
    long stream(long bytes, int spanBytes) throws Exception {
      total = bytes;
      span = Math.min(spanBytes, out.capacity());
      deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
      long t0 = System.nanoTime();
      go.release();
      pump(in, c.leftLink(), false);
      done.acquire();
      long elapsed = System.nanoTime() - t0;
      if (error != null) {
        throw new IllegalStateException("streaming failed", error);
      }
      return elapsed;
    }

    /**
     * The long-stream bound in GB/s: a warm-up pass, then {@code bytes} per rank, timed by the
     * slowest rank.
     */
    double bound(long bytes) throws Exception {
      c.barrier();
      stream(bytes / 8, out.capacity());
      c.barrier();
      long elapsed = stream(bytes, out.capacity());
      long[] slowest = maxOverRanks(c, new long[] {elapsed});
      return bytes / (slowest[0] / 1e9) / 1e9;
    }

    @Override
    public void close() throws InterruptedException {
      stop = true;
      go.release();
      writer.join(10_000);
    }
  }
}
