package dev.sparktrainer.train;

import ai.djl.Device;
import ai.djl.training.loss.Loss;
import dev.sparktrainer.checkpoint.AsyncCheckpointWriter;
import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.IncompatibleCheckpointException;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.checkpoint.StateArray;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.data.Batch;
import dev.sparktrainer.data.BatchSource;
import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.optim.Optimizer;
import java.io.IOException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * One replica's training loop, with MultiWorkerMirroredStrategy semantics; Spark-free (the barrier
 * task and the in-process runner only supply the communicator and the devices).
 *
 * <ol>
 *   <li>Rank 0 reads the latest checkpoint, or takes its freshly initialized parameters, and
 *       broadcasts that state: every replica starts from identical bits at the same position.
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
        TrainingState state = startState(replicas, store, step.updater, optimizer);
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
          double[] sums = {
            acc[0],
            acc[1],
            acc[2],
            waitNanos / 1e9,
            (after[0] - before[0]) / 1e9,
            (after[1] - before[1]) / 1e9,
            (after[2] - before[2]) / 1e9,
            (after[3] - before[3]) / 1e9,
            (after[4] - before[4]) / 1e9,
            acc[3],
            acc[4],
            acc[5],
            acc[6]
          };
          comm.allReduce(sums, ReduceOp.SUM);
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
          // sums: 4 compute, 5 backward, 6 exposed communication, 7 communication, 8 optimizer
          EpochMetrics m =
              new EpochMetrics(
                  epoch,
                  epochSteps,
                  (long) sums[2],
                  sums[0] / sums[2],
                  acc1 ? sums[1] / sums[2] : Double.NaN,
                  validation == null ? Double.NaN : val[0] / val[2],
                  validation == null || !acc1 ? Double.NaN : val[1] / val[2],
                  wall[1],
                  (sums[2] - restoredSamples) / wall[0],
                  sums[3] / size,
                  sums[4] / size,
                  sums[6] / size,
                  sums[8] / size,
                  sums[5] / size,
                  sums[7] / size,
                  hash,
                  regression(cfg.loss, sums, 9, val, validation != null));
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
   * for more ({@link DistributedTrainer#GROW_REQUEST} in the checkpoint directory), agreed by every
   * rank; if so rank 0 first waits until the epoch's checkpoint is written.
   */
  private boolean growRequested(CheckpointStore store, AsyncCheckpointWriter writer)
      throws IOException {
    if (!cfg.grow || store == null || size >= cfg.plannedWorkers) {
      return false;
    }
    double[] flag = new double[1];
    if (rank == 0) {
      Path request = new Path(cfg.checkpointDir, DistributedTrainer.GROW_REQUEST);
      flag[0] = request.getFileSystem(hadoopConf).exists(request) ? 1 : 0;
    }
    comm.allReduce(flag, ReduceOp.MAX);
    if (flag[0] == 0) {
      return false;
    }
    if (rank == 0) {
      writer.awaitIdle();
      LOG.log(
          System.Logger.Level.INFO,
          "rank 0: the driver asks for more workers (--grow): stopping at this epoch end, its checkpoint written");
    }
    return true;
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
   * MSE, MAE and R² of an {@code l2} epoch from the reduced sums (train at {@code at}, validation
   * at 3); else null.
   */
  private static EpochMetrics.Regression regression(
      LossSpec loss, double[] sums, int at, double[] val, boolean validated) {
    if (loss != LossSpec.L2) {
      return null;
    }
    double[] t = EpochMetrics.Regression.of(sums, at, sums[2]);
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

  /**
   * Rank 0's state (latest checkpoint, or fresh), broadcast to every rank, checked and restored.
   */
  private TrainingState startState(
      ReplicaSet replicas, CheckpointStore store, ParameterUpdater updater, Optimizer optimizer)
      throws IOException {
    TrainingState state = null;
    byte[] meta = null;
    if (rank == 0) {
      List<SkippedCheckpoint> skipped = new ArrayList<>();
      Optional<TrainingState> latest;
      try {
        latest = store == null ? Optional.empty() : readLatest(store, skipped);
      } catch (IOException e) {
        // The checkpoint could not be read (after the store's retries). The other ranks wait in the
        // broadcast below: tell them why, so that every task fails naming the checkpoint and the
        // cause, not only "connection closed by rank 0".
        try {
          comm.broadcastBytes(TrainingState.encodeFailure(String.valueOf(e.getMessage())), 0);
        } catch (RuntimeException notSent) {
          e.addSuppressed(notSent);
        }
        throw e;
      }
      if (latest.isPresent()) {
        state = latest.get();
        long stepInEpoch = state.stepInEpoch;
        WorkerCountChange change;
        try {
          change = chooseLayout(state);
        } catch (NonRetryableTrainingException e) {
          try {
            comm.broadcastBytes(TrainingState.encodeFailure(NOT_RETRYABLE + e.getMessage()), 0);
          } catch (RuntimeException notSent) {
            e.addSuppressed(notSent);
          }
          throw e;
        }
        state.resumes.add(
            new Resume(
                state.globalStep,
                state.epoch,
                stepInEpoch,
                attempt,
                store.directory(),
                skipped,
                change));
        LOG.log(
            System.Logger.Level.INFO,
            "rank 0: resuming from the checkpoint at step "
                + state.globalStep
                + " (epoch "
                + state.epoch
                + ", "
                + stepInEpoch
                + " steps into it) in "
                + store.directory()
                + ", stage attempt "
                + attempt
                + " (resume "
                + state.resumes.size()
                + " of this run)"
                + (change == null ? "" : "; " + change)
                + (skipped.isEmpty()
                    ? ""
                    : "; skipped " + skipped.size() + " newer one(s): " + skipped));
      } else {
        state = new TrainingState();
        freshLayout(state);
        state.seed = cfg.seed;
        state.names.addAll(Arrays.asList(replicas.names));
        state.values.addAll(Arrays.asList(replicas.readValues()));
        if (!skipped.isEmpty()) {
          // Recorded like a resume (at step 0), so the history says why the progress is gone.
          state.resumes.add(new Resume(0, 0, 0, attempt, store.directory(), skipped));
          LOG.log(
              System.Logger.Level.WARNING,
              "rank 0: training starts from scratch because every checkpoint in "
                  + store.directory()
                  + " was corrupt (or deleted while being read): "
                  + skipped);
        }
      }
      meta = state.encodeMeta();
    }
    meta = comm.broadcastBytes(meta, 0);
    if (rank != 0) {
      String failure = TrainingState.decodeFailure(meta);
      if (failure != null && failure.startsWith(NOT_RETRYABLE)) {
        throw new NonRetryableTrainingException(failure.substring(NOT_RETRYABLE.length()));
      }
      if (failure != null) {
        // (The task names this rank: "rank 1: rank 0 could not ...".)
        throw new IOException("rank 0 could not read the checkpoint to start from: " + failure);
      }
      state = TrainingState.decodeMeta(meta);
    }
    int[] valueSizes =
        rank == 0 ? state.values.stream().mapToInt(v -> v.length).toArray() : state.valueSizes;
    checkMatchesModel(state, valueSizes, replicas, optimizer);
    if (rank != 0) {
      int[] trainableSizes = new int[replicas.trainable.length];
      for (int j = 0; j < trainableSizes.length; j++) {
        trainableSizes[j] = replicas.sizes[replicas.trainable[j]];
      }
      state.allocateArrays(trainableSizes, state.hasSlots);
    }
    if (size > 1) {
      for (float[] a : state.arrays()) {
        comm.broadcast(a, 0);
      }
    }
    if (state.seed != cfg.seed) {
      LOG.log(
          System.Logger.Level.WARNING,
          "Resuming a run started with seed " + state.seed + " under seed " + cfg.seed);
    }
    updater.restore(state.values.toArray(new float[0][]), state.slots, state.optimizerSteps);
    // The updater has copied them (into its arrays or tensors). The caller keeps this state for the
    // whole run (position, partial sums, history): without this, a resumed run would hold one more
    // copy of everything — parameters and optimizer slots — on the heap until it ends.
    state.values.clear();
    state.slots = null;
    return state;
  }

  /**
   * Prefix of a start-up failure that a retry would repeat (the other ranks fail without retry
   * too).
   */
  private static final String NOT_RETRYABLE = "not retryable: ";

  /**
   * A fresh start's layout: this job's workers, batch and accumulation; the schedule unscaled. On
   * fewer workers than planned (an elastic start), as if resuming the planned layout.
   */
  private void freshLayout(TrainingState state) {
    int planned = cfg.plannedWorkers > 0 ? cfg.plannedWorkers : size;
    state.workers = planned;
    state.batchSize = cfg.trainData.batchSize();
    state.accumulateSteps = cfg.accumulateSteps;
    state.lrWorkers = planned;
    state.lrScale = 1;
    if (planned != size) {
      WorkerCountChange c = chooseLayout(state);
      LOG.log(System.Logger.Level.INFO, "rank 0: starting on fewer workers than planned: " + c);
    }
  }

  /**
   * Rank 0, resuming: the layout to continue with. The checkpoint's when it matches this job (or is
   * of a version that did not record it); on another worker count, the per-worker batch and the
   * accumulation that keep the global batch ({@link Rescale#GLOBAL_BATCH}: the largest batch up to
   * the configured one that divides it) or the configured ones with the learning rate scaled
   * ({@link Rescale#LEARNING_RATE}). The interrupted epoch continues with the records not yet
   * consumed when the data has a global order, and restarts otherwise. Returns what changed, null
   * if nothing did.
   */
  private WorkerCountChange chooseLayout(TrainingState state) {
    int batch = cfg.trainData.batchSize();
    int k = cfg.accumulateSteps;
    if (state.workers == 0) { // an older checkpoint: written by this layout, as before
      state.workers = size;
      state.batchSize = batch;
      state.accumulateSteps = k;
      state.lrWorkers = size;
      state.lrScale = 1;
      state.consumedRecords = state.stepInEpoch * batch * k * size;
      return null;
    }
    boolean orderChanged =
        state.stepInEpoch > 0 && !cfg.trainData.orderKey().equals(state.orderKey);
    if (orderChanged) {
      // The rest of the epoch depends on the order it was read in so far, which this data's plan
      // or options no longer give: start the epoch over rather than guess. On the same layout too:
      // skipping the new order's first batches would train some records twice and others never,
      // and later checkpoints would record the new key for a plan they did not follow.
      LOG.log(
          System.Logger.Level.WARNING,
          "rank 0: the interrupted epoch "
              + state.epoch
              + " restarts: its earlier part was read in an order this data no longer gives ("
              + state.orderKey
              + " then, "
              + cfg.trainData.orderKey()
              + " now)");
      restartEpoch(state);
    }
    if (state.workers == size && state.batchSize == batch && state.accumulateSteps == k) {
      return null;
    }
    long global = (long) state.batchSize * state.accumulateSteps * state.workers;
    // (A fresh start on fewer workers than planned has no parameters in its state yet.)
    String written =
        (state.names.isEmpty()
                ? "The job is planned for "
                : "The checkpoint in " + cfg.checkpointDir + " was written by ")
            + state.workers
            + " workers x batch "
            + state.batchSize
            + " x "
            + state.accumulateSteps
            + " accumulated (global batch "
            + global
            + ")";
    double scale = state.lrScale;
    if (state.workers != size && batch <= 0) {
      throw new NonRetryableTrainingException(
          written
              + "; resuming it on "
              + size
              + " workers needs the training"
              + " data's batch size, which its BatchSourceFactory does not tell (batchSize(), withBatchSize())");
    }
    if (state.workers != size && cfg.rescale == Rescale.LEARNING_RATE) {
      scale = state.lrScale * ((double) batch * k * size / global);
    } else if (state.workers != size) {
      if (global % size != 0) {
        List<Long> counts = new ArrayList<>();
        for (long n = 1; n <= global && counts.size() < 16; n++) {
          if (global % n == 0) {
            counts.add(n);
          }
        }
        throw new NonRetryableTrainingException(
            written
                + ": it cannot be kept on "
                + size
                + " workers ("
                + global
                + " is not a multiple of "
                + size
                + "). Options: resume on a worker count that divides "
                + global
                + " "
                + counts
                + (counts.size() == 16 ? "..." : "")
                + ", or keep the per-worker batch and scale the learning"
                + " rate instead (--rescale lr, optRescale(Rescale.LEARNING_RATE): batch "
                + batch
                + " x "
                + k
                + " on "
                + size
                + " workers, global "
                + (long) batch * k * size
                + ")");
      }
      long perWorker = global / size;
      int b = (int) Math.min(batch, perWorker);
      while (perWorker % b != 0) {
        b--;
      }
      batch = b;
      k = (int) (perWorker / b);
    }
    boolean restart = orderChanged;
    if (state.stepInEpoch > 0) {
      if (cfg.trainData.globalOrder()) {
        state.continueByRecords = true;
      } else if (cfg.trainData.replaysEpochs() && cfg.trainData.orderKey().equals(state.orderKey)) {
        // The part of the epoch this checkpoint's layout consumed becomes an earlier segment: the
        // new layout's workers work out which records it held and share the rest.
        long steps = state.stepInEpoch - state.segmentStartStep;
        if (steps > 0) {
          state.earlierSegments.add(
              new EpochSegment(state.workers, state.batchSize, steps * state.accumulateSteps));
        }
        state.segmentStartStep = state.stepInEpoch;
      } else {
        // Which records each worker consumed depends on its shard and its shuffle: not recoverable
        // for another layout. The epoch starts over; the optimizer steps done are kept.
        restart = true;
        restartEpoch(state);
      }
    }
    WorkerCountChange change = new WorkerCountChange(state.workers, size, batch, k, scale, restart);
    LOG.log(
        restart ? System.Logger.Level.WARNING : System.Logger.Level.INFO,
        "rank 0: "
            + written
            + "; resuming on "
            + size
            + " workers with batch "
            + batch
            + " x "
            + k
            + " accumulated (global batch "
            + change.globalBatch()
            + ")"
            + (scale != state.lrScale
                ? ", the learning rate scaled by " + scale + " (linear scaling rule)"
                : "")
            + (restart
                ? "; the interrupted epoch "
                    + state.epoch
                    + (orderChanged || cfg.trainData.replaysEpochs()
                        ? " restarts: it was read in an order this data no longer gives ("
                            + state.orderKey
                            + " then, "
                            + cfg.trainData.orderKey()
                            + " now)"
                        : " restarts: this data has no reproducible order (deterministic=false"
                            + " without a shuffle buffer) to continue it from on another layout")
                : state.stepInEpoch > 0
                    ? "; the interrupted epoch "
                        + state.epoch
                        + " continues with the records not yet consumed, dealt to "
                        + size
                        + " workers"
                    : ""));
    state.workers = size;
    state.batchSize = batch;
    state.accumulateSteps = k;
    state.lrScale = scale;
    return change;
  }

  /** Starts the interrupted epoch over: the optimizer steps taken are kept. */
  private static void restartEpoch(TrainingState state) {
    state.stepInEpoch = 0;
    state.consumedRecords = 0;
    state.earlierSegments.clear();
    state.segmentStartStep = 0;
    state.partial = new double[3];
  }

  /**
   * Fails (not retryable) when the state does not fit the model or the optimizer, naming what
   * differs.
   */
  private void checkMatchesModel(
      TrainingState state, int[] valueSizes, ReplicaSet replicas, Optimizer optimizer) {
    if (!state.names.equals(Arrays.asList(replicas.names))) {
      throw new NonRetryableTrainingException(
          "The checkpoint in "
              + cfg.checkpointDir
              + " does not match the model: it has parameters "
              + state.names
              + ", the model "
              + Arrays.asList(replicas.names));
    }
    for (int i = 0; i < replicas.sizes.length; i++) {
      if (valueSizes[i] != replicas.sizes[i]) {
        throw new NonRetryableTrainingException(
            "The checkpoint in "
                + cfg.checkpointDir
                + " does not match the model: parameter "
                + replicas.names[i]
                + " has "
                + valueSizes[i]
                + " values, the model "
                + replicas.sizes[i]);
      }
    }
    if (state.optimizerName != null && !state.optimizerName.equals(optimizer.name())) {
      throw new NonRetryableTrainingException(
          "The checkpoint in "
              + cfg.checkpointDir
              + " was written with optimizer "
              + state.optimizerName
              + ", this run uses "
              + optimizer.name());
    }
    if (state.optimizerName != null
        && !state.slotNames.equals(Arrays.asList(optimizer.slotNames()))) {
      throw new NonRetryableTrainingException(
          "The checkpoint in "
              + cfg.checkpointDir
              + " has optimizer state "
              + state.slotNames
              + ", this run's "
              + optimizer.name()
              + " keeps "
              + Arrays.asList(optimizer.slotNames()));
    }
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

  /**
   * The newest complete checkpoint as a state, adding those skipped to {@code skipped}; a
   * checkpoint of an older format fails the run.
   */
  private Optional<TrainingState> readLatest(CheckpointStore store, List<SkippedCheckpoint> skipped)
      throws IOException {
    Optional<CheckpointState> latest;
    try {
      latest = store.latest(skipped::add);
    } catch (IncompatibleCheckpointException e) {
      throw new NonRetryableTrainingException(e.getMessage());
    }
    if (latest.isEmpty()) {
      return Optional.empty();
    }
    CheckpointState cp = latest.get();
    TrainingState st = TrainingState.decodeMeta(cp.metadata());
    // What the metadata announces must be what the file holds, name by name and size by size.
    List<String> expected = new ArrayList<>();
    List<Integer> lengths = new ArrayList<>();
    for (int i = 0; i < st.names.size(); i++) {
      expected.add("param/" + st.names.get(i));
      lengths.add(st.valueSizes[i]);
    }
    if (st.hasSlots) {
      for (String slot : st.slotNames) {
        for (String n : st.trainableNames) {
          expected.add(slot + "/" + n);
          lengths.add(st.valueSizes[st.names.indexOf(n)]);
        }
      }
    }
    List<float[]> arrays = new ArrayList<>(cp.arrays().size());
    for (int i = 0; i < cp.arrays().size(); i++) {
      StateArray a = cp.arrays().get(i);
      if (i >= expected.size()
          || !a.name().equals(expected.get(i))
          || a.values().length != lengths.get(i)) {
        throw new NonRetryableTrainingException(
            "The checkpoint at step "
                + cp.step()
                + " in "
                + store.directory()
                + " is inconsistent: array "
                + i
                + " is "
                + a.name()
                + " ("
                + a.values().length
                + " values), its metadata announces "
                + (i < expected.size()
                    ? expected.get(i) + " (" + lengths.get(i) + ")"
                    : "only " + expected.size()));
      }
      arrays.add(a.values());
    }
    if (arrays.size() != expected.size()) {
      throw new NonRetryableTrainingException(
          "The checkpoint at step "
              + cp.step()
              + " in "
              + store.directory()
              + " is inconsistent: "
              + arrays.size()
              + " arrays, its metadata announces "
              + expected.size());
    }
    st.adoptArrays(arrays, st.trainableNames.size());
    return Optional.of(st);
  }
}
