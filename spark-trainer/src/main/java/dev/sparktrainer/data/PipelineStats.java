package dev.sparktrainer.data;

/** What the pipeline measured during an epoch, for the trainer's time split and AUTOTUNE. */
public final class PipelineStats {
  private final long batches;
  private final long records;
  private final long waitNanos;
  private final long consumerNanos;
  private final int readerParallelism;
  private final int prefetchBatches;
  private final int imageColumns;
  private final long decodedImages;
  private final long decodeNanos;

  PipelineStats(
      long batches,
      long records,
      long waitNanos,
      long consumerNanos,
      int readerParallelism,
      int prefetchBatches) {
    this(batches, records, waitNanos, consumerNanos, readerParallelism, prefetchBatches, 0, 0, 0);
  }

  PipelineStats(
      long batches,
      long records,
      long waitNanos,
      long consumerNanos,
      int readerParallelism,
      int prefetchBatches,
      int imageColumns,
      long decodedImages,
      long decodeNanos) {
    this.imageColumns = imageColumns;
    this.decodedImages = decodedImages;
    this.decodeNanos = decodeNanos;
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

  /** The spec's image columns (encoded images decoded by the pipeline). */
  public int imageColumns() {
    return imageColumns;
  }

  /** Images in the batches handed out: records times the spec's image columns. */
  public long images() {
    return records * imageColumns;
  }

  /**
   * Images handed out per second since the epoch's first request (consumer time plus waits); 0
   * without image columns.
   */
  public double imagesPerSecond() {
    long total = waitNanos + consumerNanos;
    return total == 0 ? 0 : images() * 1e9 / total;
  }

  /**
   * Images the decoders decoded in this epoch (TFRecord data; read ahead, so it may run ahead of
   * {@link #images()}).
   */
  public long decodedImages() {
    return decodedImages;
  }

  /**
   * Wall time a decoding thread spent per image: the encoded bytes to the record's or batch's
   * values (decode, orientation, crop and resize, the copy), in milliseconds; NaN when no image was
   * decoded (no image column, Parquet data, or all from the cache).
   */
  public double decodeMillisPerImage() {
    return decodedImages == 0 ? Double.NaN : decodeNanos / 1e6 / decodedImages;
  }

  @Override
  public String toString() {
    String s =
        String.format(
            java.util.Locale.ROOT,
            "%d batches, %d records, wait %.1f%%, parallelism %d, prefetch %d",
            batches,
            records,
            100 * waitFraction(),
            readerParallelism,
            prefetchBatches);
    if (imageColumns > 0) {
      s +=
          String.format(
              java.util.Locale.ROOT,
              ", %.1f images/s, decode %.2f ms/image",
              imagesPerSecond(),
              decodeMillisPerImage());
    }
    return s;
  }
}
