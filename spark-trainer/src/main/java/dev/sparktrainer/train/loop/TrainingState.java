package dev.sparktrainer.train.loop;

import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.data.EpochSegment;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.WorkerCountChange;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Everything a worker needs to continue, in two parts: the small metadata ({@link #encodeMeta}: the
 * position — epoch, steps done in it, global step —, the partial epoch sums, the parameter names
 * and sizes, the optimizer's rule, step count and slot names, the history so far) and the arrays —
 * every parameter's values and each optimizer slot of each trainable parameter — which checkpoints
 * stream one by one and the start-up broadcast sends one by one (a state can be far larger than 2
 * GiB). A fresh start is a state at step 0 with rank 0's initial parameters and no slots (zero
 * state).
 *
 * <p>Why this file is long: it is one wire format, the state a checkpoint and the start-up
 * broadcast carry, with its encoder and its decoder for every version written since format 1 side
 * by side, so that each field's write and read (and the older layouts' defaults) can be checked
 * against each other; split, a field added on one side would be missed on the other.
 */
public final class TrainingState {
  private static final int MAGIC =
      0x54535435; // "TST5": the layout that wrote it, worker-count changes

  /**
   * Previous versions, read too: TST4 without the layout (resumed on its own), TST3 also without
   * skipped checkpoints.
   */
  private static final int MAGIC_4 = 0x54535434; // "TST4"

  private static final int MAGIC_3 = 0x54535433; // "TST3"

  /** Starts an {@link #encodeFailure} payload instead. */
  private static final int FAILURE = 0x54455252; // "TERR"

  int epoch;
  long stepInEpoch;
  long globalStep;
  long seed;

  /**
   * Global sums of the epoch's completed steps: loss x samples, correct, samples, then the
   * regression sums ({@link EpochMetrics.Regression#addSums}).
   */
  double[] partial = new double[3 + EpochMetrics.Regression.SUMS];

  /**
   * Tags the optional section after the resumes: regression sums and metrics (absent in older
   * states).
   */
  private static final int REGRESSION = 0x52454752; // "REGR"

  /**
   * Tags the optional section after the regression one: the interrupted epoch's earlier segments
   * (absent in older states: none).
   */
  private static final int SEGMENTS = 0x53454753; // "SEGS"

  List<String> names = new ArrayList<>();
  List<float[]> values = new ArrayList<>();

  /** The optimizer rule's name ({@code Optimizer.name()}); null at a fresh start. */
  String optimizerName;

  long optimizerSteps;
  List<String> slotNames = new ArrayList<>();

  /** Names of the trainable parameters (the slots' order). */
  List<String> trainableNames = new ArrayList<>();

  /** {@code slots[s][j]}: slot s of trainable parameter j; null at a fresh start (zero state). */
  float[][][] slots;

  List<EpochMetrics> history = new ArrayList<>();

  /** Every resume so far (the last one is this start's, when it resumed). */
  List<Resume> resumes = new ArrayList<>();

  /**
   * The layout that wrote the state: workers (0: unknown, an older checkpoint), per-worker batch,
   * accumulation.
   */
  int workers;

  int batchSize;
  int accumulateSteps = 1;

  /**
   * Records of the epoch's global order consumed by its completed steps (a position that survives a
   * change of layout, for sources with a global order: {@code BatchSource.globalOrder}).
   */
  long consumedRecords;

  /**
   * The learning rate is {@code optimizer.learningRate(step, lrWorkers) x lrScale} (see
   * TrainingLoop).
   */
  int lrWorkers;

  double lrScale = 1;

  /**
   * Only in the start-up broadcast: the resumed epoch continues from {@link #consumedRecords} in
   * the data's global order (a resume on another layout), not by skipping {@link #stepInEpoch}
   * steps.
   */
  boolean continueByRecords;

  /**
   * Parts of the epoch consumed by earlier layouts, oldest first, for sources that replay an epoch
   * ({@code BatchSourceFactory.replaysEpochs}): the epoch goes on with the records they did not
   * consume. Empty when the whole epoch so far was this layout's.
   */
  List<EpochSegment> earlierSegments = new ArrayList<>();

