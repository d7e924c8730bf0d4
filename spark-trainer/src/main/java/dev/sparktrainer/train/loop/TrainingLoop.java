package dev.sparktrainer.train.loop;

import ai.djl.Device;
import dev.sparktrainer.checkpoint.AsyncCheckpointWriter;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.BatchSource;
import dev.sparktrainer.device.PrefetchedSource;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.input.BatchSourceFactory;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepTimes;
import dev.sparktrainer.train.metrics.StragglerReport;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.StepTimings;
import dev.sparktrainer.train.step.TrainStep;
import java.io.IOException;
import java.util.ArrayList;
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
 *   <li>Each optimizer step: its micro-batches (data wait), forward and backward on every local
 *       device, gradients all-reduced bucket by bucket, the same update on every replica ({@link
 *       TrainStep}). Every {@code checkpoints.everySteps} steps rank 0 checkpoints a {@link
 *       Snapshot}.
 *   <li>Each epoch ends with the {@link EpochEndStep}s, run in their order on every rank ({@link
 *       EpochEnd}): metrics, stragglers, validation, epoch time, replica check, history,
 *       checkpoint, grow check.
 * </ol>
 *
 * What watches the loop — injected faults, a test's recorder — is a {@link LoopHook}.
 */
public final class TrainingLoop {
  private static final System.Logger LOG = System.getLogger(TrainingLoop.class.getName());

  /** AUTO's choice on the CPU (see {@link #resolvePlacement}). */
  static final OptimizerPlacement CPU_PLACEMENT = OptimizerPlacement.HOST;

  private final TrainingConfig cfg;
  private final TrainingRuntime runtime;
  private final int rank;
  private final int size;
  private final Communicator comm;
  private final List<Device> devices;
  private final int attempt;
  private final Configuration hadoopConf;
  private final int cpus;
  private final List<LoopHook> hooks = new ArrayList<>();

  /** Where this rank runs, for the straggler report (see {@link #on}). */
  private String host;

  private String executorId = "local";

  /**
   * @param cpus the task's CPUs: the host optimizer's threads
   */
  public TrainingLoop(
      TrainingConfig cfg,
      TrainingRuntime runtime,
      Communicator comm,
      List<Device> devices,
      int attempt,
      Configuration hadoopConf,
      int cpus) {
    this.cpus = Math.max(1, cpus);
    this.cfg = cfg;
    this.runtime = runtime;
    this.rank = comm.rank();
    this.size = comm.size();
    this.comm = comm;
    this.devices = devices;
    this.attempt = attempt;
    this.hadoopConf = hadoopConf;
    this.hooks.add(runtime.faults());
    String peer = comm.peers().get(rank);
    this.host = peer.substring(0, Math.max(0, peer.lastIndexOf(':'))).replaceAll("^\\[|\\]$", "");
  }

  /**
   * Names this rank's host and Spark executor in the straggler report (default: its ring host,
   * "local").
   */
  public TrainingLoop on(String host, String executorId) {
    this.host = host;
    this.executorId = executorId;
    return this;
  }

  /** Adds a hook, called after the runtime's faults at each of its points. */
  public TrainingLoop observe(LoopHook hook) {
    hooks.add(hook);
    return this;
  }

