package dev.sparktrainer.data;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.PipelineSource;
import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.locks.LockSupport;
import org.apache.hadoop.conf.Configuration;

/**
 * The input-pipeline benchmark ({@code bin/bench-pipeline}): on an MNIST-like TFRecord dataset (784
 * floats and an int64 label per record) on local disk, measures in one run
 *
 * <ol>
 *   <li>the raw TFRecord framing + CRC scan, records/s on one thread (the data-source benchmark's
 *       path 1);
 *   <li>the pipeline's records/s with a zero-cost consumer (batches made into NDArrays and closed),
 *       epoch after epoch with the next one prepared as the trainer does: with the default
 *       10,000-record shuffle buffer, without it, and without it with {@code deterministic=false} —
 *       the JSON's {@code records_per_s} is the fastest of the three (named in {@code
 *       records_per_s_config});
 *   <li>the fraction of time a consumer needing a fixed time per batch waits for data;
 *   <li>peak heap and RSS of a separate JVM streaming the dataset with a heap a tenth of its size;
 *   <li>the same records as Parquet ({@link ParquetBenchmark}): the pipeline on Parquet against the
 *       pipeline on TFRecord and Spark's vectorized single-core scan, and a DataFrame that needs
 *       staging.
 * </ol>
 *
 * Usage: {@code PipelineBenchmark [--dataset-mb 500] [--heap-mb 48] [--step-ms 5] [--seconds 3]
 * [--rounds 3] [--out FILE]}.
 *
 * <p>Why this file is long: one run of measures that share the generated dataset, its {@code
 * DatasetPlan}, one table and one JSON line: the raw scan, the pipeline rates (default, no shuffle
 * buffer, unordered), the consumer wait, the trivial-map cost and the small-heap child JVM ({@code
 * stream}; it needs this package for {@code InputPipeline.hostEpoch}). The Parquet part already
 * lives in {@link ParquetBenchmark}; the map stage ({@code mapCost}, {@code MapCost}) could move
 * out the same way.
 */
public final class PipelineBenchmark {
  private static final int WIDTH = 784;
  private static final Configuration CONF = new Configuration();

