package dev.sparktrainer.train.config;

import dev.sparktrainer.collective.CommOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import dev.sparktrainer.train.elastic.Rescale;
import dev.sparktrainer.train.input.BatchSourceFactory;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.StepOptions;
import java.io.Serializable;
import java.util.Objects;

/**
 * Everything a worker needs to train, as one immutable value in groups: validated on the driver by
 * the trainer's builder, shipped to every task in its closure, and changed only by withers (an
 * elastic relaunch on fewer workers, the staged training data). Live objects — the ring secret, the
 * callback, injected faults — are not configuration and travel apart ({@code
 * train.loop.TrainingRuntime}).
 *
 * @param model what is trained, with what loss and optimizer, in which precision, from which seed
 * @param devices where each worker trains
 * @param data what each worker reads, for how many epochs, in how many micro-batches per step
 * @param comm how gradients travel (handed whole to the communicator; the step takes its deadline)
 * @param step how the step cuts its gradients into buckets and overlaps their all-reduces
 * @param checkpoints where and how often rank 0 checkpoints
 * @param elastic how many workers, and what happens when the cluster offers another number
 */
public record TrainingConfig(
    Model model,
    Devices devices,
    Data data,
    CommOptions comm,
    StepOptions step,
    Checkpoints checkpoints,
    Elastic elastic)
    implements Serializable {

  public TrainingConfig {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(devices, "devices");
    Objects.requireNonNull(data, "data");
    Objects.requireNonNull(comm, "comm");
    Objects.requireNonNull(step, "step");
    Objects.requireNonNull(checkpoints, "checkpoints");
    Objects.requireNonNull(elastic, "elastic");
  }

  /**
   * @param spec the network
   * @param loss its loss
   * @param optimizer its optimizer, with the learning-rate schedule
   * @param precision forward and backward in float32, or in bfloat16 on a copy of the FP32 master
   *     weights
   * @param seed parameter initialization, shuffling and per-step randomness
   */
  public record Model(
      ModelSpec spec, LossSpec loss, OptimizerSpec optimizer, Precision precision, long seed)
      implements Serializable {}

  /**
   * @param gpus one GPU per worker (else the CPU)
   * @param cpuDevicesPerWorker CPU replicas per worker when it has no GPU (the in-machine split)
   * @param placement where parameters and optimizer state live; AUTO is resolved per worker
   */
  public record Devices(boolean gpus, int cpuDevicesPerWorker, OptimizerPlacement placement)
      implements Serializable {}

  /**
   * @param train the training data: per-worker batches
   * @param validation the validation data, or null
   * @param epochs passes over the training data
   * @param accumulateSteps micro-batches per optimizer step (gradient accumulation); 1: none
   */
  public record Data(
      BatchSourceFactory train, BatchSourceFactory validation, int epochs, int accumulateSteps)
      implements Serializable {
    /** This group with other training data. */
    public Data withTrain(BatchSourceFactory source) {
      return new Data(source, validation, epochs, accumulateSteps);
    }

    /** This group with other validation data (null: none). */
    public Data withValidation(BatchSourceFactory source) {
      return new Data(train, source, epochs, accumulateSteps);
    }
  }

  /**
   * @param dir where rank 0 writes checkpoints, or null for none
   * @param everySteps a checkpoint every this many global steps as well as at each epoch end; 0:
   *     epoch ends only
   * @param keep how many complete checkpoints are kept
   */
  public record Checkpoints(String dir, long everySteps, int keep) implements Serializable {}

  /**
   * @param numWorkers workers of this run (fewer than planned after an elastic relaunch)
   * @param minWorkers the fewest workers to go on with when the cluster offers fewer slots
   * @param plannedWorkers the job's worker count as configured
   * @param grow grow back toward plannedWorkers at an epoch end when the cluster offers more
   * @param rescale what a resume on another number of workers keeps
   */
  public record Elastic(
      int numWorkers, int minWorkers, int plannedWorkers, boolean grow, Rescale rescale)
      implements Serializable {
    /** This group for a run on {@code workers} workers. */
    public Elastic withNumWorkers(int workers) {
      return new Elastic(workers, minWorkers, plannedWorkers, grow, rescale);
    }
  }

  /** This configuration with another data group. */
  public TrainingConfig withData(Data d) {
    return new TrainingConfig(model, devices, d, comm, step, checkpoints, elastic);
  }

  /** This configuration for a run on {@code workers} workers. */
  public TrainingConfig withWorkers(int workers) {
    return new TrainingConfig(
        model, devices, data, comm, step, checkpoints, elastic.withNumWorkers(workers));
  }

  /** This run's workers. */
  public int numWorkers() {
    return elastic.numWorkers();
  }

  /** The per-step random seed of dropout and the like: distinct per rank and step, reproducible. */
  public int stepSeed(int rank, long globalStep) {
    long h =
        model.seed() * 0x9E3779B97F4A7C15L
            + rank * 0xBF58476D1CE4E5B9L
            + globalStep * 0x94D049BB133111EBL;
    h ^= h >>> 31;
    return (int) (h ^ (h >>> 32)) & 0x7fffffff;
  }

  /** This job's elastic layout policy (the training data's batch, order and this job's counts). */
  public ElasticPolicy elasticPolicy() {
    BatchSourceFactory train = data.train();
    return new ElasticPolicy(
        train.batchSize(),
        data.accumulateSteps(),
        elastic.plannedWorkers(),
        elastic.minWorkers(),
        elastic.rescale() == Rescale.LEARNING_RATE,
        checkpoints.dir(),
        new ElasticPolicy.DataOrder(train.globalOrder(), train.replaysEpochs(), train.orderKey()));
  }
}
