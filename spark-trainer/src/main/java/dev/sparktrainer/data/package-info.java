/**
 * The streaming input pipeline, with {@code tf.data} semantics: a {@link
 * dev.sparktrainer.data.DatasetSpec} (paths or globs on any Hadoop FileSystem, TFRecord or Parquet,
 * feature and label columns with their shapes) is planned into splits on the driver, sharded per
 * worker and epoch, then streamed inside each worker through interleaved readers, a shuffle buffer,
 * decoding, batching and a bounded prefetch queue into {@link dev.sparktrainer.data.HostBatch}es:
 * direct buffers, pooled, on the Java side. Memory is bounded by configuration, never by the
 * dataset size. {@link dev.sparktrainer.data.InputPipeline} is the entry point; each epoch is an
 * {@code EpochStream} fed either by an {@code Interleaver} and a producer (the deterministic order)
 * or by {@code UnorderedReaders} ({@code deterministic=false}, no shuffle buffer) — or, with a
 * shuffle buffer and with {@code PipelineOptions.optShufflePath(PLANNED)}, by {@code
 * PlannedReaders}: the same order worked out on record indices from the plan's counts ({@code
 * ShufflePlan}), each record decoded by its reader straight into its batch row. A user-defined
 * per-example map ({@link dev.sparktrainer.data.ExampleTransform}, tf.data's {@code map}; built-in
 * image augmentations in {@link dev.sparktrainer.data.ImageAugment}) runs in the readers' threads
 * on each decoded {@link dev.sparktrainer.data.Example} ({@code MappedStream}).
 *
 * <p>Readers: {@code TFRecordStream} (the data source's codec) and {@code ParquetStream}, which
 * reads projected columns a page at a time ({@code ParquetColumns}; number columns by {@code
 * BulkColumnReader}: levels and dictionary ids decoded by runs, values gathered or copied in bulk,
 * then a row's values into record arrays or batch buffers in runs; binary and boolean columns by
 * parquet-mr's column readers) — measured against parquet-mr's column readers, its example {@code
 * Group} API, its converter API and Spark's vectorized reader by bench-pipeline's Parquet rows.
 *
 * <p>{@link dev.sparktrainer.data.FeatureStatistics} (one distributed pass over a plan) and {@link
 * dev.sparktrainer.data.Normalization} (fitted on them, applied to each host batch as it goes to
 * the device) are feature normalization.
 *
 * <p>For a worker, the same number of steps every epoch on every worker, and an iterator of host
 * batches per epoch. Nothing here touches a device (no DJL import: {@code
 * ArchitectureTest.dataHasNoDeviceCode}): the {@code device} package uploads the host batches
 * ({@code PipelineSource}, the trainer's {@code BatchSource}), including the image columns that
 * cross as bytes ({@code DeviceImages}, whose plan gives the pipeline its host options).
 */
package dev.sparktrainer.data;
