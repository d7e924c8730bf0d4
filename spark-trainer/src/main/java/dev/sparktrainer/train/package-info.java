/**
 * The trainer: {@link dev.sparktrainer.train.DistributedTrainer} runs synchronous data-parallel
 * training with MultiWorkerMirroredStrategy semantics as N barrier-mode Spark tasks and returns a
 * {@link dev.sparktrainer.train.TrainedModel} with its {@link
 * dev.sparktrainer.train.metrics.History}. Its settings, as the command line, the builder and the
 * Estimator name them, with their units and allowed values, are one table: {@link
 * dev.sparktrainer.train.TrainerOption}.
 *
 * <p>Inside: the pre-flight checks on the driver ({@code Preflight}); the barrier task, which meets
 * its peers through {@code BarrierTaskContext.allGather} and forms the collective ring ({@code
 * BarrierTrainingTask}); the Spark-free worker loop ({@code TrainingLoop}) over the model replicas
 * of the worker's devices ({@code ReplicaSet}), whose step ({@code TrainStep}) keeps parameters and
 * optimizer state in flat per-bucket device tensors the blocks' parameters are views of ({@code
 * FlatState}), gathers gradients a bucket at a time and moves them to the host arena only for the
 * ring ({@code FlatGradients}, {@code BucketReducer}), updates them in one of two placements
 * ({@code DeviceUpdater}, {@code HostUpdater}) and counts what it pays a device for ({@code
 * StepLedger}); batches reach a GPU one step ahead ({@code DevicePrefetch}); and the training state
 * that checkpoints and the start-up broadcast carry ({@code TrainingState}), read, checked and
 * broadcast by rank 0 at the start ({@code ResumeNegotiation}). What is elastic — the layout
 * policy, the grow request, the driver's relaunch loop — sits below, in {@code train.elastic}. Each
 * rank's step times ({@code StepTimes}) are gathered at every epoch's end into rank 0's {@link
 * dev.sparktrainer.train.metrics.StragglerReport}, which names the slowest rank. Data comes from a
 * {@link dev.sparktrainer.train.input.BatchSourceFactory}: the input pipeline's, or {@link
 * dev.sparktrainer.train.input.InMemoryDataset} for data that fits in memory.
 */
package dev.sparktrainer.train;
