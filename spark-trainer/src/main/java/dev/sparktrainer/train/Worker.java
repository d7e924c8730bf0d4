package dev.sparktrainer.train;

import ai.djl.Device;
import ai.djl.training.loss.Loss;
import dev.sparktrainer.checkpoint.AsyncCheckpointWriter;
import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.StateArray;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.data.Batch;
import dev.sparktrainer.data.BatchSource;
import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.train.elastic.GrowRequest;
import java.io.IOException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;

/**
 * One replica's training loop, with MultiWorkerMirroredStrategy semantics; Spark-free (the barrier
 * task and the in-process runner only supply the communicator and the devices).
 *
 * <ol>
 *   <li>Rank 0 reads the latest checkpoint, or takes its freshly initialized parameters, and
 *       broadcasts that state ({@link ResumeNegotiation}): every replica starts from identical bits
 *       at the same position.
 *   <li>Each step: next batch (data wait), forward and backward on every local device (compute),
 *       gradients and batch-norm statistics averaged with the fused ring all-reduce (all-reduce),
 *       the same optimizer update on every replica and the new values written back (optimizer).
 *   <li>Every {@code checkpointEverySteps} steps and at each epoch end, rank 0 writes a checkpoint.
 *   <li>At each epoch end: metrics reduced over workers, validation on every worker's shard, and a
 *       SHA-256 of all parameters compared across replicas; any difference fails the job.
 * </ol>
 */
final class Worker {
  private static final System.Logger LOG = System.getLogger(Worker.class.getName());

  private final TrainingConfig cfg;
  private final int rank;
  private final int size;
  private final Communicator comm;
  private final List<Device> devices;
  private final int attempt;
  private final Configuration hadoopConf;

  /** AUTO's choice on the CPU (see {@link #resolvePlacement}). */
  static final OptimizerPlacement CPU_PLACEMENT = OptimizerPlacement.HOST;

  private final int cpus;

  /** Where this rank runs, for the straggler report (see {@link #on}). */
  private String host;

  private String executorId = "local";

  /**
   * @param cpus the task's CPUs: the host optimizer's threads
   */
  Worker(
      TrainingConfig cfg,
      Communicator comm,
      List<Device> devices,
      int attempt,
      Configuration hadoopConf,
      int cpus) {
    this.cpus = Math.max(1, cpus);
    this.cfg = cfg;
    this.rank = comm.rank();
    this.size = comm.size();
    this.comm = comm;
    this.devices = devices;
    this.attempt = attempt;
    this.hadoopConf = hadoopConf;
    String peer = comm.peers().get(rank);
    this.host = peer.substring(0, Math.max(0, peer.lastIndexOf(':'))).replaceAll("^\\[|\\]$", "");
  }

  /**
   * Names this rank's host and Spark executor in the straggler report (default: its ring host,
   * "local").
   */
  Worker on(String host, String executorId) {
    this.host = host;
    this.executorId = executorId;
    return this;
  }

