package dev.sparktrainer.train.loop;

import dev.sparktrainer.checkpoint.AsyncCheckpointWriter;
import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.StateArray;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.TrainStep;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Rank 0's checkpoints: a {@link Snapshot} of where training stands plus copies of the whole live
 * state (training goes on while it is written), handed to the background writer. One write is in
 * flight at a time; a snapshot waiting behind it is replaced by a newer one; an earlier write's
 * failure is thrown here.
 */
final class SnapshotWriter {
  private static final System.Logger LOG = System.getLogger(SnapshotWriter.class.getName());

  private final AsyncCheckpointWriter writer;
  private final TrainingState run;
  private final String orderKey;
  private final long seed;
  private final int workers;
  private final ReplicaSet replicas;
  private final TrainStep step;
  private final Optimizer optimizer;
  private final List<EpochMetrics> history;
  private final List<Resume> resumes;

  /**
   * @param run the start's state: the layout (batch, accumulation, learning-rate scaling) it chose
   * @param history the loop's history, read (not copied) at each snapshot
   */
  SnapshotWriter(
      AsyncCheckpointWriter writer,
      TrainingState run,
      String orderKey,
      long seed,
      int workers,
      ReplicaSet replicas,
      TrainStep step,
      Optimizer optimizer,
      List<EpochMetrics> history,
      List<Resume> resumes) {
    this.writer = writer;
    this.run = run;
    this.orderKey = orderKey;
    this.seed = seed;
    this.workers = workers;
    this.replicas = replicas;
    this.step = step;
    this.optimizer = optimizer;
    this.history = history;
    this.resumes = resumes;
  }

  void write(Snapshot at) throws IOException {
    float[][] values = step.parameterValues();
    String bad = nonFinite(replicas.parameterNames(), values);
    if (bad != null) {
      // The loss was still finite (Divergence checks it): the last update made the parameters
      // NaN. The next loss check stops the run; a checkpoint of them would poison every resume.
      LOG.log(
          System.Logger.Level.WARNING,
          "Not writing the checkpoint at step "
              + at.globalStep()
              + ": parameter "
              + bad
              + " holds a NaN or infinite value (training diverged)");
      return;
    }
    TrainingState st = new TrainingState();
    st.epoch = at.epoch();
    st.stepInEpoch = at.stepInEpoch();
    st.consumedRecords = at.consumedRecords();
    st.earlierSegments.addAll(at.earlierSegments());
    st.orderKey = orderKey;
    st.segmentStartStep = at.segmentStartStep();
    st.workers = workers;
    st.batchSize = run.batchSize;
    st.accumulateSteps = run.accumulateSteps;
    st.lrWorkers = run.lrWorkers;
    st.lrScale = run.lrScale;
    st.globalStep = at.globalStep();
    st.seed = seed;
    st.partial = at.partial();
    st.names.addAll(replicas.parameterNames());
    st.values.addAll(List.of(values));
    st.optimizerName = optimizer.name();
    st.optimizerSteps = optimizer.steps();
    st.slotNames.addAll(List.of(optimizer.slotNames()));
    st.trainableNames.addAll(replicas.trainableNames());
    st.slots = step.optimizerSlots();
    st.history.addAll(history);
    st.resumes.addAll(resumes);
    List<String> names = st.arrayNames();
    List<float[]> arrays = st.arrays();
    List<StateArray> out = new ArrayList<>(arrays.size());
    for (int i = 0; i < arrays.size(); i++) {
      out.add(new StateArray(names.get(i), arrays.get(i)));
    }
    writer.submit(new CheckpointState(at.globalStep(), st.encodeMeta(), out));
  }

  /** The name of the first parameter holding a NaN or infinity; null if all are finite. */
  static String nonFinite(List<String> names, float[][] values) {
    for (int i = 0; i < values.length; i++) {
      for (float v : values[i]) {
        if (!Float.isFinite(v)) {
          return names.get(i);
        }
      }
    }
    return null;
  }
}
