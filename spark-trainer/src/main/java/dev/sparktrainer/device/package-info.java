/**
 * How a batch reaches the device, in one place: between the input pipeline ({@code data}, host
 * batches in direct buffers, no DJL) and the trainer ({@code train.*}), which reads {@link
 * dev.sparktrainer.device.Batch}es of tensors on a worker's device from a {@link
 * dev.sparktrainer.device.BatchSource}.
 *
 * <ul>
 *   <li>{@link dev.sparktrainer.device.PipelineSource} — the pipeline's host batches as a {@code
 *       BatchSource}: each uploaded as it is taken by {@code BatchUpload} (a tensor per column from
 *       its direct buffer, normalized in place first when a {@code Normalization} is given; on CPU
 *       the tensors wrap the host memory, which goes back to the pipeline's pools when the batch is
 *       closed);
 *   <li>{@link dev.sparktrainer.device.DeviceImages} — image transfer uint8: an image column
 *       crosses as one byte per pixel and becomes float32 there, augmented and normalized with the
 *       random choices the host drew, bit for bit the float32 path's tensors; its plan decides it,
 *       and the host pipeline's options then only draw. The host pipeline (TFRecord or Parquet
 *       data) reads its {@code hostPlan} (image columns held as bytes, four to a record's float
 *       slot: see the {@code data} package), so the batch's column already is the bytes: {@code
 *       BatchUpload} hands it to a uint8 tensor as it is when a row's values are a multiple of 4,
 *       else after one bulk copy per row that drops the last slot's padding;
 *   <li>{@link dev.sparktrainer.device.DevicePrefetch} — batch N+1 taken (uploaded) on a thread of
 *       its own while step N runs, on GPU workers; {@link dev.sparktrainer.device.PrefetchedSource}
 *       holds the training source and opens and closes that slot epoch by epoch;
 *   <li>{@link dev.sparktrainer.device.ReplicaSplit} — a worker's batch split across its local
 *       replicas, one slice per device.
 * </ul>
 *
 * <p>Layers: this package uses {@code data} (and DJL) and nothing of the trainer; {@code
 * train.input} makes {@code BatchSource}s, {@code train.loop} and {@code train.step} consume them
 * ({@code ArchitectureTest.deviceSitsBetweenDataAndTheTrainer}, {@code dataHasNoDeviceCode}). What
 * the step pays for a batch (heap uploads, bytes to the device) stays the step's ledger's to count
 * ({@code TrainStep.countBatch}, {@code Batch.direct()}, {@code Batch.uploadBytes()}).
 */
package dev.sparktrainer.device;