  WorkerResult run() throws IOException {
    CheckpointStore store =
        cfg.checkpointDir == null
            ? null
            : new CheckpointStore(cfg.checkpointDir, hadoopConf, cfg.keepCheckpoints)
                .withBeforeRename(cfg.faults.beforeCheckpointRename());
    try (ReplicaSet replicas = new ReplicaSet(cfg.model, devices, (int) cfg.seed)) {
      int[] trainableSizes = new int[replicas.trainable.length];
      for (int j = 0; j < trainableSizes.length; j++) {
        trainableSizes[j] = replicas.sizes[replicas.trainable[j]];
      }
      Optimizer optimizer = cfg.optimizer.newOptimizer(trainableSizes);
      OptimizerPlacement placement = resolvePlacement(cfg.placement, devices);
      List<EpochMetrics> history;
      List<Resume> resumes;
      List<StragglerReport> stragglers = new ArrayList<>();
      StepTimes times = new StepTimes(cfg.seed, host, executorId);
      boolean stoppedToGrow = false;
      try (AsyncCheckpointWriter writer =
              rank == 0 && store != null ? new AsyncCheckpointWriter(store) : null;
          TrainStep step =
              new TrainStep(
                  replicas,
                  cfg.loss,
                  comm,
                  optimizer,
                  placement,
                  cpus,
                  cfg.fusionBucketBytes,
                  cfg.overlap,
                  cfg.overlap && size > 1,
                  cfg.operationTimeout,
                  cfg.precision);
          TrainSource train = new TrainSource();
          BatchSource validation =
              cfg.validationData == null
                  ? null
                  : cfg.validationData.create(rank, size, replicas.manager(), hadoopConf);
          ProgressHook progress = new ProgressHook(cfg, rank, size)) {
        TrainingState state =
            new ResumeNegotiation(cfg, comm, attempt)
                .start(replicas, store, step.updater, optimizer);
        // The layout the start chose (another per-worker batch when resuming a checkpoint of
        // another
        // worker count): the data is dealt with its batch size.
        BatchSourceFactory data =
            state.batchSize == 0 || state.batchSize == cfg.trainData.batchSize()
                ? cfg.trainData
                : cfg.trainData.withBatchSize(state.batchSize);
        BatchSource source = train.source = data.create(rank, size, replicas.manager(), hadoopConf);
        int accumulate = state.accumulateSteps;
        long globalBatch = (long) state.batchSize * accumulate * size;
        if (rank == 0) {
          LOG.log(
              System.Logger.Level.INFO,
              "rank 0: optimizer on the "
                  + placement.name().toLowerCase(Locale.ROOT)
                  + ", "
                  + step.buckets.gradientBuckets()
                  + " gradient bucket(s) of up to "
                  + (cfg.fusionBucketBytes >> 10)
                  + " KiB, "
                  + (cfg.overlap && size > 1
                      ? "all-reduce overlapped with backward in "
                          + step.segmentCount()
                          + " segment(s)"
                      : "all-reduce after backward"));
        }
        Loss loss = cfg.loss.newLoss();
        history = new ArrayList<>(state.history);
        resumes = List.copyOf(state.resumes);
        long globalStep = state.globalStep;
        long steps = optimizerSteps(checkedStepsPerEpoch(source), accumulate);
        progress.start(steps, globalStep, attempt, hadoopConf);
        for (int epoch = state.epoch; epoch < cfg.epochs; epoch++) {
          long startStep = epoch == state.epoch ? state.stepInEpoch : 0;
          // Records of the epoch's global order consumed so far (the portable data position).
          long consumed = epoch == state.epoch ? state.consumedRecords : 0;
          // A resume on another layout continues the epoch with the records not yet consumed.
          boolean byRecords = epoch == state.epoch && state.continueByRecords;
          // Or, for a source that replays epochs, with the records the earlier layouts of this
          // epoch (before a resume on another worker count) did not consume.
          List<EpochSegment> earlier =
              epoch == state.epoch ? state.earlierSegments : List.<EpochSegment>of();
          long segmentStart = earlier.isEmpty() ? 0 : state.segmentStartStep;
          long epochSteps =
              byRecords
                  ? startStep + source.stepsAfter(consumed) / accumulate
                  : earlier.isEmpty()
                      ? steps
                      : segmentStart + source.stepsAfter(epoch, earlier) / accumulate;
          // lossSum, correct, samples, then the regression sums; rank 0 carries the global sums
          // restored from a checkpoint.
          double[] acc = new double[3 + EpochMetrics.Regression.SUMS];
          if (epoch == state.epoch && rank == 0) {
            System.arraycopy(state.partial, 0, acc, 0, Math.min(acc.length, state.partial.length));
          }
          progress.epochBegin(acc);
          long waitNanos = 0;
          times.begin(epoch);
          long[] before = stepTimes(step);
          long epochStart = System.nanoTime();
          Iterator<Batch> batches =
              train.ahead(
                  byRecords
                      ? source.epochAfter(epoch, consumed)
                      : source.epochAfter(epoch, earlier, (startStep - segmentStart) * accumulate),
                  devices.get(0).isGpu(),
                  rank);
          // Read ahead across the boundaries: the next epoch once this one is read, and the
          // validation pass that ends this epoch.
          if (epoch + 1 < cfg.epochs) {
            source.prepare(epoch + 1);
          }
          if (validation != null) {
            validation.prepare(0);
          }
          for (long s = startStep; s < epochSteps; s++) {
            long dataWait = 0;
            long t0 = System.nanoTime();
            long exposed = step.exposedNanos;
            cfg.faults.pauseBeforeStep(rank);
            for (int m = 0; m < accumulate; m++) {
              long w0 = System.nanoTime();
              if (!batches.hasNext()) {
                throw new IllegalStateException(
                    "rank "
                        + rank
                        + ": the input pipeline ended after "
                        + ((s - startStep) * accumulate + m)
                        + " of "
                        + (epochSteps - startStep) * accumulate
                        + " batches of epoch "
                        + epoch
                        + (startStep > 0 ? " after its resume at step " + startStep : ""));
              }
              try (Batch batch = batches.next()) {
                dataWait += System.nanoTime() - w0;
                int seed =
                    accumulate == 1
                        ? cfg.stepSeed(rank, globalStep)
                        : cfg.stepSeed(rank, globalStep * accumulate + m);
                step.accumulate(batch, seed, acc, m, accumulate);
              }
            }
            // The learning-rate schedule counts optimizer steps, not micro-batches.
            step.update(state.learningRate(cfg.optimizer, globalStep));
            waitNanos += dataWait;
            long commWait = step.exposedNanos - exposed;
            times.record(dataWait, System.nanoTime() - t0 - dataWait, commWait);
            globalStep++;
            consumed += globalBatch;
            progress.step(epoch, s + 1, epochSteps, globalStep, acc);
            if (store != null
                && cfg.checkpointEverySteps > 0
                && globalStep % cfg.checkpointEverySteps == 0
                && s + 1 < epochSteps) {
              double[] partial = acc.clone();
              comm.allReduce(partial, ReduceOp.SUM);
              if (rank == 0) {
                writeCheckpoint(
                    writer,
                    state,
                    epoch,
                    s + 1,
                    consumed,
                    earlier,
                    segmentStart,
                    globalStep,
                    partial,
                    replicas,
                    step.updater,
                    optimizer,
                    history,
                    resumes);
              }
            }
            cfg.faults.failAfterStep(rank, globalStep, attempt);
          }
          double trainSeconds = (System.nanoTime() - epochStart) / 1e9;
          // Samples restored from a checkpoint were trained (and timed) by an earlier attempt.
          double restoredSamples = epoch == state.epoch ? state.partial[2] : 0;
          long[] after = stepTimes(step);
          EpochSums sums = EpochSums.of(acc, waitNanos, before, after).allReduce(comm);
          StragglerReport straggler = times.exchange(comm, epoch);
          double[] val = new double[3 + EpochMetrics.Regression.SUMS];
          if (validation != null) {
            for (Iterator<Batch> it = validation.epoch(0, 0); it.hasNext(); ) {
              try (Batch b = it.next()) {
                replicas.evaluate(b, cfg.loss, loss, val);
              }
            }
            comm.allReduce(val, ReduceOp.SUM);
          }
          double[] wall = {trainSeconds, (System.nanoTime() - epochStart) / 1e9};
          comm.allReduce(wall, ReduceOp.MAX);
          if (cfg.faults.diverges(rank)) {
            perturb(replicas, step.updater); // test hook: this replica no longer matches the others
          }
          String hash = checkReplicasIdentical(replicas, epoch);
          boolean acc1 = cfg.loss.hasAccuracy();
          EpochMetrics m =
              new EpochMetrics(
                  epoch,
                  epochSteps,
                  (long) sums.samples(),
                  sums.loss() / sums.samples(),
                  acc1 ? sums.correct() / sums.samples() : Double.NaN,
                  validation == null ? Double.NaN : val[0] / val[2],
                  validation == null || !acc1 ? Double.NaN : val[1] / val[2],
                  wall[1],
                  (sums.samples() - restoredSamples) / wall[0],
                  sums.dataWaitSeconds() / size,
                  sums.computeSeconds() / size,
                  sums.exposedCommunicationSeconds() / size,
                  sums.optimizerSeconds() / size,
                  sums.backwardSeconds() / size,
                  sums.communicationSeconds() / size,
                  hash,
                  regression(cfg.loss, sums, val, validation != null));
          history.add(m);
          if (straggler != null) {
            stragglers.add(straggler);
            progress.stragglers(straggler);
          }
          progress.epochEnd(m);
          if (rank == 0) {
            LOG.log(System.Logger.Level.INFO, "epoch " + m.toJson());
            if (store != null) {
              writeCheckpoint(
                  writer,
                  state,
                  epoch + 1,
                  0,
                  0,
                  List.of(),
                  0,
                  globalStep,
                  new double[3],
                  replicas,
                  step.updater,
                  optimizer,
                  history,
                  resumes);
            }
          }
          if (epoch + 1 < cfg.epochs && growRequested(store, writer)) {
            stoppedToGrow = true;
            break;
          }
        }
      }
      String hash = HexFormat.of().formatHex(replicas.hash());
      return new WorkerResult(
          rank,
          history,
          resumes,
          rank == 0 && !stoppedToGrow ? replicas.saveParameters() : null,
          hash,
          stragglers,
          stoppedToGrow);
    }
  }

