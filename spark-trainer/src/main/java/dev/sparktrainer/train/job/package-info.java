/**
 * The Spark side of a training job, on the driver and in the barrier tasks: the pre-flight checks
 * ({@link dev.sparktrainer.train.job.Preflight}), the input staging ({@link
 * dev.sparktrainer.train.job.InputStaging}), one run of the barrier job with all its plumbing — UI
 * names, job tag, fail-fast listener, slot watch ({@link dev.sparktrainer.train.job.BarrierJob}) —
 * and the task body that meets its peers through {@code BarrierTaskContext.allGather}, forms the
 * ring and runs the loop ({@link dev.sparktrainer.train.job.BarrierTrainingTask}). {@link
 * dev.sparktrainer.train.job.InProcessRunner} runs the same loop as threads, without Spark.
 */
package dev.sparktrainer.train.job;
