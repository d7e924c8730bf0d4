/**
 * The trainer: {@link dev.sparktrainer.train.DistributedTrainer} runs synchronous data-parallel
 * training with MultiWorkerMirroredStrategy semantics as N barrier-mode Spark tasks and returns a
 * {@link dev.sparktrainer.train.TrainedModel} with its history. Its settings, as the command line,
 * the builder and the Estimator name them, with their units and allowed values, are one table:
 * {@link dev.sparktrainer.train.TrainerOption}.
 *
 * <p>This package is the facade; what it drives is in packages that form layers, each using only
 * the ones below it (ArchUnit checks it: {@code ArchitectureTest}):
 *
 * <ul>
 *   <li>{@code train.job} — the Spark side: pre-flight checks, input staging, the barrier job and
 *       its plumbing ({@code BarrierJob}), the barrier task that forms the ring ({@code
 *       BarrierTrainingTask}), the in-process runner for tests;
 *   <li>{@code train.loop} — the Spark-free worker loop ({@code TrainingLoop}): epochs, steps,
 *       micro-batches, the ordered epoch-end steps ({@code EpochEndStep}), the start and resume
 *       protocol ({@code ResumeNegotiation}), rank 0's checkpoint snapshots, the hooks (injected
 *       faults);
 *   <li>{@code train.config} — the immutable job configuration, in groups;
 *   <li>{@code train.step} — the training step over the worker's model replicas: flat per-bucket
 *       device state, gradients gathered per bucket and moved to the host only for the ring, the
 *       two optimizer placements, the ledger of what a device pays for;
 *   <li>{@code train.input} — where batches come from: a {@code BatchSourceFactory}, the input
 *       pipeline's ({@code DatasetSource}) or data that fits in memory ({@code InMemoryDataset});
 *       the batches themselves, and how they reach the device, are the {@code device} package's,
 *       below all of {@code train};
 *   <li>{@code train.elastic} — the elastic layout policy, the grow request, the relaunch loop;
 *   <li>{@code train.metrics} — what training reports: per-epoch metrics, progress, straggler
 *       reports, the history, and the callback that receives them.
 * </ul>
 */
package dev.sparktrainer.train;