  /**
   * Optimizer steps per epoch: {@code batches / accumulate}; the batches left over (fewer than one
   * accumulated step) are not trained on, and rank 0 says so.
   */
  private long optimizerSteps(long batches, int accumulate) {
    long steps = batches / accumulate;
    if (steps <= 0) {
      throw new NonRetryableTrainingException(
          "Invalid accumulateSteps "
              + accumulate
              + ": an epoch has only "
              + batches
              + " batch(es) per worker, fewer than one accumulated step");
    }
    if (rank == 0 && accumulate > 1) {
      LOG.log(
          System.Logger.Level.INFO,
          "rank 0: gradient accumulation over "
              + accumulate
              + " micro-batches: "
              + steps
              + " optimizer steps per epoch"
              + (batches % accumulate == 0
                  ? ""
                  : "; the last "
                      + batches % accumulate
                      + " batch(es) of each epoch's "
                      + batches
                      + " are not trained on (fewer than one step)"));
    }
    return steps;
  }

  /**
   * At an epoch end, with {@code optGrow} on fewer workers than planned: whether the driver asked
   * for more ({@link GrowRequest}), agreed by every rank; if so rank 0 first waits until the
   * epoch's checkpoint is written.
   */
  private boolean growRequested(CheckpointStore store, AsyncCheckpointWriter writer)
      throws IOException {
    if (!cfg.grow || store == null || size >= cfg.plannedWorkers) {
      return false;
    }
    return GrowRequest.in(cfg.checkpointDir).agreed(comm, hadoopConf, writer);
  }