  private PipelineBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("stream")) {
      streamChild(Path.of(args[1]), Long.parseLong(args[2]));
      return;
    }
    int datasetMb = 500;
    int heapMb = 48;
    int stepMs = 5;
    Path out = Path.of("target/bench/pipeline.jsonl");
    Path data = Path.of("target/bench/pipeline-data");
    double seconds = 3;
    int roundCount = 3;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--dataset-mb":
          datasetMb = Integer.parseInt(args[++i]);
          break;
        case "--heap-mb":
          heapMb = Integer.parseInt(args[++i]);
          break;
        case "--step-ms":
          stepMs = Integer.parseInt(args[++i]);
          break;
        case "--out":
          out = Path.of(args[++i]);
          break;
        case "--data":
          data = Path.of(args[++i]);
          break;
        case "--seconds":
          seconds = Double.parseDouble(args[++i]);
          break;
        case "--rounds":
          roundCount = Integer.parseInt(args[++i]);
          break;
        default:
          throw new IllegalArgumentException(
              "Unknown argument "
                  + args[i]
                  + " (expected --dataset-mb, --heap-mb, --step-ms, --seconds, --rounds, --out, --data)");
      }
    }
    long bytes = generate(data, datasetMb);
    double datasetMbActual = bytes / 1e6;
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(data.toString())
            .addFeature("pixels", WIDTH)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(64).optShuffleBuffer(10_000).build();
    DatasetPlan plan = DatasetPlanner.plan(spec, options, CONF);
    System.out.printf(
        Locale.ROOT,
        "dataset: %s, %d records, %.0f MB in %d files; %d cores%n",
        data,
        plan.totalRecords(),
        datasetMbActual,
        plan.splits().size(),
        Runtime.getRuntime().availableProcessors());

    // Throughput is a steady-state figure: every measure runs for --seconds (whole scans, or whole
    // epochs of one pipeline), after a warm-up of each path twice as long (JIT compilation of the
    // decode and
    // copy loops takes seconds of CPU; a 500 MB pass alone lasts a fraction of a second). Then the
    // three measures run side by side in turn, rounds times; the table reports each one's best.
    // The same pipeline without the shuffle buffer: shuffling 3 KB records through a 10,000-record
    // buffer (31 MB) makes every record's copy into its batch a trip to main memory.
    PipelineOptions noShuffle = options.toBuilder().optShuffleBuffer(0).build();
    // And with deterministic=false: each reader decodes its records straight into batches of its
    // own.
    PipelineOptions unordered = noShuffle.toBuilder().optDeterministic(false).build();
    double raw = 0;
    double pipe = 0;
    double pipeNoShuffle = 0;
    double pipeUnordered = 0;
    List<String> rounds = new ArrayList<>();
    try (NDManager manager = NDManager.newBaseManager()) {
      rawScan(plan, 2 * seconds);
      pipelineRate(plan, options, manager, 2 * seconds);
      pipelineRate(plan, noShuffle, manager, 2 * seconds);
      pipelineRate(plan, unordered, manager, 2 * seconds);
      for (int round = 0; round < roundCount; round++) {
        double r = rawScan(plan, seconds);
        double p = pipelineRate(plan, options, manager, seconds);
        double q = pipelineRate(plan, noShuffle, manager, seconds);
        double u = pipelineRate(plan, unordered, manager, seconds);
        rounds.add(
            String.format(
                Locale.ROOT,
                "round %d: raw %.0f, pipeline %.0f (%.0f%%), no shuffle %.0f (%.0f%%),"
                    + " unordered %.0f (%.0f%%), load %.1f",
                round + 1,
                r,
                p,
                100 * p / r,
                q,
                100 * q / r,
                u,
                100 * u / r,
                loadAverage()));
        System.out.println(rounds.get(rounds.size() - 1));
        raw = Math.max(raw, r);
        pipe = Math.max(pipe, p);
        pipeNoShuffle = Math.max(pipeNoShuffle, q);
        pipeUnordered = Math.max(pipeUnordered, u);
      }
    }
    // ---- map stage (issue 15, item 6): a trivial per-example transform against none ----
    MapCost map = mapCost(plan, options, seconds, roundCount);
    // ---- end of the map stage ----
    double wait = waitFraction(plan, options, stepMs);
    long[] mem = childMemory(data, heapMb);
    // --- Parquet (ParquetBenchmark): the same records as Parquet; the pipeline on both formats,
    // Spark's scan.
    ParquetBenchmark.Result parquet;
    try (NDManager manager = NDManager.newBaseManager()) {
      parquet =
          ParquetBenchmark.run(
              data, plan, noShuffle, "no shuffle buffer", manager, seconds, roundCount);
    }
    // --- end Parquet

    System.out.println();
    System.out.printf(Locale.ROOT, "%-52s %14s%n", "measure", "value");
    System.out.printf(
        Locale.ROOT,
        "%-52s %14.0f%n",
        "raw TFRecord scan (framing + CRC, 1 thread), records/s",
        raw);
    System.out.printf(
        Locale.ROOT, "%-52s %14.0f%n", "pipeline, zero-cost consumer, records/s", pipe);
    System.out.printf(
        Locale.ROOT,
        "%-52s %13.0f%%  (target >= 70%%: %s)%n",
        "pipeline / raw scan",
        100 * pipe / raw,
        pipe >= 0.7 * raw ? "met" : "MISSED");
    System.out.printf(
        Locale.ROOT, "%-52s %14.0f%n", "pipeline without shuffle buffer, records/s", pipeNoShuffle);
    System.out.printf(
        Locale.ROOT,
        "%-52s %13.0f%%  (target >= 70%%: %s)%n",
        "pipeline without shuffle buffer / raw scan",
        100 * pipeNoShuffle / raw,
        pipeNoShuffle >= 0.7 * raw ? "met" : "MISSED");
    System.out.printf(
        Locale.ROOT, "%-52s %14.0f%n", "same, deterministic=false, records/s", pipeUnordered);
    System.out.printf(
        Locale.ROOT,
        "%-52s %13.0f%%  (target >= 70%%: %s)%n",
        "same, deterministic=false / raw scan",
        100 * pipeUnordered / raw,
        pipeUnordered >= 0.7 * raw ? "met" : "MISSED");
    // The pipeline's maximum: its fastest configuration in this run (what the target is
    // about).
    double best = Math.max(pipe, Math.max(pipeNoShuffle, pipeUnordered));
    String bestConfig =
        best == pipeUnordered
            ? "no shuffle buffer, deterministic=false"
            : best == pipeNoShuffle ? "no shuffle buffer" : "default (10000-record shuffle buffer)";
    System.out.printf(
        Locale.ROOT,
        "%-52s %13.0f%%  (target >= 70%%: %s; %s)%n",
        "pipeline maximum / raw scan",
        100 * best / raw,
        best >= 0.7 * raw ? "met" : "MISSED",
        bestConfig);
    System.out.printf(
        Locale.ROOT,
        "%-52s %13.2f%%  (target < 5%%: %s)%n",
        "consumer wait, " + stepMs + " ms per batch of 64",
        100 * wait,
        wait < 0.05 ? "met" : "MISSED");
    System.out.printf(
        Locale.ROOT,
        "%-52s %11d MB  (dataset %.0f MB = %.1fx the heap)%n",
        "streaming JVM: -Xmx",
        heapMb,
        datasetMbActual,
        datasetMbActual / heapMb);
    System.out.printf(
        Locale.ROOT,
        "%-52s %11d MB%n",
        "streaming JVM: peak heap used (sampled every 2 ms)",
        mem[0]);
    System.out.printf(Locale.ROOT, "%-52s %11d MB%n", "streaming JVM: peak RSS", mem[1]);
    System.out.printf(Locale.ROOT, "%-52s %14d%n", "streaming JVM: records read", mem[2]);
    parquet.print(); // Parquet

    Files.createDirectories(out.toAbsolutePath().getParent());
    String json =
        String.format(
            Locale.ROOT,
            "{\"wait_fraction\": %.4f, \"records_per_s\": %.0f, \"records_per_s_config\": \"%s\","
                + " \"raw_records_per_s\": %.0f, \"dataset_mb\": %.1f,"
                + " \"heap_mb\": %d, \"peak_rss_mb\": %d, \"peak_heap_used_mb\": %d, \"step_ms\": %d, \"batch_size\": 64,"
                + " \"records_per_s_default\": %.0f, \"shuffle_buffer\": 10000, \"records_per_s_no_shuffle\": %.0f,"
                + " \"records_per_s_unordered\": %.0f, \"seconds_per_measure\": %.1f, \"rounds\": %d, \"load_average\": %.2f}%n",
            wait,
            best,
            bestConfig,
            raw,
            datasetMbActual,
            heapMb,
            mem[1],
            mem[0],
            stepMs,
            pipe,
            pipeNoShuffle,
            pipeUnordered,
            seconds,
            roundCount,
            loadAverage());
    json = json.substring(0, json.lastIndexOf('}')) + ", " + parquet.json() + "}\n"; // Parquet
    // --- issue 15, item 3 (fast default shuffle): the default configuration on TFRecord. ---
    json = withField(json, "default_records_per_s", String.format(Locale.ROOT, "%.0f", pipe));
    // --- end of item 3's fields ---
    // ---- map stage (issue 15, item 6) ----
    map.print();
    json = map.addTo(json);
    // ---- end of the map stage ----
    Files.writeString(out, json, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    System.out.println("\nJSON appended to " + out.toAbsolutePath());
  }

  /**
   * {@code json} (one object and a line break) with {@code "name": value} added as its last field.
   */
  static String withField(String json, String name, String value) {
    int end = json.lastIndexOf('}');
    return json.substring(0, end) + ", \"" + name + "\": " + value + json.substring(end);
  }

  // ---- map stage (issue 15, item 6) ----

  /**
   * Records/s with and without a trivial transform (it reads and writes back the label), in turns,
   * best of {@code rounds}: with the default shuffle buffer (records are decoded in the readers
   * either way: the map's own cost) and without one (a map needs records decoded in the readers,
   * not straight into their batch).
   */
  private static MapCost mapCost(
      DatasetPlan plan, PipelineOptions options, double seconds, int rounds) {
    ExampleTransform trivial = ex -> ex.setLabel(ex.label());
    PipelineOptions mapped = options.toBuilder().optTransform(trivial).build();
    PipelineOptions noShuffle = options.toBuilder().optShuffleBuffer(0).build();
    PipelineOptions noShuffleMapped = noShuffle.toBuilder().optTransform(trivial).build();
    double[] best = new double[4];
    try (NDManager manager = NDManager.newBaseManager()) {
      pipelineRate(plan, mapped, manager, 2 * seconds);
      pipelineRate(plan, noShuffleMapped, manager, 2 * seconds);
      for (int round = 0; round < rounds; round++) {
        double[] r = {
          pipelineRate(plan, options, manager, seconds),
          pipelineRate(plan, mapped, manager, seconds),
          pipelineRate(plan, noShuffle, manager, seconds),
          pipelineRate(plan, noShuffleMapped, manager, seconds)
        };
        System.out.printf(
            Locale.ROOT,
            "map round %d: default %.0f, with map %.0f, no shuffle %.0f, with map %.0f,"
                + " load %.1f%n",
            round + 1,
            r[0],
            r[1],
            r[2],
            r[3],
            loadAverage());
        for (int i = 0; i < 4; i++) {
          best[i] = Math.max(best[i], r[i]);
        }
      }
    }
    return new MapCost(best[0], best[1], best[2], best[3]);
  }

  private record MapCost(
      double plain, double mapped, double noShufflePlain, double noShuffleMapped) {
    void print() {
      System.out.printf(Locale.ROOT, "%-52s %14.0f%n", "default + trivial map, records/s", mapped);
      System.out.printf(
          Locale.ROOT,
          "%-52s %13.0f%%  (default without it: %.0f)%n",
          "trivial map / none, default",
          100 * mapped / plain,
          plain);
      System.out.printf(
          Locale.ROOT,
          "%-52s %14.0f%n",
          "no shuffle buffer + trivial map, records/s",
          noShuffleMapped);
      System.out.printf(
          Locale.ROOT,
          "%-52s %13.0f%%  (without it: %.0f)%n",
          "trivial map / none, no shuffle buffer",
          100 * noShuffleMapped / noShufflePlain,
          noShufflePlain);
    }

    String addTo(String json) {
      return json.replaceFirst(
          "}\\s*$",
          String.format(
              Locale.ROOT,
              ", \"map_records_per_s\": %.0f,"
                  + " \"map_baseline_records_per_s\": %.0f, \"map_no_shuffle_records_per_s\": %.0f,"
                  + " \"map_no_shuffle_baseline_records_per_s\": %.0f}%n",
              mapped,
              plain,
              noShuffleMapped,
              noShufflePlain));
    }
  }

  // ---- end of the map stage ----

  /** Writes MNIST-like records until the dataset reaches {@code mb} MB (kept if already there). */
  private static long generate(Path dir, int mb) throws IOException {
    Path marker = dir.resolve("_" + mb + "MB");
    if (Files.exists(marker)) {
      try (var files = Files.list(dir)) {
        return files
            .filter(f -> f.getFileName().toString().endsWith(".tfrecord"))
            .mapToLong(f -> f.toFile().length())
            .sum();
      }
    }
    if (Files.exists(dir)) {
      try (var files = Files.list(dir)) {
        for (Path f : files.toList()) {
          Files.delete(f);
        }
      }
    }
    Files.createDirectories(dir);
    Random rnd = new Random(1);
    long target = (long) mb * 1_000_000;
    long written = 0;
    int file = 0;
    float[] px = new float[WIDTH];
    while (written < target) {
      try (OutputStream os =
              Files.newOutputStream(dir.resolve(String.format("part-%04d.tfrecord", file++)));
          TFRecordWriter w = new TFRecordWriter(new BufferedOutputStream(os, 1 << 20))) {
        while (w.bytesWritten() < 64_000_000 && written + w.bytesWritten() < target) {
          for (int k = 0; k < WIDTH; k++) {
            px[k] = rnd.nextInt(256) / 255f;
          }
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("pixels", Feature.ofFloats(px));
          m.put("label", Feature.ofInt64(rnd.nextInt(10)));
          w.write(Examples.encodeExample(m));
        }
        written += w.bytesWritten();
      }
    }
    Files.createFile(marker);
    return written;
  }

  /**
   * Records/s of whole framing + CRC scans of the dataset on this thread, for at least {@code
   * seconds}.
   */
  static double rawScan(DatasetPlan plan, double seconds) throws IOException {
    long t = System.nanoTime();
    long until = t + (long) (seconds * 1e9);
    long n = 0;
    do {
      for (Split s : plan.splits()) {
        org.apache.hadoop.fs.Path p = new org.apache.hadoop.fs.Path(s.path());
        try (TFRecordReader r =
            TFRecordFiles.open(
                p,
                s.start(),
                s.length(),
                CONF,
                TFRecordCompression.NONE,
                TFRecordReader.DEFAULT_MAX_RECORD_LENGTH,
                CorruptRecordPolicy.FAILFAST)) {
          while (r.next()) {
            n++;
          }
        }
      }
    } while (System.nanoTime() < until);
    return n / ((System.nanoTime() - t) / 1e9);
  }

  /**
   * Records/s of whole epochs of one pipeline (batches made into NDArrays and closed), for at least
   * {@code seconds}.
   */
  private static double pipelineRate(
      DatasetPlan plan, PipelineOptions o, NDManager m, double seconds) {
    long t = System.nanoTime();
    long until = t + (long) (seconds * 1e9);
    long n = 0;
    try (PipelineSource p = PipelineSource.create(plan, o, null, 0, 1, m, CONF)) {
      int epoch = 0;
      do {
        Iterator<Batch> it = p.epoch(epoch++, 0);
        p.prepare(epoch); // as the trainer does: the next epoch starts once this one is read
        while (it.hasNext()) {
          try (Batch b = it.next()) {
            n += b.size();
          }
        }
      } while (System.nanoTime() < until);
    }
    return n / ((System.nanoTime() - t) / 1e9);
  }

  private static double loadAverage() {
    return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
  }

  private static double waitFraction(DatasetPlan plan, PipelineOptions o, int stepMs) {
    try (NDManager m = NDManager.newBaseManager();
        PipelineSource p = PipelineSource.create(plan, o, null, 0, 1, m, CONF)) {
      Iterator<Batch> it = p.epoch(7, 0);
      long steps = 0;
      long deadlineNs = System.nanoTime() + 20_000_000_000L; // 20 s of training time is plenty
      while (it.hasNext() && System.nanoTime() < deadlineNs) {
        try (Batch b = it.next()) {
          long until = System.nanoTime() + stepMs * 1_000_000L;
          while (System.nanoTime() < until) {
            LockSupport.parkNanos(50_000);
          }
          steps++;
        }
      }
      PipelineStats s = p.stats();
      System.out.printf(Locale.ROOT, "wait run: %d steps, %s%n", steps, s);
      return s.waitFraction();
    }
  }

  /** Runs {@code stream} in a JVM with a small heap; returns peak heap MB, peak RSS MB, records. */
  private static long[] childMemory(Path data, int heapMb) throws Exception {
    List<String> cmd =
        new ArrayList<>(
            List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx" + heapMb + "m",
                "-cp",
                System.getProperty("java.class.path"),
                PipelineBenchmark.class.getName(),
                "stream",
                data.toString(),
                String.valueOf(Math.max(4L << 20, heapMb * (1L << 20) / 3))));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    try {
      String out = new String(p.getInputStream().readAllBytes());
      if (p.waitFor() != 0) {
        throw new IllegalStateException("streaming JVM failed:\n" + out);
      }
      long[] r = new long[3];
      for (String line : out.split("\n")) {
        if (line.startsWith("peak ")) {
          String[] f = line.split(" ");
          r[0] = Long.parseLong(f[1]);
          r[1] = Long.parseLong(f[2]);
          r[2] = Long.parseLong(f[3]);
        }
      }
      return r;
    } finally {
      p.destroyForcibly();
    }
  }

  /** In the child JVM: stream one epoch with a budget of a third of the heap; print peaks. */
  private static void streamChild(Path data, long budget) throws Exception {
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(data.toString())
            .addFeature("pixels", WIDTH)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(64)
            .optShuffleBuffer(1000)
            .optMemoryBudgetBytes(budget)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(spec, o, CONF);
    long[] heapPeak = {0};
    MemoryMXBean mx = ManagementFactory.getMemoryMXBean();
    Thread sampler =
        new Thread(
            () -> {
              while (!Thread.currentThread().isInterrupted()) {
                heapPeak[0] = Math.max(heapPeak[0], mx.getHeapMemoryUsage().getUsed());
                LockSupport.parkNanos(2_000_000);
              }
            });
    sampler.setDaemon(true);
    sampler.start();
    long n = 0;
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, CONF)) {
      Iterator<HostBatch> it = p.hostEpoch(0, 0);
      while (it.hasNext()) {
        n += it.next().size;
      }
    }
    sampler.interrupt();
    sampler.join();
    long rssKb = 0;
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) {
        rssKb = Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    System.out.println("peak " + heapPeak[0] / (1 << 20) + " " + rssKb / 1024 + " " + n);
  }
}