  public WorkerResult run() throws IOException {
    CheckpointStore store =
        cfg.checkpoints().dir() == null
            ? null
            : new CheckpointStore(cfg.checkpoints().dir(), hadoopConf, cfg.checkpoints().keep())
                .withBeforeRename(runtime.faults().beforeCheckpointRename());
    try (ReplicaSet replicas =
        new ReplicaSet(cfg.model().spec(), devices, (int) cfg.model().seed())) {
      Optimizer optimizer = cfg.model().optimizer().newOptimizer(replicas.trainableSizes());
      OptimizerPlacement placement = resolvePlacement(cfg.devices().placement(), devices);
      List<StragglerReport> stragglers = new ArrayList<>();
      List<EpochMetrics> history;
      TrainingState state;
      boolean stoppedToGrow = false;
      try (AsyncCheckpointWriter writer =
              rank == 0 && store != null ? new AsyncCheckpointWriter(store) : null;
          TrainStep step =
              new TrainStep(
                  replicas,
                  cfg.model().loss(),
                  comm,
                  optimizer,
                  placement,
                  cpus,
                  cfg.comm(),
                  cfg.step(),
                  cfg.model().precision());
          PrefetchedSource train = new PrefetchedSource();
          BatchSource validation =
              cfg.data().validation() == null
                  ? null
                  : cfg.data().validation().create(rank, size, replicas.manager(), hadoopConf);
          ProgressHook progress = new ProgressHook(cfg, runtime.callback(), rank, size)) {
        state = new ResumeNegotiation(cfg, comm, attempt).start(replicas, store, step, optimizer);
        // The layout the start chose (another per-worker batch when resuming a checkpoint of
        // another worker count): the data is dealt with its batch size.
        BatchSourceFactory data = cfg.data().train();
        if (state.batchSize != 0 && state.batchSize != data.batchSize()) {
          data = data.withBatchSize(state.batchSize);
        }
        BatchSource source = train.open(data.create(rank, size, replicas.manager(), hadoopConf));
        progress.source(source);
        logLayout(placement, step);
        history = new ArrayList<>(state.history);
        SnapshotWriter snapshots =
            writer == null
                ? null
                : new SnapshotWriter(
                    writer,
                    state,
                    cfg.data().train().orderKey(),
                    cfg.model().seed(),
                    size,
                    replicas,
                    step,
                    optimizer,
                    history,
                    state.resumes);
        EpochEnd.Run run =
            new EpochEnd.Run(
                cfg,
                comm,
                hadoopConf,
                replicas,
                step,
                validation,
                cfg.model().loss().newLoss(),
                new StepTimes(cfg.model().seed(), host, executorId),
                progress,
                snapshots,
                writer,
                history,
                stragglers);
        long steps = EpochPlan.optimizerSteps(comm, source, state.accumulateSteps);
        progress.start(steps, state.globalStep, attempt, hadoopConf);
        long globalStep = state.globalStep;
        for (int epoch = state.epoch; epoch < cfg.data().epochs(); epoch++) {
          EpochEnd end = trainEpoch(run, state, train, source, epoch, steps, globalStep);
          globalStep = end.globalStep();
          for (EpochEndStep s : EpochEndStep.values()) {
            for (LoopHook h : hooks) {
              h.beforeEpochEnd(rank, s, end);
            }
            end.run(s);
          }
          if (end.stopToGrow()) {
            stoppedToGrow = true;
            break;
          }
        }
      }
      return new WorkerResult(
          rank,
          history,
          List.copyOf(state.resumes),
          rank == 0 && !stoppedToGrow ? replicas.saveParameters() : null,
          HexFormat.of().formatHex(replicas.hash()),
          stragglers,
          stoppedToGrow);
    }
  }

