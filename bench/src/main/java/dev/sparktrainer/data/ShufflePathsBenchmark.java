package dev.sparktrainer.data;

import com.sun.management.OperatingSystemMXBean;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;

/**
 * The default shuffle's two paths side by side in one JVM, in turn, several rounds (a loaded
 * machine moves every figure; the ratio within a round is what to trust): the raw TFRecord scan on
 * one thread, the producer path with its shuffle buffer ({@code ShufflePath.BUFFER}) and the
 * planned path ({@code planned}), each on bench-pipeline's dataset with its default configuration
 * (batch 64, 10,000-record shuffle buffer). Records/s and the process's CPU time per record.
 *
 * <pre>bin/bench-shuffle-paths [--rounds 5] [--seconds 3] [--shuffle 10000] [--window 1]</pre>
 */
public final class ShufflePathsBenchmark {
  private static final Configuration CONF = new Configuration();

  public static void main(String[] args) throws Exception {
    Path data = null;
    int rounds = 5;
    double seconds = 3;
    int shuffle = 10_000;
    int datasetMb = 300;
    String[] windows = {"1"};
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--data":
          data = Path.of(args[++i]);
          break;
        case "--rounds":
          rounds = Integer.parseInt(args[++i]);
          break;
        case "--seconds":
          seconds = Double.parseDouble(args[++i]);
          break;
        case "--dataset-mb":
          datasetMb = Integer.parseInt(args[++i]);
          break;
        case "--shuffle":
          shuffle = Integer.parseInt(args[++i]);
          break;
        case "--window":
          windows = args[++i].split(",");
          break;
        default:
          throw new IllegalArgumentException(
              "Unknown argument "
                  + args[i]
                  + " (expected --data, --dataset-mb, --rounds, --seconds, --shuffle, --window)");
      }
    }
    if (data == null) {
      throw new IllegalArgumentException("--data DIR is needed (bench-pipeline's dataset)");
    }
    if (!Files.isDirectory(data)) {
      write(data, datasetMb);
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(data.toString())
            .addFeature("pixels", 784)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(64).optShuffleBuffer(shuffle).build();
    DatasetPlan plan = DatasetPlanner.plan(spec, options, CONF);
    System.out.printf(
        Locale.ROOT,
        "dataset: %s, %d records in %d files; %d cores; shuffle buffer %d%n",
        data,
        plan.totalRecords(),
        plan.splits().size(),
        Runtime.getRuntime().availableProcessors(),
        shuffle);
    rawScan(plan, 2 * seconds);
    rate(plan, options, "buffer", 2 * seconds);
    rate(plan, options, "planned", 2 * seconds);
    double sumRatio = 0;
    double sumCpuRatio = 0;
    for (int round = 1; round <= rounds; round++) {
      double raw = rawScan(plan, seconds);
      double[] b = rate(plan, options, "buffer", seconds);
      double[] p = null;
      StringBuilder others = new StringBuilder();
      for (String w : windows) {
        double[] x =
            rate(
                plan,
                options.toBuilder().optPlannedWindow(Double.parseDouble(w)).build(),
                "planned",
                seconds);
        if (p == null) {
          p = x;
        } else {
          others.append(
              String.format(
                  Locale.ROOT,
                  "; window %s: %.0f%% of raw, %.0f CPU ns/record",
                  w,
                  100 * x[0] / raw,
                  x[1]));
        }
      }
      System.out.printf(
          Locale.ROOT,
          "round %d: raw scan %.0f/s; buffer %.0f/s (%.0f%% of raw, %.0f CPU ns/record);"
              + " planned %.0f/s (%.0f%% of raw, %.0f CPU ns/record); planned/buffer %.2fx, CPU %.2fx; load %.1f%n",
          round,
          raw,
          b[0],
          100 * b[0] / raw,
          b[1],
          p[0],
          100 * p[0] / raw,
          p[1],
          p[0] / b[0],
          p[1] / b[1],
          ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
      if (others.length() > 0) {
        System.out.println("  planned, other windows (× the shuffle buffer's rows)" + others);
      }
      sumRatio += p[0] / b[0];
      sumCpuRatio += p[1] / b[1];
    }
    System.out.printf(
        Locale.ROOT,
        "mean over %d rounds: planned/buffer throughput %.2fx, CPU per record %.2fx%n",
        rounds,
        sumRatio / rounds,
        sumCpuRatio / rounds);
  }

  /**
   * Writes bench-pipeline's kind of records (784 floats and an int label) until {@code mb} MB, when
   * it has none.
   */
  private static void write(Path dir, int mb) throws IOException {
    Files.createDirectories(dir);
    Random rnd = new Random(1);
    long written = 0;
    int file = 0;
    float[] px = new float[784];
    while (written < mb * 1_000_000L) {
      try (OutputStream os =
              Files.newOutputStream(dir.resolve(String.format("part-%04d.tfrecord", file++)));
          TFRecordWriter w = new TFRecordWriter(new BufferedOutputStream(os, 1 << 20))) {
        while (w.bytesWritten() < 64_000_000 && written + w.bytesWritten() < mb * 1_000_000L) {
          for (int k = 0; k < px.length; k++) {
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
  }

  private static long cpuNanos() {
    return ((OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  /** Records/s of whole framing + CRC scans on this thread (bench-pipeline's raw scan). */
  private static double rawScan(DatasetPlan plan, double seconds) throws IOException {
    return PipelineBenchmark.rawScan(plan, seconds);
  }

  /**
   * Records/s and CPU ns per record of whole epochs (the next prepared, as the trainer does), host
   * batches.
   */
  private static double[] rate(DatasetPlan plan, PipelineOptions o, String path, double seconds) {
    o =
        o.toBuilder()
            .optShufflePath(PipelineOptions.ShufflePath.valueOf(path.toUpperCase(Locale.ROOT)))
            .build();
    long t = System.nanoTime();
    long cpu = cpuNanos();
    long until = t + (long) (seconds * 1e9);
    long n = 0;
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, CONF)) {
      int epoch = 0;
      do {
        Iterator<HostBatch> it = p.hostEpoch(epoch++, 0);
        p.prepare(epoch);
        while (it.hasNext()) {
          n += it.next().size;
        }
      } while (System.nanoTime() < until);
    }
    return new double[] {n / ((System.nanoTime() - t) / 1e9), (double) (cpuNanos() - cpu) / n};
  }
}
