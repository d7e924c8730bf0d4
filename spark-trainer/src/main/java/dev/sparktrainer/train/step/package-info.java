/**
 * The training step, Spark-free: {@link dev.sparktrainer.train.step.TrainStep} runs forward and
 * backward over the model replicas of a worker's devices ({@link
 * dev.sparktrainer.train.step.ReplicaSet}), keeps parameters and optimizer state in flat per-bucket
 * device tensors the blocks' parameters are views of ({@code FlatState}), gathers gradients a
 * bucket at a time and moves them to the host arena only for the ring ({@code FlatGradients},
 * {@code BucketReducer}), updates them in one of two placements ({@code DeviceUpdater}, {@code
 * HostUpdater}) and counts what it pays a device for ({@link
 * dev.sparktrainer.train.step.StepLedger}). A batch reaches its replicas through the {@code device}
 * package (uploaded, on a GPU one step ahead; split across the replicas by {@code ReplicaSplit}).
 * Its times are read as {@link dev.sparktrainer.train.step.StepTimings} snapshots.
 */
package dev.sparktrainer.train.step;
