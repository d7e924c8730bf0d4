package dev.sparktrainer.data;

/** Streams one epoch of a dataset in this JVM and prints what it read (for the bounded-memory test). */
public final class StreamMain {
  private StreamMain() {}

  public static void main(String[] args) throws Exception {
    java.nio.file.Path dir = java.nio.file.Path.of(args[0]);
    int width = Integer.parseInt(args[1]);
    long budget = Long.parseLong(args[2]);
    PipelineOptions o = PipelineOptions.builder().setBatchSize(64).optShuffleBuffer(1000)
        .optMemoryBudgetBytes(budget).optDropRemainder(false).build();
    DatasetPlan plan = DatasetPlanner.plan(TestData.spec(dir, width), o, TestData.CONF);
    long records = 0;
    try (InputPipeline p = InputPipeline.create(plan, o, 0, 1, null, TestData.CONF)) {
      var it = p.hostEpoch(0, 0);
      while (it.hasNext()) {
        records += it.next().size;
      }
    }
    Runtime rt = Runtime.getRuntime();
    System.out.println("records=" + records + " maxHeapMb=" + rt.maxMemory() / (1 << 20));
  }
}
