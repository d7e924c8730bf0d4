package dev.sparktrainer.train;

import ai.djl.Device;
import ai.djl.training.loss.Loss;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.FusionBuffer;
import dev.sparktrainer.collective.ReduceOp;
import dev.sparktrainer.data.Batch;
import dev.sparktrainer.data.BatchSource;
import dev.sparktrainer.optim.Optimizer;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;

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

  Worker(TrainingConfig cfg, Communicator comm, List<Device> devices, int attempt, Configuration hadoopConf) {
    this.cfg = cfg;
    this.rank = comm.rank();
    this.size = comm.size();
    this.comm = comm;
    this.devices = devices;
    this.attempt = attempt;
    this.hadoopConf = hadoopConf;
  }

  WorkerResult run() throws IOException {
    CheckpointStore store =
        cfg.checkpointDir == null ? null : new CheckpointStore(cfg.checkpointDir, hadoopConf, cfg.keepCheckpoints);
    try (ReplicaSet replicas = new ReplicaSet(cfg.model, devices, (int) cfg.seed)) {
      TrainingState state = startState(replicas, store);
      float[][] values = state.values.toArray(new float[0][]);
      replicas.writeValues(values);

      int[] trainableSizes = new int[replicas.trainable.length];
      float[][] trainValues = new float[trainableSizes.length][];
      float[][] grads = new float[trainableSizes.length][];
      for (int j = 0; j < trainableSizes.length; j++) {
        trainableSizes[j] = replicas.sizes[replicas.trainable[j]];
        trainValues[j] = values[replicas.trainable[j]];
        grads[j] = new float[trainableSizes[j]];
      }
      float[][] statValues = new float[replicas.stats.length][];
      for (int j = 0; j < statValues.length; j++) {
        statValues[j] = new float[replicas.sizes[replicas.stats[j]]];
      }
      List<float[]> reduced = new ArrayList<>(Arrays.asList(grads));
      reduced.addAll(Arrays.asList(statValues));

      Optimizer optimizer = cfg.optimizer.newOptimizer(trainableSizes);
      if (state.optimizer != null) {
        optimizer.readState(new DataInputStream(new ByteArrayInputStream(state.optimizer)));
      }
      FusionBuffer fusion =
          size > 1 ? FusionBuffer.builder().setCommunicator(comm).optCapacityBytes(cfg.fusionBucketBytes).build() : null;
      Loss loss = cfg.loss.newLoss();
      List<EpochMetrics> history = new ArrayList<>(state.history);
      List<Resume> resumes = List.copyOf(state.resumes);
      long globalStep = state.globalStep;

      try (BatchSource source = cfg.trainData.create(rank, size, replicas.manager(), hadoopConf);
          BatchSource validation = cfg.validationData == null ? null
              : cfg.validationData.create(rank, size, replicas.manager(), hadoopConf);
          ProgressHook progress = new ProgressHook(cfg, rank, size)) {
        long steps = checkedStepsPerEpoch(source);
        progress.start(steps, globalStep, attempt, hadoopConf);
        for (int epoch = state.epoch; epoch < cfg.epochs; epoch++) {
          long startStep = epoch == state.epoch ? state.stepInEpoch : 0;
          // lossSum, correct, samples; rank 0 carries the global sums restored from a checkpoint.
          double[] acc = new double[3];
          if (epoch == state.epoch && rank == 0) {
            System.arraycopy(state.partial, 0, acc, 0, 3);
          }
          progress.epochBegin(acc);
          long[] nanos = new long[4]; // wait, compute, all-reduce, optimizer
          long epochStart = System.nanoTime();
          Iterator<Batch> batches = source.epoch(epoch, startStep);
          // Read ahead across the boundaries: the next epoch once this one is read, and the
          // validation pass that ends this epoch.
          if (epoch + 1 < cfg.epochs) {
            source.prepare(epoch + 1);
          }
          if (validation != null) {
            validation.prepare(0);
          }
          for (long s = startStep; s < steps; s++) {
            long t0 = System.nanoTime();
            if (!batches.hasNext()) {
              throw new IllegalStateException(
                  "rank " + rank + ": the input pipeline ended after " + s + " of " + steps
                      + " steps in epoch " + epoch);
            }
            long t1;
            long t2;
            try (Batch batch = batches.next()) {
              t1 = System.nanoTime();
              replicas.forwardBackward(
                  batch, cfg.loss, loss, cfg.stepSeed(rank, globalStep), grads, statValues, acc);
              t2 = System.nanoTime();
            }
            if (fusion != null) {
              fusion.allReduce(reduced, ReduceOp.MEAN);
            }
            long t3 = System.nanoTime();
            optimizer.update(trainValues, grads, cfg.optimizer.learningRate(globalStep, size));
            for (int j = 0; j < statValues.length; j++) {
              System.arraycopy(statValues[j], 0, values[replicas.stats[j]], 0, statValues[j].length);
            }
            replicas.writeValues(values);
            long t4 = System.nanoTime();
            nanos[0] += t1 - t0;
            nanos[1] += t2 - t1;
            nanos[2] += t3 - t2;
            nanos[3] += t4 - t3;
            globalStep++;
            progress.step(epoch, s + 1, steps, globalStep, acc);
            if (store != null && cfg.checkpointEverySteps > 0 && globalStep % cfg.checkpointEverySteps == 0
                && s + 1 < steps) {
              double[] partial = acc.clone();
              comm.allReduce(partial, ReduceOp.SUM);
              if (rank == 0) {
                writeCheckpoint(store, epoch, s + 1, globalStep, partial, replicas.names, values, optimizer, history,
                    resumes);
              }
            }
            if (rank == cfg.failRank && globalStep == cfg.failAfterStep && attempt == 0) {
              throw new InjectedFailure(
                  "rank " + rank + ": injected failure after global step " + globalStep + " (attempt " + attempt + ")");
            }
          }
          double trainSeconds = (System.nanoTime() - epochStart) / 1e9;
          double[] sums = {acc[0], acc[1], acc[2], nanos[0] / 1e9, nanos[1] / 1e9, nanos[2] / 1e9, nanos[3] / 1e9};
          comm.allReduce(sums, ReduceOp.SUM);
          double[] val = new double[3];
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
          if (rank == cfg.divergeRank) {
            perturb(replicas, values); // test hook: this replica no longer matches the others
          }
          String hash = checkReplicasIdentical(replicas, epoch);
          boolean acc1 = cfg.loss.hasAccuracy();
          EpochMetrics m =
              new EpochMetrics(
                  epoch, steps, (long) sums[2], sums[0] / sums[2], acc1 ? sums[1] / sums[2] : Double.NaN,
                  validation == null ? Double.NaN : val[0] / val[2],
                  validation == null || !acc1 ? Double.NaN : val[1] / val[2],
                  wall[1], sums[2] / wall[0], sums[3] / size, sums[4] / size, sums[5] / size, sums[6] / size, 0, sums[5] / size,
                  hash);
          history.add(m);
          progress.epochEnd(m);
          if (rank == 0) {
            LOG.log(System.Logger.Level.INFO, "epoch " + m.toJson());
            if (store != null) {
              writeCheckpoint(
                  store, epoch + 1, 0, globalStep, new double[3], replicas.names, values, optimizer, history, resumes);
            }
          }
        }
      }
      String hash = HexFormat.of().formatHex(replicas.hash());
      return new WorkerResult(rank, history, resumes, rank == 0 ? replicas.saveParameters() : null, hash);
    }
  }

  /** Rank 0's state (latest checkpoint, or fresh), broadcast to every rank and checked. */
  private TrainingState startState(ReplicaSet replicas, CheckpointStore store) throws IOException {
    byte[] blob = null;
    if (rank == 0) {
      Optional<CheckpointStore.Checkpoint> latest = store == null ? Optional.empty() : store.latest();
      if (latest.isPresent()) {
        TrainingState restored = TrainingState.decode(latest.get().payload());
        restored.resumes.add(new Resume(restored.globalStep, restored.epoch, restored.stepInEpoch, attempt,
            store.directory()));
        LOG.log(System.Logger.Level.INFO,
            "rank 0: resuming from the checkpoint at step " + restored.globalStep + " (epoch " + restored.epoch
                + ", " + restored.stepInEpoch + " steps into it) in " + store.directory() + ", stage attempt "
                + attempt + " (resume " + restored.resumes.size() + " of this run)");
        blob = restored.encode();
      } else {
        TrainingState fresh = new TrainingState();
        fresh.seed = cfg.seed;
        fresh.names.addAll(Arrays.asList(replicas.names));
        fresh.values.addAll(Arrays.asList(replicas.readValues()));
        blob = fresh.encode();
      }
    }
    blob = comm.broadcastBytes(blob, 0);
    TrainingState state = TrainingState.decode(blob);
    if (!state.names.equals(Arrays.asList(replicas.names))) {
      throw new NonRetryableTrainingException(
          "The checkpoint in " + cfg.checkpointDir + " does not match the model: it has parameters "
              + state.names + ", the model " + Arrays.asList(replicas.names));
    }
    for (int i = 0; i < replicas.sizes.length; i++) {
      if (state.values.get(i).length != replicas.sizes[i]) {
        throw new NonRetryableTrainingException(
            "The checkpoint in " + cfg.checkpointDir + " does not match the model: parameter "
                + replicas.names[i] + " has " + state.values.get(i).length + " values, the model "
                + replicas.sizes[i]);
      }
    }
    if (state.seed != cfg.seed) {
      LOG.log(System.Logger.Level.WARNING,
          "Resuming a run started with seed " + state.seed + " under seed " + cfg.seed);
    }
    return state;
  }

  private long checkedStepsPerEpoch(BatchSource source) {
    long steps = source.stepsPerEpoch();
    long[] minMax = {-steps, steps};
    comm.allReduce(minMax, ReduceOp.MAX);
    if (-minMax[0] != minMax[1]) {
      throw new NonRetryableTrainingException(
          "Invalid training data: workers have different stepsPerEpoch (from " + (-minMax[0]) + " to "
              + minMax[1] + "); synchronous training needs the same number on every worker");
    }
    if (steps <= 0) {
      throw new NonRetryableTrainingException("Invalid training data: 0 steps per epoch (fewer rows than one global batch?)");
    }
    return steps;
  }

  /** Moves one parameter value by one ulp (the {@code optInjectDivergence} test hook). */
  private static void perturb(ReplicaSet replicas, float[][] values) {
    values[0][0] = Math.nextUp(values[0][0]);
    replicas.writeValues(values);
  }

  private String checkReplicasIdentical(ReplicaSet replicas, int epoch) {
    byte[] mine = replicas.hash();
    List<byte[]> all = comm.allGather(mine);
    HexFormat hex = HexFormat.of();
    for (int r = 1; r < all.size(); r++) {
      if (!MessageDigest.isEqual(all.get(0), all.get(r))) {
        StringBuilder sb = new StringBuilder("Replica parameters differ after epoch " + epoch + ":");
        for (int k = 0; k < all.size(); k++) {
          sb.append(" rank ").append(k).append(' ').append(hex.formatHex(all.get(k)));
        }
        throw new ReplicaMismatchException(sb.toString());
      }
    }
    return hex.formatHex(all.get(0));
  }

  private void writeCheckpoint(
      CheckpointStore store, int epoch, long stepInEpoch, long globalStep, double[] partial, String[] names,
      float[][] values, Optimizer optimizer, List<EpochMetrics> history, List<Resume> resumes)
      throws IOException {
    TrainingState st = new TrainingState();
    st.epoch = epoch;
    st.stepInEpoch = stepInEpoch;
    st.globalStep = globalStep;
    st.seed = cfg.seed;
    st.partial = partial;
    st.names.addAll(Arrays.asList(names));
    st.values.addAll(Arrays.asList(values));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      optimizer.writeState(out);
    }
    st.optimizer = bytes.toByteArray();
    st.history.addAll(history);
    st.resumes.addAll(resumes);
    store.write(globalStep, st.encode());
  }

}