  /** The epoch's optimizer steps taken by the earlier segments (this layout's start in it). */
  long segmentStartStep;

  /**
   * What the writer's order of an epoch depended on besides the layout ({@code
   * BatchSourceFactory.orderKey}); "" in older states. An epoch is only continued by replaying its
   * earlier part when it matches.
   */
  String orderKey = "";

  /** The learning rate of optimizer step {@code step} in this run's layout. */
  float learningRate(OptimizerSpec spec, long step) {
    float lr = spec.learningRate(step, lrWorkers);
    return lrScale == 1 ? lr : (float) (lr * lrScale);
  }

  /** Array lengths read by {@link #decodeMeta} (values, then slots), before the arrays arrive. */
  int[] valueSizes;

  /** The arrays in stream order: every parameter, then each slot of each trainable parameter. */
  List<float[]> arrays() {
    List<float[]> out = new ArrayList<>(values);
    if (slots != null) {
      for (float[][] slot : slots) {
        for (float[] v : slot) {
          out.add(v);
        }
      }
    }
    return out;
  }

  /** Names of {@link #arrays()}: {@code param/<name>}, then {@code <slot>/<name>}. */
  List<String> arrayNames() {
    List<String> out = new ArrayList<>();
    for (String n : names) {
      out.add("param/" + n);
    }
    if (slots != null) {
      for (String s : slotNames) {
        for (String n : trainableNames) {
          out.add(s + "/" + n);
        }
      }
    }
    return out;
  }

  /**
   * Allocates the arrays announced by the metadata (on ranks receiving a broadcast), with {@code
   * trainableSizes} the sizes of the trainable parameters (slot lengths).
   */
  void allocateArrays(int[] trainableSizes, boolean withSlots) {
    values.clear();
    for (int n : valueSizes) {
      values.add(new float[n]);
    }
    if (withSlots) {
      slots = new float[slotNames.size()][trainableSizes.length][];
      for (int s = 0; s < slots.length; s++) {
        for (int j = 0; j < trainableSizes.length; j++) {
          slots[s][j] = new float[trainableSizes[j]];
        }
      }
    }
  }

  /**
   * Takes {@code arrays} (in {@link #arrays()} order, as announced by the metadata) as this state's
   * values and slots, without copying them.
   */
  void adoptArrays(List<float[]> arrays, int trainableCount) {
    values.clear();
    int at = 0;
    for (int i = 0; i < valueSizes.length; i++) {
      values.add(arrays.get(at++));
    }
    if (hasSlots) {
      slots = new float[slotNames.size()][trainableCount][];
      for (int s = 0; s < slots.length; s++) {
        for (int j = 0; j < trainableCount; j++) {
          slots[s][j] = arrays.get(at++);
        }
      }
    }
  }

  /** Whether the metadata says slot arrays follow. */
  boolean hasSlots;

