package dev.sparktrainer.data;

/** What the pipeline measured during an epoch, for the trainer's time split and AUTOTUNE. */
public final class PipelineStats {
  private final long batches;
  private final long records;
  private final long waitNanos;
  private final long consumerNanos;
  private final int readerParallelism;
  private final int prefetchBatches;

  PipelineStats(
      long batches,
      long records,
      long waitNanos,
      long consumerNanos,
      int readerParallelism,
      int prefetchBatches) {
    this.batches = batches;
    this.records = records;
    this.waitNanos = waitNanos;
    this.consumerNanos = consumerNanos;
    this.readerParallelism = readerParallelism;
    this.prefetchBatches = prefetchBatches;
  }

  public long batches() {
    return batches;
  }

  public long records() {
    return records;
  }

  /** Time the consumer spent waiting for a batch. */
  public long waitNanos() {
    return waitNanos;
  }

  /** Wait time over the whole time since the epoch's first request. */
  public double waitFraction() {
    long total = waitNanos + consumerNanos;
    return total == 0 ? 0 : (double) waitNanos / total;
  }

  /** Reader threads allowed to decode at once (the AUTOTUNE setting at the end). */
  public int readerParallelism() {
    return readerParallelism;
  }

  /** Prefetch depth in batches (the AUTOTUNE setting at the end). */
  public int prefetchBatches() {
    return prefetchBatches;
  }

  @Override
  public String toString() {
    return String.format(
        "%d batches, %d records, wait %.1f%%, parallelism %d, prefetch %d",
        batches, records, 100 * waitFraction(), readerParallelism, prefetchBatches);
  }
}