  /**
   * The optimizer steps of one epoch (from where the start resumed it, in the first), each of
   * {@code accumulate} micro-batches; returns the epoch's end, ready for its {@link EpochEndStep}s.
   */
  private EpochEnd trainEpoch(
      EpochEnd.Run run,
      TrainingState state,
      PrefetchedSource train,
      BatchSource source,
      int epoch,
      long steps,
      long globalStep)
      throws IOException {
    EpochPlan plan = EpochPlan.of(state, epoch, source, steps);
    int accumulate = state.accumulateSteps;
    long globalBatch = (long) state.batchSize * accumulate * size;
    long startStep = plan.startStep();
    long epochSteps = plan.endStep();
    long consumed = plan.consumedRecords();
    // lossSum, correct, samples, then the regression sums; rank 0 carries the global sums
    // restored from a checkpoint.
    double[] acc = new double[3 + EpochMetrics.Regression.SUMS];
    if (plan.resumed() && rank == 0) {
      System.arraycopy(state.partial, 0, acc, 0, Math.min(acc.length, state.partial.length));
    }
    TrainStep step = run.step();
    run.progress().epochBegin(acc);
    long waitNanos = 0;
    run.times().begin(epoch);
    StepTimings before = step.timings();
    long epochStart = System.nanoTime();
    Iterator<Batch> batches =
        train.ahead(() -> plan.batches(source, accumulate), devices.get(0).isGpu(), rank);
    // Read ahead across the boundaries: the next epoch once this one is read, and the validation
    // pass that ends this epoch.
    if (epoch + 1 < cfg.data().epochs()) {
      source.prepare(epoch + 1);
    }
    if (run.validation() != null) {
      run.validation().prepare(0);
    }
    for (long s = startStep; s < epochSteps; s++) {
      long dataWait = 0;
      long t0 = System.nanoTime();
      long exposed = step.timings().exposedNanos();
      for (LoopHook h : hooks) {
        h.beforeStep(rank, globalStep);
      }
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
      step.update(state.learningRate(cfg.model().optimizer(), globalStep));
      waitNanos += dataWait;
      long commWait = step.timings().exposedNanos() - exposed;
      run.times().record(dataWait, System.nanoTime() - t0 - dataWait, commWait);
      globalStep++;
      consumed += globalBatch;
      run.progress().step(epoch, s + 1, epochSteps, globalStep, acc);
      long every = cfg.checkpoints().everySteps();
      if (cfg.checkpoints().dir() != null
          && every > 0
          && globalStep % every == 0
          && s + 1 < epochSteps) {
        double[] partial = acc.clone();
        comm.allReduce(partial, ReduceOp.SUM);
        Divergence.check(partial[0], epoch, globalStep);
        if (run.snapshots() != null) {
          run.snapshots().write(plan.snapshot(s + 1, consumed, globalStep, partial));
        }
      }
      for (LoopHook h : hooks) {
        h.afterStep(rank, globalStep, attempt);
      }
    }
    return new EpochEnd(
        run,
        epoch,
        epochSteps,
        acc,
        waitNanos,
        source.imageColumns(),
        source.stats(),
        step.timings().since(before),
        epochStart,
        plan.resumed() ? state.partial[2] : 0,
        globalStep);
  }

  private void logLayout(OptimizerPlacement placement, TrainStep step) {
    if (rank != 0) {
      return;
    }
    boolean overlap = cfg.step().overlap() && size > 1;
    LOG.log(
        System.Logger.Level.INFO,
        "rank 0: optimizer on the "
            + placement.name().toLowerCase(Locale.ROOT)
            + ", "
            + step.gradientBuckets()
            + " gradient bucket(s) of up to "
            + (cfg.step().bucketBytes() >> 10)
            + " KiB, "
            + (overlap
                ? "all-reduce overlapped with backward in " + step.segmentCount() + " segment(s)"
                : "all-reduce after backward"));
  }

  /**
   * AUTO: the device on GPUs (the state never crosses the bus); on the CPU {@link #CPU_PLACEMENT},
   * the faster of the two there as bin/bench-scaling measured it.
   */
  public static OptimizerPlacement resolvePlacement(OptimizerPlacement p, List<Device> devices) {
    return resolvePlacement(p, devices.get(0).isGpu());
  }

  /** {@link #resolvePlacement(OptimizerPlacement, List)} on a GPU or not (the driver's banner). */
  public static OptimizerPlacement resolvePlacement(OptimizerPlacement p, boolean gpu) {
    if (p != OptimizerPlacement.AUTO) {
      return p;
    }
    return gpu ? OptimizerPlacement.DEVICE : CPU_PLACEMENT;
  }
}