  byte[] encodeMeta() {
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      DataOutputStream out = new DataOutputStream(bytes);
      out.writeInt(MAGIC);
      out.writeInt(epoch);
      out.writeLong(stepInEpoch);
      out.writeLong(globalStep);
      out.writeLong(seed);
      for (int i = 0; i < 3; i++) {
        out.writeDouble(partial[i]);
      }
      out.writeInt(names.size());
      for (int i = 0; i < names.size(); i++) {
        out.writeUTF(names.get(i));
        out.writeInt(values.isEmpty() ? valueSizes[i] : values.get(i).length);
      }
      out.writeBoolean(optimizerName != null);
      if (optimizerName != null) {
        out.writeUTF(optimizerName);
        out.writeLong(optimizerSteps);
      }
      out.writeInt(slotNames.size());
      for (String s : slotNames) {
        out.writeUTF(s);
      }
      out.writeInt(trainableNames.size());
      for (String s : trainableNames) {
        out.writeUTF(s);
      }
      out.writeBoolean(slots != null);
      out.writeInt(history.size());
      for (EpochMetrics m : history) {
        out.writeInt(m.epoch());
        out.writeLong(m.steps());
        out.writeLong(m.samples());
        for (double d :
            new double[] {
              m.loss(),
              m.accuracy(),
              m.validationLoss(),
              m.validationAccuracy(),
              m.seconds(),
              m.samplesPerSecond(),
              m.dataWaitSeconds(),
              m.computeSeconds(),
              m.allReduceSeconds(),
              m.optimizerSeconds(),
              m.backwardSeconds(),
              m.communicationSeconds()
            }) {
          out.writeDouble(d);
        }
        out.writeUTF(m.parameterHash());
      }
      out.writeInt(resumes.size());
      for (Resume r : resumes) {
        out.writeLong(r.step());
        out.writeInt(r.epoch());
        out.writeLong(r.stepInEpoch());
        out.writeInt(r.stageAttempt());
        out.writeUTF(r.checkpoint());
        out.writeInt(r.skipped().size());
        for (SkippedCheckpoint k : r.skipped()) {
          out.writeUTF(k.file());
          out.writeUTF(k.reason());
        }
      }
      out.writeInt(workers);
      out.writeInt(batchSize);
      out.writeInt(accumulateSteps);
      out.writeLong(consumedRecords);
      out.writeInt(lrWorkers);
      out.writeDouble(lrScale);
      out.writeBoolean(continueByRecords);
      for (Resume r : resumes) {
        WorkerCountChange c = r.workers();
        out.writeBoolean(c != null);
        if (c != null) {
          out.writeInt(c.fromWorkers());
          out.writeInt(c.toWorkers());
          out.writeInt(c.batchSize());
          out.writeInt(c.accumulateSteps());
          out.writeDouble(c.learningRateScale());
          out.writeBoolean(c.epochRestarted());
        }
      }
      out.writeInt(REGRESSION);
      for (int i = 3; i < 3 + EpochMetrics.Regression.SUMS; i++) {
        out.writeDouble(i < partial.length ? partial[i] : 0);
      }
      for (EpochMetrics m : history) {
        out.writeBoolean(m.regression() != null);
        if (m.regression() != null) {
          for (double d :
              new double[] {
                m.mse(), m.mae(), m.r2(), m.validationMse(), m.validationMae(), m.validationR2()
              }) {
            out.writeDouble(d);
          }
        }
      }
      out.writeInt(SEGMENTS);
      out.writeUTF(orderKey);
      out.writeLong(segmentStartStep);
      out.writeInt(earlierSegments.size());
      for (EpochSegment g : earlierSegments) {
        out.writeInt(g.workers());
        out.writeInt(g.batchSize());
        out.writeLong(g.batches());
      }
      out.flush();
      return bytes.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * What rank 0 broadcasts instead of the metadata when it cannot start (the checkpoint could not
   * be read): {@code message}, so that the other ranks fail with it.
   */
  static byte[] encodeFailure(String message) {
    byte[] text = message.getBytes(StandardCharsets.UTF_8);
    return ByteBuffer.allocate(4 + text.length).putInt(FAILURE).put(text).array();
  }

  /** The message of an {@link #encodeFailure} payload; null for metadata. */
  static String decodeFailure(byte[] data) {
    if (data.length < 4 || ByteBuffer.wrap(data).getInt() != FAILURE) {
      return null;
    }
    return new String(data, 4, data.length - 4, StandardCharsets.UTF_8);
  }

  /** The metadata; arrays are allocated by {@link #allocateArrays} and filled by the caller. */
  static TrainingState decodeMeta(byte[] data) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
    int magic = in.readInt();
    if (magic != MAGIC && magic != MAGIC_4 && magic != MAGIC_3) {
      throw new IOException("not a training state of this version (bad magic number)");
    }
    TrainingState s = new TrainingState();
    s.epoch = in.readInt();
    s.stepInEpoch = in.readLong();
    s.globalStep = in.readLong();
    s.seed = in.readLong();
    for (int i = 0; i < 3; i++) {
      s.partial[i] = in.readDouble();
    }
    int n = in.readInt();
    s.valueSizes = new int[n];
    for (int i = 0; i < n; i++) {
      s.names.add(in.readUTF());
      s.valueSizes[i] = in.readInt();
    }
    if (in.readBoolean()) {
      s.optimizerName = in.readUTF();
      s.optimizerSteps = in.readLong();
    }
    int slotCount = in.readInt();
    for (int i = 0; i < slotCount; i++) {
      s.slotNames.add(in.readUTF());
    }
    int trainable = in.readInt();
    for (int i = 0; i < trainable; i++) {
      s.trainableNames.add(in.readUTF());
    }
    s.hasSlots = in.readBoolean();
    int h = in.readInt();
    for (int i = 0; i < h; i++) {
      int epoch = in.readInt();
      long steps = in.readLong();
      long samples = in.readLong();
      double[] d = new double[12];
      for (int k = 0; k < d.length; k++) {
        d[k] = in.readDouble();
      }
      s.history.add(
          new EpochMetrics(
              epoch,
              steps,
              samples,
              d[0],
              d[1],
              d[2],
              d[3],
              d[4],
              d[5],
              d[6],
              d[7],
              d[8],
              d[9],
              d[10],
              d[11],
              in.readUTF()));
    }
    int r = in.readInt();
    for (int i = 0; i < r; i++) {
      long step = in.readLong();
      int epoch = in.readInt();
      long stepInEpoch = in.readLong();
      int attempt = in.readInt();
      String dir = in.readUTF();
      List<SkippedCheckpoint> skipped = new ArrayList<>();
      int k = magic == MAGIC_3 ? 0 : in.readInt();
      for (int j = 0; j < k; j++) {
        skipped.add(new SkippedCheckpoint(in.readUTF(), in.readUTF()));
      }
      s.resumes.add(new Resume(step, epoch, stepInEpoch, attempt, dir, skipped));
    }
    if (magic == MAGIC) {
      s.workers = in.readInt();
      s.batchSize = in.readInt();
      s.accumulateSteps = in.readInt();
      s.consumedRecords = in.readLong();
      s.lrWorkers = in.readInt();
      s.lrScale = in.readDouble();
      s.continueByRecords = in.readBoolean();
      for (int i = 0; i < s.resumes.size(); i++) {
        if (in.readBoolean()) {
          Resume o = s.resumes.get(i);
          s.resumes.set(
              i,
              new Resume(
                  o.step(),
                  o.epoch(),
                  o.stepInEpoch(),
                  o.stageAttempt(),
                  o.checkpoint(),
                  o.skipped(),
                  new WorkerCountChange(
                      in.readInt(),
                      in.readInt(),
                      in.readInt(),
                      in.readInt(),
                      in.readDouble(),
                      in.readBoolean())));
        }
      }
    }
    if (in.available() >= 4 && in.readInt() == REGRESSION) {
      for (int i = 3; i < 3 + EpochMetrics.Regression.SUMS; i++) {
        s.partial[i] = in.readDouble();
      }
      for (int i = 0; i < s.history.size(); i++) {
        if (in.readBoolean()) {
          EpochMetrics m = s.history.get(i);
          EpochMetrics.Regression g =
              new EpochMetrics.Regression(
                  in.readDouble(),
                  in.readDouble(),
                  in.readDouble(),
                  in.readDouble(),
                  in.readDouble(),
                  in.readDouble());
          s.history.set(
              i,
              new EpochMetrics(
                  m.epoch(),
                  m.steps(),
                  m.samples(),
                  m.loss(),
                  m.accuracy(),
                  m.validationLoss(),
                  m.validationAccuracy(),
                  m.seconds(),
                  m.samplesPerSecond(),
                  m.dataWaitSeconds(),
                  m.computeSeconds(),
                  m.allReduceSeconds(),
                  m.optimizerSeconds(),
                  m.backwardSeconds(),
                  m.communicationSeconds(),
                  m.parameterHash(),
                  g));
        }
      }
      if (in.available() >= 4 && in.readInt() == SEGMENTS) {
        s.orderKey = in.readUTF();
        s.segmentStartStep = in.readLong();
        int segments = in.readInt();
        for (int i = 0; i < segments; i++) {
          s.earlierSegments.add(new EpochSegment(in.readInt(), in.readInt(), in.readLong()));
        }
      }
    }
    return s;
  }
}
