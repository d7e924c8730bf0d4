package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;

/**
 * Where the default shuffle's time goes ({@code bin/bench-shuffle-cost}): the work one record costs
 * the pipeline, done on one thread with no hand-offs, in CPU nanoseconds per record (the calling
 * thread's CPU time, which a machine shared with other work disturbs far less than wall time):
 *
 * <ol>
 *   <li>{@code scan}: framing + CRC (the raw scan of bench-pipeline);
 *   <li>{@code decode into batch}: + the decode straight into a batch row (no shuffle buffer);
 *   <li>{@code shuffle N (arrays)}: + today's shuffle buffer of N records: decode into a record
 *       array, put it in a random slot of N, copy the evicted record into the batch;
 *   <li>{@code shuffle N (scatter)}: + the shuffle computed on indices ahead of the data, each
 *       record decoded from the reader's buffer straight into the output row it is assigned
 *       (records move once; the open batches then span the shuffle's whole window).
 * </ol>
 *
 * On two cores the pipeline can at best reach {@code 2 × scan / cost} of the raw scan (both cores
 * busy, no hand-off costs): the table prints that ceiling for each line. Runs on bench-pipeline's
 * dataset (784 floats and an int64 label per record). Usage: {@code ShuffleCostBenchmark [--data
 * DIR] [--rounds 6] [--shuffle 10000] [--small-shuffle 500]}.
 */
public final class ShuffleCostBenchmark {
  private static final int WIDTH = 784;
  private static final int BATCH = 64;
  private static final Configuration CONF = new Configuration();

  private ShuffleCostBenchmark() {}

