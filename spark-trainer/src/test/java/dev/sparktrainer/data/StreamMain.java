package dev.sparktrainer.data;

import java.nio.file.Path;

/**
 * Streams epochs of a dataset in this JVM, each next epoch prepared ahead as the trainer does, and
 * prints what it read (for the bounded-memory test). Args: dir, width, budget bytes, shuffle
 * buffer, epochs, and optionally "unordered" (deterministic=false).
 */
public final class StreamMain {
  private StreamMain() {}

  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    int width = Integer.parseInt(args[1]);
    long budget = Long.parseLong(args[2]);
    int shuffle = Integer.parseInt(args[3]);
    int epochs = Integer.parseInt(args[4]);
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(64)
            .optShuffleBuffer(shuffle)
            .optMemoryBudgetBytes(budget)
            .optDropRemainder(false)
            .optDeterministic(!(args.length > 5 && args[5].equals("unordered")))
            .build();
    DatasetPlan plan = DatasetPlanner.plan(TestData.spec(dir, width), o, TestData.CONF);
    long records = 0;
    boolean decodesInBatch;
    boolean unordered;
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, TestData.CONF)) {
      decodesInBatch = p.decodesInBatch();
      unordered = p.unordered();
      for (int e = 0; e < epochs; e++) {
        var it = p.hostEpoch(e, 0);
        if (e + 1 < epochs) {
          p.prepare(e + 1);
        }
        while (it.hasNext()) {
          records += it.next().size;
        }
      }
    }
    Runtime rt = Runtime.getRuntime();
    System.out.println(
        "records="
            + records
            + " decodesInBatch="
            + decodesInBatch
            + " unordered="
            + unordered
            + " maxHeapMb="
            + rt.maxMemory() / (1 << 20));
  }
}
