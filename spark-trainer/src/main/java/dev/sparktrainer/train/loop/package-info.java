/**
 * The worker loop, Spark-free: {@link dev.sparktrainer.train.loop.TrainingLoop} runs epochs, steps
 * and micro-batches over a {@code train.step.TrainStep} (its batches through the {@code device}
 * package's {@code PrefetchedSource}: one ahead on a GPU), and ends every epoch with the {@link
 * dev.sparktrainer.train.loop.EpochEndStep}s in their order on every rank ({@link
 * dev.sparktrainer.train.loop.EpochEnd}). Rank 0 reads, checks and broadcasts the start state
 * ({@code ResumeNegotiation}, {@code TrainingState}) and checkpoints {@link
 * dev.sparktrainer.train.loop.Snapshot}s in the background. What watches the loop is a {@link
 * dev.sparktrainer.train.loop.LoopHook}; injected faults ({@link
 * dev.sparktrainer.train.loop.FaultInjection}, tests only) are one. The live objects of a run
 * travel beside its configuration ({@link dev.sparktrainer.train.loop.TrainingRuntime}).
 */
package dev.sparktrainer.train.loop;
