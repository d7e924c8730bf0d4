package dev.sparktrainer.train.step;

import java.io.Serializable;

/**
 * How the training step cuts and schedules its gradient all-reduces: the step's settings, not the
 * ring's (the communicator reduces whatever buffers it is handed). Validated by the trainer's
 * builder, where the bucket size is converted once from the MiB the user gives.
 *
 * @param bucketBytes gradient bucket size in bytes (a multiple of 8, at least 1024): one all-reduce
 *     per bucket; the first bucket (the last layers) is at most 1 MiB
 * @param overlap whether buckets are all-reduced while backward goes on (with more than one worker
 *     and more than one bucket)
 */
public record StepOptions(int bucketBytes, boolean overlap) implements Serializable {}