  /**
   * The training data's source, opened once the start has chosen the layout; closed with the loop.
   */
  private static final class TrainSource implements AutoCloseable {
    BatchSource source;

    /** The epoch's prefetch-to-device slot (GPU only: on the CPU there is nothing to upload). */
    private DevicePrefetch prefetch;

    /** The epoch's batches, one made ahead on its own thread when {@code toGpu}. */
    Iterator<Batch> ahead(Iterator<Batch> batches, boolean toGpu, int rank) {
      closePrefetch();
      if (!toGpu) {
        return batches;
      }
      prefetch = new DevicePrefetch(batches, "device-prefetch-rank" + rank);
      return prefetch;
    }

    private void closePrefetch() {
      if (prefetch != null) {
        prefetch.close();
        prefetch = null;
      }
    }

    @Override
    public void close() {
      try {
        closePrefetch();
      } finally {
        if (source != null) {
          source.close();
        }
      }
    }
  }

  /**
   * MSE, MAE and R² of an {@code l2} epoch from the reduced sums (validation's at 3 of {@code
   * val}); else null.
   */
  private static EpochMetrics.Regression regression(
      LossSpec loss, EpochSums sums, double[] val, boolean validated) {
    if (loss != LossSpec.L2) {
      return null;
    }
    double[] t = EpochMetrics.Regression.of(sums.regression(), 0, sums.samples());
    double[] v = EpochMetrics.Regression.of(val, 3, validated ? val[2] : 0);
    return new EpochMetrics.Regression(t[0], t[1], t[2], v[0], v[1], v[2]);
  }

  /** compute, backward, exposed communication, communication, optimizer nanos so far. */
  private static long[] stepTimes(TrainStep step) {
    return new long[] {
      step.computeNanos,
      step.backwardNanos,
      step.exposedNanos,
      step.communicationNanos,
      step.optimizerNanos
    };
  }

  /**
   * AUTO: the device on GPUs (the state never crosses the bus); on the CPU {@link #CPU_PLACEMENT},
   * the faster of the two there as bin/bench-scaling measured it.
   */
  static OptimizerPlacement resolvePlacement(OptimizerPlacement p, List<Device> devices) {
    if (p != OptimizerPlacement.AUTO) {
      return p;
    }
    return devices.get(0).isGpu() ? OptimizerPlacement.DEVICE : CPU_PLACEMENT;
  }

