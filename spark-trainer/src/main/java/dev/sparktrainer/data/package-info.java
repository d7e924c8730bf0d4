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
 *
 * <p>Images as bytes: a decoded record is one float array of slots ({@code Slots}: an int64 takes
 * two as raw bits). When image columns travel to the device as uint8 and nothing on the host needs
 * them as floats, the device package reads {@link
 * dev.sparktrainer.data.DatasetPlan#withImageBytes()}: each image column's {@link
 * dev.sparktrainer.data.DatasetSpec.Feature#bytes()} is set, so its {@code size()} — the slots
 * everything here sizes records, the shuffle buffer, the cache, batch columns and the memory budget
 * by — is {@code ceil(values / 4)}, and the decoder ({@code Images}) writes the decoded bytes four
 * to a slot as raw bits (native order, one bulk copy; into a batch row, the bytes themselves). The
 * slots are only ever copied as floats (arrays, {@code FloatBuffer}s, the cache's raw bits), never
 * computed with, so a batch column copied from them holds the image's bytes, one per pixel: no
 * float conversion on the host, a quarter of the memory. Nothing else changes: a spec as the user
 * builds it has no bytes column, so the float32 path is the code it was. Decoders count their
 * images and time ({@code ImageClock}) for {@link dev.sparktrainer.data.PipelineStats}' images/s
 * and decode time per image; AUTOTUNE's ceiling for decoding readers is the task's CPUs ({@code
 * spark.task.cpus} on an executor; the machine's cores in local mode or outside Spark) and the
 * cycle length ({@code PipelineContext.decodeThreads}).
 */
package dev.sparktrainer.data;
