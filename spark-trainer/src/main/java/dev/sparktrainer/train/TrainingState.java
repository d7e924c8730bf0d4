package dev.sparktrainer.train;

import dev.sparktrainer.optim.Optimizer;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Everything a worker needs to continue: the position ({@code epoch}, steps done in it, global
 * step), the partial epoch sums, every parameter, the optimizer state and the history so far. It is
 * the payload of a checkpoint and of the start-up broadcast from rank 0 (a fresh start is a state at
 * step 0 with rank 0's initial parameters).
 */
final class TrainingState {
  private static final int MAGIC = 0x54535432; // "TST2"

  int epoch;
  long stepInEpoch;
  long globalStep;
  long seed;
  /** Global sums of the epoch's completed steps: loss x samples, correct, samples. */
  double[] partial = new double[3];
  List<String> names = new ArrayList<>();
  List<float[]> values = new ArrayList<>();
  /** Optimizer state as written by {@link Optimizer#writeState}, null at a fresh start. */
  byte[] optimizer;
  List<EpochMetrics> history = new ArrayList<>();
  /** Every resume so far (the last one is this start's, when it resumed). */
  List<Resume> resumes = new ArrayList<>();

  byte[] encode() {
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      DataOutputStream out = new DataOutputStream(bytes);
      out.writeInt(MAGIC);
      out.writeInt(epoch);
      out.writeLong(stepInEpoch);
      out.writeLong(globalStep);
      out.writeLong(seed);
      for (double d : partial) {
        out.writeDouble(d);
      }
      out.writeInt(names.size());
      for (int i = 0; i < names.size(); i++) {
        out.writeUTF(names.get(i));
        float[] v = values.get(i);
        out.writeInt(v.length);
        byte[] buf = new byte[4 * v.length];
        ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().put(v);
        out.write(buf);
      }
      out.writeBoolean(optimizer != null);
      if (optimizer != null) {
        out.writeInt(optimizer.length);
        out.write(optimizer);
      }
      out.writeInt(history.size());
      for (EpochMetrics m : history) {
        out.writeInt(m.epoch());
        out.writeLong(m.steps());
        out.writeLong(m.samples());
        for (double d :
            new double[] {
              m.loss(), m.accuracy(), m.validationLoss(), m.validationAccuracy(), m.seconds(),
              m.samplesPerSecond(), m.dataWaitSeconds(), m.computeSeconds(), m.allReduceSeconds(),
              m.optimizerSeconds(), m.backwardSeconds(), m.communicationSeconds()
            }) {
          out.writeDouble(d);
        }
        out.writeUTF(m.parameterHash());
      }
      // Appended after the first format: a state without this section (an older checkpoint) decodes
      // with no resumes.
      out.writeInt(resumes.size());
      for (Resume r : resumes) {
        out.writeLong(r.step());
        out.writeInt(r.epoch());
        out.writeLong(r.stepInEpoch());
        out.writeInt(r.stageAttempt());
        out.writeUTF(r.checkpoint());
      }
      out.flush();
      return bytes.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static TrainingState decode(byte[] data) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
    if (in.readInt() != MAGIC) {
      throw new IOException("not a training state (bad magic number)");
    }
    TrainingState s = new TrainingState();
    s.epoch = in.readInt();
    s.stepInEpoch = in.readLong();
    s.globalStep = in.readLong();
    s.seed = in.readLong();
    for (int i = 0; i < s.partial.length; i++) {
      s.partial[i] = in.readDouble();
    }
    int n = in.readInt();
    for (int i = 0; i < n; i++) {
      s.names.add(in.readUTF());
      int len = in.readInt();
      byte[] buf = new byte[4 * len];
      in.readFully(buf);
      float[] v = new float[len];
      ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(v);
      s.values.add(v);
    }
    if (in.readBoolean()) {
      s.optimizer = new byte[in.readInt()];
      in.readFully(s.optimizer);
    }
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
          new EpochMetrics(epoch, steps, samples, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11],
              in.readUTF()));
    }
    if (in.available() > 0) {
      int r = in.readInt();
      for (int i = 0; i < r; i++) {
        s.resumes.add(new Resume(in.readLong(), in.readInt(), in.readLong(), in.readInt(), in.readUTF()));
      }
    }
    return s;
  }
}