  public static void main(String[] args) throws Exception {
    Path data = Path.of("target/bench/pipeline-data");
    int rounds = 6;
    int shuffle = 10_000;
    int small = 500;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--data":
          data = Path.of(args[++i]);
          break;
        case "--rounds":
          rounds = Integer.parseInt(args[++i]);
          break;
        case "--shuffle":
          shuffle = Integer.parseInt(args[++i]);
          break;
        case "--small-shuffle":
          small = Integer.parseInt(args[++i]);
          break;
        default:
          throw new IllegalArgumentException(
              "Unknown argument "
                  + args[i]
                  + " (expected --data, --rounds, --shuffle, --small-shuffle)");
      }
    }
    if (!Files.isDirectory(data)) {
      throw new IllegalArgumentException(
          "No dataset at " + data + ": run bin/bench-pipeline first (it writes it)");
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(data.toString())
            .addFeature("pixels", WIDTH)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    DatasetPlan plan =
        DatasetPlanner.plan(spec, PipelineOptions.builder().optBatchSize(BATCH).build(), CONF);
    String[] names = {
      "scan (framing + CRC)",
      "+ decode into batch (no shuffle buffer)",
      "+ shuffle " + small + " (arrays; fits in cache)",
      "+ shuffle " + shuffle + " (arrays, as today)",
      "+ shuffle " + shuffle + " (scatter, indices ahead)"
    };
    double[] best = new double[names.length];
    Arrays.fill(best, Double.MAX_VALUE);
    Work w = new Work(plan, spec, shuffle, small);
    for (int round = -1; round < rounds; round++) { // round -1 warms up (JIT)
      StringBuilder line = new StringBuilder("round " + (round + 1) + ":");
      for (int mode = 0; mode < names.length; mode++) {
        double ns = w.run(mode);
        line.append(String.format(Locale.ROOT, " %.0f", ns));
        if (round >= 0) {
          best[mode] = Math.min(best[mode], ns);
        }
      }
      System.out.println(
          line.append(" cpu-ns/record; load ")
              .append(ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage()));
    }
    System.out.printf(
        Locale.ROOT,
        "%n%-48s %14s %10s %22s%n",
        "one thread, " + plan.totalRecords() + " records",
        "cpu-ns/record",
        "× scan",
        "2-core ceiling vs scan");
    for (int mode = 0; mode < names.length; mode++) {
      System.out.printf(
          Locale.ROOT,
          "%-48s %14.0f %10.2f %21.0f%%%n",
          names[mode],
          best[mode],
          best[mode] / best[0],
          100 * 2 * best[0] / best[mode]);
    }
  }

  /** The buffers of all modes, kept across rounds so that only the first round pays page faults. */
  private static final class Work {
    private final DatasetPlan plan;
    private final RecordDecoder decoder;
    private final int shuffle;
    private final int small;
    private final float[][] slots;
    private final int[] outputOf; // scatter: the output position of each input position
    private final ByteBuffer[][] ring; // scatter: the open batches, by output batch number
    private final ByteBuffer[] batch = {
      ByteBuffer.allocateDirect(BATCH * WIDTH * 4).order(ByteOrder.nativeOrder())
    };
    private final ThreadMXBean threads = ManagementFactory.getThreadMXBean();

    Work(DatasetPlan plan, DatasetSpec spec, int shuffle, int small) {
      this.plan = plan;
      this.decoder = new RecordDecoder(spec);
      this.shuffle = shuffle;
      this.small = small;
      this.slots = new float[Math.max(shuffle, small) + 1][WIDTH];
      this.outputOf = shuffledPositions((int) plan.totalRecords(), shuffle);
      // The scatter's open batches: a record stays in a shuffle buffer of N for about N records on
      // average, with a long tail (a batch is complete once its last record arrives): 8N records'
      // worth.
      this.ring = new ByteBuffer[Math.max(1, 8 * shuffle / BATCH)][];
      for (int i = 0; i < ring.length; i++) {
        ring[i] =
            new ByteBuffer[] {
              ByteBuffer.allocateDirect(BATCH * WIDTH * 4).order(ByteOrder.nativeOrder())
            };
      }
    }

    /**
     * tf.data's shuffle buffer of {@code n} run on positions: fill, then evict a random one per
     * arrival; drain.
     */
    private static int[] shuffledPositions(int total, int n) {
      int[] out = new int[total];
      int[] buf = new int[n];
      Random rnd = new Random(42);
      int held = 0;
      int next = 0;
      for (int i = 0; i < total; i++) {
        if (held < n) {
          buf[held++] = i;
          continue;
        }
        int k = rnd.nextInt(held);
        out[buf[k]] = next++;
        buf[k] = i;
      }
      while (held > 0) {
        int k = rnd.nextInt(held);
        out[buf[k]] = next++;
        buf[k] = buf[--held];
      }
      return out;
    }

    /** One pass over the dataset in {@code mode}; CPU ns per record. */
    double run(int mode) throws IOException {
      int n = mode == 2 ? small : shuffle;
      FloatBuffer rows = batch[0].asFloatBuffer();
      float[] spare = slots[slots.length - 1];
      Random rnd = new Random(7);
      long start = threads.getCurrentThreadCpuTime();
      int count = 0;
      for (Split s : plan.splits()) {
        try (TFRecordReader r =
            TFRecordFiles.open(
                new org.apache.hadoop.fs.Path(s.path()),
                s.start(),
                s.length(),
                CONF,
                TFRecordCompression.NONE,
                TFRecordReader.DEFAULT_MAX_RECORD_LENGTH,
                CorruptRecordPolicy.FAILFAST)) {
          while (r.next()) {
            int row = count % BATCH;
            switch (mode) {
              case 0:
                break;
              case 1:
                decoder.decodeInto(r.buffer(), r.dataOffset(), r.dataLength(), batch, row);
                break;
              case 2:
              case 3:
                {
                  decoder.decode(r.buffer(), r.dataOffset(), r.dataLength(), spare);
                  int k = rnd.nextInt(n);
                  float[] out = slots[k];
                  slots[k] = spare;
                  spare = out;
                  rows.put(row * WIDTH, out, 0, WIDTH);
                  break;
                }
              default:
                {
                  int to = outputOf[count];
                  decoder.decodeInto(
                      r.buffer(),
                      r.dataOffset(),
                      r.dataLength(),
                      ring[(to / BATCH) % ring.length],
                      to % BATCH);
                }
            }
            count++;
          }
        }
      }
      slots[slots.length - 1] = spare;
      return (threads.getCurrentThreadCpuTime() - start) / (double) count;
    }
  }
}
