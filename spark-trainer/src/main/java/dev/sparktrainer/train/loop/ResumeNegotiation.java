package dev.sparktrainer.train.loop;

import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.IncompatibleCheckpointException;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.checkpoint.StateArray;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.WorkerCountChange;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.TrainStep;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * How every rank starts: rank 0 reads the latest checkpoint (or takes its freshly initialized
 * parameters), validates it, chooses the layout to continue with ({@link ElasticPolicy}) and
 * broadcasts the state; every rank checks it against its model and restores it. A failure of rank
 * 0's read or choice travels in the metadata broadcast, so that every rank fails naming it (and,
 * when a retry would repeat it, without retry).
 *
 * <p>It sits in {@code train}, not {@code train.elastic}: it fills the package's training state and
 * replicas, which the elastic package must not reach (its dependencies run one way).
 */
final class ResumeNegotiation {
  private static final System.Logger LOG = System.getLogger(ResumeNegotiation.class.getName());

  private final TrainingConfig cfg;
  private final Communicator comm;
  private final int rank;
  private final int size;
  private final int attempt;

  /**
   * @param attempt the Spark stage attempt, recorded in the resumes
   */
  ResumeNegotiation(TrainingConfig cfg, Communicator comm, int attempt) {
    this.cfg = cfg;
    this.comm = comm;
    this.rank = comm.rank();
    this.size = comm.size();
    this.attempt = attempt;
  }

  /**
   * Rank 0's state (latest checkpoint, or fresh), broadcast to every rank, checked and restored.
   */
  TrainingState start(
      ReplicaSet replicas, CheckpointStore store, TrainStep step, Optimizer optimizer)
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
        state.seed = cfg.model().seed();
        state.names.addAll(replicas.parameterNames());
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
      state.allocateArrays(replicas.trainableSizes(), state.hasSlots);
    }
    if (size > 1) {
      for (float[] a : state.arrays()) {
        comm.broadcast(a, 0);
      }
    }
    if (state.seed != cfg.model().seed()) {
      LOG.log(
          System.Logger.Level.WARNING,
          "Resuming a run started with seed " + state.seed + " under seed " + cfg.model().seed());
    }
    step.restore(state.values.toArray(new float[0][]), state.slots, state.optimizerSteps);
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
    int planned = cfg.elastic().plannedWorkers() > 0 ? cfg.elastic().plannedWorkers() : size;
    state.workers = planned;
    state.batchSize = cfg.data().train().batchSize();
    state.accumulateSteps = cfg.data().accumulateSteps();
    state.lrWorkers = planned;
    state.lrScale = 1;
    if (planned != size) {
      WorkerCountChange c = chooseLayout(state);
      LOG.log(System.Logger.Level.INFO, "rank 0: starting on fewer workers than planned: " + c);
    }
  }

  /**
   * Rank 0, resuming: the layout to continue with, as {@link ElasticPolicy#decide} chooses it,
   * applied to {@code state} (and logged); a refusal fails the run, not retryable. Returns what
   * changed, null if nothing did.
   */
  private WorkerCountChange chooseLayout(TrainingState state) {
    ElasticPolicy.Decision d =
        cfg.elasticPolicy()
            .decide(
                new ElasticPolicy.SavedLayout(
                    state.workers,
                    state.batchSize,
                    state.accumulateSteps,
                    state.lrScale,
                    state.epoch,
                    state.stepInEpoch,
                    state.orderKey,
                    !state.names.isEmpty()),
                size);
    if (d.orderWarning() != null) {
      LOG.log(System.Logger.Level.WARNING, "rank 0: " + d.orderWarning());
    }
    if (d.refused()) {
      throw new NonRetryableTrainingException(d.explanation());
    }
    switch (d.continuation()) {
      case OLDER_CHECKPOINT -> {
        // Written by this layout, as before.
        state.workers = size;
        state.batchSize = d.batchSize();
        state.accumulateSteps = d.accumulateSteps();
        state.lrWorkers = size;
        state.lrScale = 1;
        state.consumedRecords = state.stepInEpoch * d.batchSize() * d.accumulateSteps() * size;
        return null;
      }
      case RESTART -> restartEpoch(state);
      case BY_RECORDS -> state.continueByRecords = true;
      case BY_SEGMENTS -> {
        long steps = state.stepInEpoch - state.segmentStartStep;
        if (steps > 0) {
          state.earlierSegments.add(
              new EpochSegment(state.workers, state.batchSize, steps * state.accumulateSteps));
        }
        state.segmentStartStep = state.stepInEpoch;
      }
      case AS_IS -> {}
    }
    if (!d.changed()) {
      return null;
    }
    WorkerCountChange change =
        new WorkerCountChange(
            state.workers,
            size,
            d.batchSize(),
            d.accumulateSteps(),
            d.learningRateScale(),
            d.continuation() == ElasticPolicy.Continuation.RESTART);
    LOG.log(
        change.epochRestarted() ? System.Logger.Level.WARNING : System.Logger.Level.INFO,
        "rank 0: " + d.explanation());
    state.workers = size;
    state.batchSize = d.batchSize();
    state.accumulateSteps = d.accumulateSteps();
    state.lrScale = d.learningRateScale();
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
    if (!state.names.equals(replicas.parameterNames())) {
      throw new NonRetryableTrainingException(
          "The checkpoint in "
              + cfg.checkpoints().dir()
              + " does not match the model: it has parameters "
              + state.names
              + ", the model "
              + replicas.parameterNames());
    }
    int[] sizes = replicas.parameterSizes();
    List<String> names = replicas.parameterNames();
    for (int i = 0; i < sizes.length; i++) {
      if (valueSizes[i] != sizes[i]) {
        throw new NonRetryableTrainingException(
            "The checkpoint in "
                + cfg.checkpoints().dir()
                + " does not match the model: parameter "
                + names.get(i)
                + " has "
                + valueSizes[i]
                + " values, the model "
                + sizes[i]);
      }
    }
    if (state.optimizerName != null && !state.optimizerName.equals(optimizer.name())) {
      throw new NonRetryableTrainingException(
          "The checkpoint in "
              + cfg.checkpoints().dir()
              + " was written with optimizer "
              + state.optimizerName
              + ", this run uses "
              + optimizer.name());
    }
    if (state.optimizerName != null
        && !state.slotNames.equals(Arrays.asList(optimizer.slotNames()))) {
      throw new NonRetryableTrainingException(
          "The checkpoint in "
              + cfg.checkpoints().dir()
              + " has optimizer state "
              + state.slotNames
              + ", this run's "
              + optimizer.name()
              + " keeps "
              + Arrays.asList(optimizer.slotNames()));
    }
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
