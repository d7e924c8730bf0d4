package dev.sparktrainer.data;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.PipelineSource;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;

/**
 * The text case of {@code bin/bench-pipeline --text}: token-id sequences with lengths like real
 * text (log-normal, median 18, 95th percentile about 125, at most 300), batched three ways in one
 * run, side by side:
 *
 * <ol>
 *   <li><b>max</b>: the same sequences written pre-padded to 300 as a fixed-shape int64 column
 *       (what a user without variable-length features does);
 *   <li><b>padded</b>: a sequence column, each batch padded to its own longest (with a mask);
 *   <li><b>bucketed</b>: the same with {@code bucket_by_sequence_length} boundaries 16,32,64,128;
 *   <li><b>bucketed+</b>: finer boundaries, 8,12,16,24,32,48,64,96,128,192.
 * </ol>
 *
 * For each: records/s through the pipeline into device batches (a zero-cost consumer, the default
 * 10,000-record shuffle buffer), the fraction of the batches' positions that are padding, and the
 * token positions per second that reach the model. Rounds interleave the three. Table on stdout,
 * one JSON line appended to {@code --out}.
 *
 * <p>Usage: {@code TextPipelineBenchmark [--records 200000] [--batch 32] [--seconds 3] [--rounds 3]
 * [--data DIR] [--out FILE]}.
 */
public final class TextPipelineBenchmark {
  static final int MAX = 300;
  static final int VOCAB = 30_000;
  private static final Configuration CONF = new Configuration();

  private TextPipelineBenchmark() {}

  /** The length of record {@code i}: log-normal (median 18, p95 ~125), 1..300. */
  static int length(Random r) {
    double mu = Math.log(18);
    double sigma = Math.log(125.0 / 18) / 1.645;
    return (int) Math.max(1, Math.min(MAX, Math.round(Math.exp(mu + sigma * r.nextGaussian()))));
  }