  private long checkedStepsPerEpoch(BatchSource source) {
    long steps = source.stepsPerEpoch();
    long[] minMax = {-steps, steps};
    comm.allReduce(minMax, ReduceOp.MAX);
    if (-minMax[0] != minMax[1]) {
      throw new NonRetryableTrainingException(
          "Invalid training data: workers have different stepsPerEpoch (from "
              + (-minMax[0])
              + " to "
              + minMax[1]
              + "); synchronous training needs the same number on every worker");
    }
    if (steps <= 0) {
      throw new NonRetryableTrainingException(
          "Invalid training data: 0 steps per epoch (fewer rows than one global batch?)");
    }
    return steps;
  }

  /** Moves one parameter value by one ulp (the injected divergence, {@link FaultInjection}). */
  private static void perturb(ReplicaSet replicas, ParameterUpdater updater) {
    float[][] values = updater.values();
    values[0][0] = Math.nextUp(values[0][0]);
    updater.restore(values, currentSlots(replicas, updater), updater.optimizer.steps());
  }

  private static float[][][] currentSlots(ReplicaSet replicas, ParameterUpdater updater) {
    float[][][] slots = new float[updater.optimizer.slotCount()][replicas.trainable.length][];
    for (int s = 0; s < slots.length; s++) {
      for (int j = 0; j < slots[s].length; j++) {
        slots[s][j] = updater.slot(s, j);
      }
    }
    return slots;
  }

  private String checkReplicasIdentical(ReplicaSet replicas, int epoch) {
    byte[] mine = replicas.hash();
    List<byte[]> all = comm.allGather(mine);
    HexFormat hex = HexFormat.of();
    for (int r = 1; r < all.size(); r++) {
      if (!MessageDigest.isEqual(all.get(0), all.get(r))) {
        StringBuilder sb =
            new StringBuilder("Replica parameters differ after epoch " + epoch + ":");
        for (int k = 0; k < all.size(); k++) {
          sb.append(" rank ").append(k).append(' ').append(hex.formatHex(all.get(k)));
        }
        throw new ReplicaMismatchException(sb.toString());
      }
    }
    return hex.formatHex(all.get(0));
  }

  /**
   * Rank 0: a snapshot of the whole state (copies: training goes on while it is written), handed to
   * the background writer. One write is in flight at a time; a snapshot waiting behind it is
   * replaced by a newer one; an earlier write's failure is thrown here.
   */
  private void writeCheckpoint(
      AsyncCheckpointWriter writer,
      TrainingState run,
      int epoch,
      long stepInEpoch,
      long consumedRecords,
      List<EpochSegment> earlierSegments,
      long segmentStartStep,
      long globalStep,
      double[] partial,
      ReplicaSet replicas,
      ParameterUpdater updater,
      Optimizer optimizer,
      List<EpochMetrics> history,
      List<Resume> resumes)
      throws IOException {
    TrainingState st = new TrainingState();
    st.epoch = epoch;
    st.stepInEpoch = stepInEpoch;
    st.consumedRecords = consumedRecords;
    st.earlierSegments.addAll(earlierSegments);
    st.orderKey = cfg.trainData.orderKey();
    st.segmentStartStep = segmentStartStep;
    st.workers = size;
    st.batchSize = run.batchSize;
    st.accumulateSteps = run.accumulateSteps;
    st.lrWorkers = run.lrWorkers;
    st.lrScale = run.lrScale;
    st.globalStep = globalStep;
    st.seed = cfg.seed;
    st.partial = partial;
    st.names.addAll(Arrays.asList(replicas.names));
    st.values.addAll(Arrays.asList(updater.values()));
    st.optimizerName = optimizer.name();
    st.optimizerSteps = optimizer.steps();
    st.slotNames.addAll(Arrays.asList(optimizer.slotNames()));
    for (int j : replicas.trainable) {
      st.trainableNames.add(replicas.names[j]);
    }
    st.slots = currentSlots(replicas, updater);
    st.history.addAll(history);
    st.resumes.addAll(resumes);
    List<String> names = st.arrayNames();
    List<float[]> arrays = st.arrays();
    List<StateArray> out = new ArrayList<>(arrays.size());
    for (int i = 0; i < arrays.size(); i++) {
      out.add(new StateArray(names.get(i), arrays.get(i)));
    }
    writer.submit(new CheckpointState(globalStep, st.encodeMeta(), out));
  }
}
