package dev.sparktrainer.data;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * What continuing an interrupted epoch on another worker count costs each new worker at its resume
 * ({@code bin/bench-resume-replay}): working out which records the checkpoint's layout consumed
 * ({@link ConsumedRecords#replay}: every old worker's shuffled order on record indices) and this
 * worker's share of the rest ({@link WorkerShard#remainder}). No file is read: the plan is made of
 * splits with record counts only. Prints, per dataset size, the CPU seconds of each part on one
 * thread and the heap the replay holds. Usage: {@code ResumeReplayBenchmark [--records
 * 1000000,10000000,100000000] [--split-records 100000] [--from 8] [--to 6] [--batch 256] [--shuffle
 * 10000]}.
 */
public final class ResumeReplayBenchmark {
  private ResumeReplayBenchmark() {}

  public static void main(String[] args) throws Exception {
    long[] sizes = {1_000_000L, 10_000_000L, 100_000_000L};
    long perSplit = 100_000;
    int from = 8;
    int to = 6;
    int batch = 256;
    int shuffle = 10_000;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--records" -> {
          String[] p = args[++i].split(",");
          sizes = new long[p.length];
          for (int j = 0; j < p.length; j++) {
            sizes[j] = Long.parseLong(p[j].trim());
          }
        }
        case "--split-records" -> perSplit = Long.parseLong(args[++i]);
        case "--from" -> from = Integer.parseInt(args[++i]);
        case "--to" -> to = Integer.parseInt(args[++i]);
        case "--batch" -> batch = Integer.parseInt(args[++i]);
        case "--shuffle" -> shuffle = Integer.parseInt(args[++i]);
        default ->
            throw new IllegalArgumentException(
                "Unknown option "
                    + args[i]
                    + ": expected --records, --split-records, --from, --to, --batch or --shuffle");
      }
    }
    ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
    System.out.printf(
        Locale.ROOT,
        "# %d -> %d workers, batch %d, shuffle buffer %d, %d records per split, half the epoch"
            + " consumed%n",
        from,
        to,
        batch,
        shuffle,
        perSplit);
    System.out.printf(
        Locale.ROOT,
        "| %-12s | %-7s | %-18s | %-18s | %-14s | %-14s |%n",
        "records",
        "splits",
        "replay CPU s",
        "remainder CPU s",
        "replay ns/rec",
        "heap held MiB");
    System.out.println("|---|---|---|---|---|---|");
    for (long total : sizes) {
      List<Split> splits = new ArrayList<>();
      for (long n = 0; n < total; n += perSplit) {
        splits.add(
            new Split(
                splits.size(),
                "/bench/part-" + splits.size(),
                0,
                Long.MAX_VALUE,
                Math.min(perSplit, total - n),
                "len=0"));
      }
      DatasetSpec spec =
          DatasetSpec.builder()
              .addPath("/bench")
              .addFeature("x", 1)
              .setLabel("y", DatasetSpec.LabelType.INT)
              .build();
      DatasetPlan plan = new DatasetPlan(spec, splits);
      PipelineOptions o =
          PipelineOptions.builder()
              .optBatchSize(batch)
              .optShuffleBuffer(shuffle)
              .optSharding(PipelineOptions.ShardingPolicy.DATA)
              .optSeed(1)
              .build();
      long steps = plan.shard(0, from, o).stepsPerEpoch();
      List<EpochSegment> earlier = List.of(new EpochSegment(from, batch, steps / 2));
      System.gc();
      long heap0 = used();
      long t0 = cpu.getCurrentThreadCpuTime();
      ConsumedRecords consumed = ConsumedRecords.replay(plan, o, 3, earlier);
      long t1 = cpu.getCurrentThreadCpuTime();
      WorkerShard rest = WorkerShard.remainder(plan, 0, to, o, consumed);
      long t2 = cpu.getCurrentThreadCpuTime();
      System.gc();
      long held = used() - heap0;
      if (consumed.total() != from * (steps / 2) * batch || rest.stepsPerEpoch() <= 0) {
        throw new IllegalStateException(
            "replay counted " + consumed.total() + " records, remainder " + rest.stepsPerEpoch());
      }
      System.out.printf(
          Locale.ROOT,
          "| %-12d | %-7d | %-18.2f | %-18.2f | %-14.1f | %-14.1f |%n",
          total,
          splits.size(),
          (t1 - t0) / 1e9,
          (t2 - t1) / 1e9,
          (double) (t1 - t0) / total,
          held / 1048576.0);
    }
  }

  private static long used() {
    Runtime r = Runtime.getRuntime();
    return r.totalMemory() - r.freeMemory();
  }
}