  public static void main(String[] args) throws Exception {
    int records = 200_000;
    int batch = 32;
    double seconds = 3;
    int rounds = 3;
    Path data = Path.of("target/bench/text-data");
    Path out = Path.of("target/bench/pipeline-text.jsonl");
    String dataset = null; // a user's TFRecord data instead of the generated one
    String column = "tokens";
    int maxLength = MAX;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--records" -> records = Integer.parseInt(args[++i]);
        case "--batch" -> batch = Integer.parseInt(args[++i]);
        case "--seconds" -> seconds = Double.parseDouble(args[++i]);
        case "--rounds" -> rounds = Integer.parseInt(args[++i]);
        case "--data" -> data = Path.of(args[++i]);
        case "--out" -> out = Path.of(args[++i]);
        case "--dataset" -> dataset = args[++i];
        case "--column" -> column = args[++i];
        case "--max-length" -> maxLength = Integer.parseInt(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "Unknown option "
                    + args[i]
                    + ": expected --records, --batch, --seconds, --rounds,"
                    + " --data or --out");
      }
    }
    if (dataset != null) {
      userData(dataset, column, maxLength, batch, seconds, rounds);
      return;
    }
    int[] lengths = generate(data, records);
    int[] sorted = lengths.clone();
    Arrays.sort(sorted);
    System.out.printf(
        Locale.ROOT,
        "Text pipeline: %d records, lengths median %d, p95 %d, max %d; batch %d, shuffle buffer"
            + " 10000, %d rounds of %.1f s%n",
        records,
        sorted[records / 2],
        sorted[(int) (records * 0.95)],
        sorted[records - 1],
        batch,
        rounds,
        seconds);
    DatasetSpec fixed =
        DatasetSpec.builder()
            .addPath(data.resolve("max").toString())
            .addIntFeature("tokens", MAX)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    DatasetSpec seq =
        DatasetSpec.builder()
            .addPath(data.resolve("seq").toString())
            .addSequenceFeature("tokens", DatasetSpec.ValueType.INT64, MAX, VOCAB)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions base = PipelineOptions.builder().optBatchSize(batch).optSeed(1).build();
    Map<String, DatasetPlan> plans = new LinkedHashMap<>();
    Map<String, PipelineOptions> options = new LinkedHashMap<>();
    plans.put("max", DatasetPlanner.plan(fixed, base, CONF));
    options.put("max", base);
    plans.put("padded", DatasetPlanner.plan(seq, base, CONF));
    options.put("padded", base);
    PipelineOptions bucketed = base.toBuilder().optBucketBoundaries(16, 32, 64, 128).build();
    plans.put("bucketed", DatasetPlanner.plan(seq, bucketed, CONF));
    options.put("bucketed", bucketed);
    PipelineOptions fine =
        base.toBuilder().optBucketBoundaries(8, 12, 16, 24, 32, 48, 64, 96, 128, 192).build();
    plans.put("bucketed+", DatasetPlanner.plan(seq, fine, CONF));
    options.put("bucketed+", fine);
    Map<String, double[]> rates = new LinkedHashMap<>(); // records/s per round
    Map<String, Double> padding = new LinkedHashMap<>();
    for (String k : plans.keySet()) {
      rates.put(k, new double[rounds]);
    }
    for (int r = 0; r < rounds; r++) {
      for (String k : plans.keySet()) {
        rates.get(k)[r] = measure(plans.get(k), options.get(k), seconds, false)[0];
        if (r == 0) { // counted apart: summing the masks would cost the consumer time
          padding.put(k, measure(plans.get(k), options.get(k), seconds, true)[1]);
        }
      }
    }
    double realTokens = 0;
    for (int l : lengths) {
      realTokens += l;
    }
    double meanLength = realTokens / records;
    double maxMedian = median(rates.get("max"));
    System.out.printf(
        Locale.ROOT,
        "%-10s %12s %8s %10s %18s%n",
        "batches",
        "records/s",
        "vs max",
        "padding",
        "real tokens/s");
    StringBuilder json =
        new StringBuilder(
            String.format(
                Locale.ROOT,
                "{\"bench\":\"pipeline-text\",\"records\":%d,\"batch\":%d,\"load\":%.2f",
                records,
                batch,
                ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage()));
    for (String k : plans.keySet()) {
      double rate = median(rates.get(k));
      System.out.printf(
          Locale.ROOT,
          "%-10s %12.0f %7.2fx %9.1f%% %18.0f%n",
          k,
          rate,
          rate / maxMedian,
          100 * padding.get(k),
          rate * meanLength);
      json.append(
          String.format(
              Locale.ROOT,
              ",\"%s\":{\"records_per_s\":%.0f,\"vs_max\":%.3f,\"padding_fraction\":%.4f}",
              k,
              rate,
              rate / maxMedian,
              padding.get(k)));
    }
    json.append("}\n");
    Files.createDirectories(out.toAbsolutePath().getParent());
    Files.writeString(out, json.toString(), StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    System.out.printf(
        Locale.ROOT,
        "padding: bucketed %.1fx (bucketed+ %.1fx) less than padded per batch, %.1fx (%.1fx) less"
            + " than padded to the maximum%n",
        padding.get("padded") / padding.get("bucketed"),
        padding.get("padded") / padding.get("bucketed+"),
        padding.get("max") / padding.get("bucketed"),
        padding.get("max") / padding.get("bucketed+"));
  }

  /**
   * A user's TFRecord data ({@code --dataset}): padded per batch and the two bucketings, records/s
   * and padding fraction; padded to the maximum is the padding {@code 1 - mean length / max}.
   */
  private static void userData(
      String dataset, String column, int maxLength, int batch, double seconds, int rounds)
      throws IOException {
    DatasetSpec seq =
        DatasetSpec.builder()
            .addPath(dataset)
            .addSequenceFeature(column, DatasetSpec.ValueType.INT64, maxLength, 0)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions base =
        PipelineOptions.builder().optBatchSize(batch).optSeed(1).optDropRemainder(false).build();
    Map<String, PipelineOptions> options = new LinkedHashMap<>();
    options.put("padded", base);
    options.put("bucketed", base.toBuilder().optBucketBoundaries(16, 32, 64, 128).build());
    options.put(
        "bucketed+",
        base.toBuilder().optBucketBoundaries(8, 12, 16, 24, 32, 48, 64, 96, 128, 192).build());
    System.out.printf(
        Locale.ROOT,
        "Text pipeline on %s (column %s, max length %d), batch %d%n",
        dataset,
        column,
        maxLength,
        batch);
    System.out.printf(
        Locale.ROOT, "%-10s %12s %10s %14s%n", "batches", "records/s", "padding", "real/padded");
    double realPerRecord = 0;
    for (Map.Entry<String, PipelineOptions> e : options.entrySet()) {
      DatasetPlan plan = DatasetPlanner.plan(seq, e.getValue(), CONF);
      double[] rates = new double[rounds];
      for (int r = 0; r < rounds; r++) {
        rates[r] = measure(plan, e.getValue(), seconds, false)[0];
      }
      double[] pad = measure(plan, e.getValue(), seconds, true);
      realPerRecord = pad[2];
      System.out.printf(
          Locale.ROOT,
          "%-10s %12.0f %9.1f%% %14.2f%n",
          e.getKey(),
          median(rates),
          100 * pad[1],
          1 - pad[1]);
    }
    System.out.printf(
        Locale.ROOT,
        "padded to the maximum (%d): %.1f%% padding (mean length %.1f)%n",
        maxLength,
        100 * (1 - realPerRecord / maxLength),
        realPerRecord);
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  /** Records/s and the padding fraction of the batches read in {@code seconds}. */
  private static double[] measure(
      DatasetPlan plan, PipelineOptions o, double seconds, boolean countPadding) {
    long n = 0;
    long positions = 0;
    long real = 0;
    long t = System.nanoTime();
    long until = t + (long) (seconds * 1e9);
    try (NDManager m = NDManager.newBaseManager();
        PipelineSource p = PipelineSource.create(plan, o, null, 0, 1, m, CONF)) {
      int epoch = 0;
      do {
        Iterator<Batch> it = p.epoch(epoch++, 0);
        p.prepare(epoch);
        while (it.hasNext() && System.nanoTime() < until) {
          try (Batch b = it.next()) {
            n += b.size();
            if (!countPadding) {
              continue;
            }
            if (b.features().size() == 2) { // ids and mask: count the mask's ones
              positions += b.features().get(1).getShape().size();
              real += (long) b.features().get(1).sum().getFloat();
            } else { // pre-padded ids: padding is 0 (ids start at 1 here)
              positions += b.features().get(0).getShape().size();
              real += b.features().get(0).gt(0).sum().getLong();
            }
          }
        }
      } while (System.nanoTime() < until);
    }
    return new double[] {
      n / ((System.nanoTime() - t) / 1e9),
      positions == 0 ? 0 : 1 - (double) real / positions,
      n == 0 ? 0 : (double) real / n
    };
  }

  /** Writes the records twice (as sequences, and pre-padded to 300); returns their lengths. */
  private static int[] generate(Path data, int records) throws IOException {
    Random r = new Random(42);
    int[] lengths = new int[records];
    for (int i = 0; i < records; i++) {
      lengths[i] = length(r);
    }
    Path marker = data.resolve("records-" + records);
    if (Files.exists(marker)) {
      return lengths;
    }
    for (String kind : new String[] {"seq", "max"}) {
      Path dir = data.resolve(kind);
      Files.createDirectories(dir);
      Random ids = new Random(7);
      int files = 8;
      for (int f = 0; f < files; f++) {
        try (OutputStream os =
                new BufferedOutputStream(
                    Files.newOutputStream(dir.resolve("part-" + f + ".tfrecord")), 1 << 20);
            TFRecordWriter w = new TFRecordWriter(os)) {
          for (int i = f; i < records; i += files) {
            long[] tokens = new long[kind.equals("seq") ? lengths[i] : MAX];
            for (int j = 0; j < lengths[i]; j++) {
              tokens[j] = 1 + ids.nextInt(VOCAB - 1);
            }
            Map<String, Feature> m = new LinkedHashMap<>();
            m.put("tokens", Feature.ofInt64(tokens));
            m.put("label", Feature.ofInt64(i % 4));
            w.write(Examples.encodeExample(m));
          }
        }
      }
    }
    Files.createFile(marker);
    return lengths;
  }
}
