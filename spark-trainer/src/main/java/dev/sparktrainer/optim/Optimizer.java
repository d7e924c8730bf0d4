package dev.sparktrainer.optim;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A stateful optimizer over {@code float[]} parameters, created by {@link
 * OptimizerSpec#newOptimizer(int[])}. Not thread-safe.
 *
 * <p>{@link #update} applies one step to every parameter, in place; its state (step count, moment
 * vectors) round-trips exactly through {@link #writeState} / {@link #readState}, so a resumed run
 * continues with the same bits as an uninterrupted one.
 */
public abstract class Optimizer {
  private static final int MAGIC = 0x4f505431; // "OPT1"

  final int[] sizes;
  final float[][][] slots;
  long steps;

  Optimizer(int[] sizes, int slotCount) {
    this.sizes = sizes.clone();
    this.slots = new float[slotCount][sizes.length][];
    for (int s = 0; s < slotCount; s++) {
      for (int i = 0; i < sizes.length; i++) {
        slots[s][i] = new float[sizes[i]];
      }
    }
  }

  /** Updates {@code params[i]} with {@code grads[i]} at learning rate {@code lr}, in place. */
  public final void update(float[][] params, float[][] grads, float lr) {
    if (params.length != sizes.length || grads.length != sizes.length) {
      throw new IllegalArgumentException(
          "Invalid update: " + params.length + " parameters and " + grads.length + " gradients, expected "
              + sizes.length);
    }
    steps++;
    for (int i = 0; i < sizes.length; i++) {
      if (params[i].length != sizes[i] || grads[i].length != sizes[i]) {
        throw new IllegalArgumentException(
            "Invalid update: parameter " + i + " has " + params[i].length + " values and gradient "
                + grads[i].length + ", expected " + sizes[i]);
      }
      apply(i, params[i], grads[i], lr);
    }
  }

  abstract void apply(int index, float[] p, float[] g, float lr);

  /** A short name of the rule, checked when state is restored. */
  public abstract String name();

  /** Updates applied so far. */
  public long steps() {
    return steps;
  }

  /** Writes the step count and every state vector. */
  public void writeState(DataOutputStream out) throws IOException {
    out.writeInt(MAGIC);
    out.writeUTF(name());
    out.writeLong(steps);
    out.writeInt(slots.length);
    out.writeInt(sizes.length);
    byte[] buf = new byte[0];
    for (float[][] slot : slots) {
      for (float[] v : slot) {
        out.writeInt(v.length);
        if (buf.length < 4 * v.length) {
          buf = new byte[4 * v.length];
        }
        ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().put(v);
        out.write(buf, 0, 4 * v.length);
      }
    }
  }

  /** Restores what {@link #writeState} wrote; fails if the rule or the sizes differ. */
  public void readState(DataInputStream in) throws IOException {
    if (in.readInt() != MAGIC) {
      throw new IOException("Invalid optimizer state: bad magic number");
    }
    String name = in.readUTF();
    if (!name.equals(name())) {
      throw new IOException("Invalid optimizer state: written by " + name + ", restoring into " + name());
    }
    long s = in.readLong();
    int slotCount = in.readInt();
    int count = in.readInt();
    if (slotCount != slots.length || count != sizes.length) {
      throw new IOException(
          "Invalid optimizer state: " + slotCount + " slots x " + count + " parameters, expected "
              + slots.length + " x " + sizes.length);
    }
    byte[] buf = new byte[0];
    for (float[][] slot : slots) {
      for (int i = 0; i < count; i++) {
        int n = in.readInt();
        if (n != sizes[i]) {
          throw new IOException(
              "Invalid optimizer state: parameter " + i + " has " + n + " values, expected " + sizes[i]);
        }
        if (buf.length < 4 * n) {
          buf = new byte[4 * n];
        }
        in.readFully(buf, 0, 4 * n);
        ByteBuffer.wrap(buf, 0, 4 * n).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(slot[i]);
      }
    }
    steps = s;
  }
}
