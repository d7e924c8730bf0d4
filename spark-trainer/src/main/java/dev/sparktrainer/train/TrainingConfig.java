package dev.sparktrainer.train;

import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.collective.RingTls;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import java.io.Serializable;
import java.time.Duration;

/** Everything a worker needs, validated on the driver and shipped in the task closure. */
final class TrainingConfig implements Serializable {
  private static final long serialVersionUID = 1L;

  ModelSpec model;
  LossSpec loss;
  OptimizerSpec optimizer;
  BatchSourceFactory trainData;
  BatchSourceFactory validationData;
  int numWorkers;
  int epochs;
  long seed;
  String checkpointDir;
  long checkpointEverySteps;
  int keepCheckpoints;

  /** CPU replicas per worker when it has no GPU: exercises the in-machine split on CPU. */
  int cpuDevicesPerWorker = 1;

  boolean useGpus;

  /** Gradient bucket size: one all-reduce per bucket (the first bucket is smaller, see Worker). */
  int fusionBucketBytes;

  /** Micro-batches per optimizer step (gradient accumulation); 1: none. */
  int accumulateSteps = 1;

  /** What a resume on another number of workers keeps. */
  Rescale rescale = Rescale.GLOBAL_BATCH;

  /** The fewest workers to go on with when the cluster offers fewer than numWorkers slots. */
  int minWorkers;

  /** The job's numWorkers as configured (numWorkers is less after an elastic relaunch on fewer). */
  int plannedWorkers;

  /** Grow back toward plannedWorkers at an epoch end when the cluster offers more slots. */
  boolean grow;

  /**
   * All-reduce buckets on a communication thread while backward goes on (false: after backward).
   */
  boolean overlap = true;

  /** Where parameters and optimizer state live; AUTO is resolved per worker (GPU or CPU). */
  OptimizerPlacement placement = OptimizerPlacement.AUTO;

  Duration operationTimeout;

  /** TLS for the ring's sockets (null: plain TCP, HMAC-authenticated at set-up). */
  RingTls ringTls;

  /** Same-host ring neighbours exchange gradients through shared memory (never with TLS). */
  boolean ringSharedMemory = true;

  /** Forward and backward in float32, or in bfloat16 on a copy of the float32 master weights. */
  Precision precision = Precision.FP32;

  /** How gradient all-reduce payloads travel (FP32, or BF16/FP16 for half the bytes). */
  WirePrecision gradientPrecision = WirePrecision.FP32;

  Duration connectTimeout;
  JobSecret secret;

  /** Rank 0's hook (progress, TensorBoard); null for none. */
  TrainingCallback callback;

  /** Faults a test injects (testing only): {@link FaultInjection#NONE} in production. */
  FaultInjection faults = FaultInjection.NONE;

  /** The per-step random seed of dropout and the like: distinct per rank and step, reproducible. */
  int stepSeed(int rank, long globalStep) {
    long h =
        seed * 0x9E3779B97F4A7C15L + rank * 0xBF58476D1CE4E5B9L + globalStep * 0x94D049BB133111EBL;
    h ^= h >>> 31;
    return (int) (h ^ (h >>> 32)) & 0x7fffffff;
  }

  /** This job's elastic layout policy (the training data's batch, order and this job's counts). */
  ElasticPolicy elasticPolicy() {
    return new ElasticPolicy(
        trainData.batchSize(),
        accumulateSteps,
        plannedWorkers,
        minWorkers,
        rescale == Rescale.LEARNING_RATE,
        checkpointDir,
        new ElasticPolicy.DataOrder(
            trainData.globalOrder(), trainData.replaysEpochs(), trainData.orderKey()));
  }
}
