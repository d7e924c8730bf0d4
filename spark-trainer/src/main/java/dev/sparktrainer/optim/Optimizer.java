package dev.sparktrainer.optim;

import ai.djl.ndarray.NDArray;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * A stateful optimizer rule, created by {@link OptimizerSpec#newOptimizer(int[])}, in two
 * placements that compute the same formula:
 *
 * <ul>
 *   <li><b>host</b>: {@link #update} / {@link #apply} work on {@code float[]} parameters in Java
 *       arithmetic, and keep the state (moment vectors) in {@code float[]} slots here. {@code
 *       apply} updates a range of one parameter, reading the gradient straight from a (direct)
 *       buffer such as an all-reduce bucket, so that disjoint ranges can be updated by several
 *       threads at once.
 *   <li><b>device</b>: {@link #applyTensors} updates a parameter tensor in place with tensor ops on
 *       its own device, the state being tensors the caller keeps beside it ({@link #slotCount()} of
 *       them per parameter, shaped like it, zero at first).
 * </ul>
 *
 * <p>Call {@link #beginStep()} once per optimizer step before applying it to any parameter: bias
 * corrections use the step count. The state (step count, slot vectors) round-trips exactly through
 * {@link #writeState} / {@link #readState}, or slot by slot ({@link #slot}, {@link #setSteps}) for
 * checkpoints that stream the state array by array. Not thread-safe except for concurrent {@code
 * apply} calls on disjoint ranges.
 */
public abstract class Optimizer {
  private static final int MAGIC = 0x4f505431; // "OPT1"

  /** Elements per gradient chunk copied out of a buffer before the arithmetic (fits in L1/L2). */
  private static final int CHUNK = 4096;

  private static final ThreadLocal<float[]> SCRATCH =
      ThreadLocal.withInitial(() -> new float[CHUNK]);

  /**
   * Parameters of at most this many values have their gradient copied whole, to the same indices as
   * their values, so that the arithmetic indexes every array alike: HotSpot's C2 (Java 17)
   * vectorizes such loops, and not one that reads or writes arrays at different offsets (Adam over
   * the MLP's 235k values: 0.93 ms a step scalar, about 0.15 ms vectorized, on one core here).
   * Larger ones go in {@link #CHUNK} pieces. The scratch grows per thread up to this size.
   */
  static final int ALIGNED_MAX = 1 << 20;

  private static final ThreadLocal<float[][]> ALIGNED =
      ThreadLocal.withInitial(() -> new float[][] {new float[0]});

  /**
   * A per-thread scratch of at least {@code size} floats from {@code local} (grown, not shrunk).
   */
  static float[] scratch(ThreadLocal<float[][]> local, int size) {
    float[][] holder = local.get();
    if (holder[0].length < size) {
      holder[0] = new float[size];
    }
    return holder[0];
  }

  final int[] sizes;
  final float[][][] slots;
  long steps;

  Optimizer(int[] sizes, int slotCount) {
    this.sizes = sizes.clone();
    // Allocated on first use: the device placement keeps its state in tensors and needs none here.
    this.slots = new float[slotCount][sizes.length][];
  }

  /**
   * Updates {@code params[i]} with {@code grads[i]} at learning rate {@code lr}, in place (one
   * step).
   */
  public final void update(float[][] params, float[][] grads, float lr) {
    if (params.length != sizes.length || grads.length != sizes.length) {
      throw new IllegalArgumentException(
          "Invalid update: "
              + params.length
              + " parameters and "
              + grads.length
              + " gradients, expected "
              + sizes.length);
    }
    beginStep();
    for (int i = 0; i < sizes.length; i++) {
      if (params[i].length != sizes[i] || grads[i].length != sizes[i]) {
        throw new IllegalArgumentException(
            "Invalid update: parameter "
                + i
                + " has "
                + params[i].length
                + " values and gradient "
                + grads[i].length
                + ", expected "
                + sizes[i]);
      }
      applyRange(i, params[i], 0, grads[i], 0, sizes[i], lr);
    }
  }

  /**
   * Counts one more optimizer step; call once per step, before {@link #apply}/{@link
   * #applyTensors}.
   */
  public final void beginStep() {
    steps++;
  }

  /**
   * Host placement: updates elements {@code [from, to)} of parameter {@code index} (values {@code
   * p}) with the gradient whose element {@code from} is at float index {@code gradAt} of {@code
   * grad} (absolute; the buffer's position is ignored and left unchanged).
   */
  public final void apply(
      int index, float[] p, FloatBuffer grad, int gradAt, int from, int to, float lr) {
    if (from < 0 || to > sizes[index] || from > to || p.length != sizes[index]) {
      throw new IllegalArgumentException(
          "Invalid range ["
              + from
              + ", "
              + to
              + ") of parameter "
              + index
              + " ("
              + sizes[index]
              + " values)");
    }
    if (to <= ALIGNED_MAX) {
      float[] g = scratch(ALIGNED, to);
      grad.get(gradAt, g, from, to - from);
      applyRange(index, p, from, g, from, to - from, lr);
      return;
    }
    float[] g = SCRATCH.get();
    for (int at = from; at < to; at += CHUNK) {
      int n = Math.min(CHUNK, to - at);
      grad.get(gradAt + (at - from), g, 0, n);
      applyRange(index, p, at, g, 0, n, lr);
    }
  }

  /**
   * Updates {@code p[pAt..pAt+n)} with {@code g[gAt..gAt+n)}; the state of those elements too. With
   * {@code gAt == pAt} every array is indexed alike, which lets the loops vectorize.
   */
  abstract void applyRange(int index, float[] p, int pAt, float[] g, int gAt, int n, float lr);

  /**
   * Device placement: one step on parameter tensor {@code p} with gradient {@code g} (same shape
   * and device), in place, the state in {@code state} ({@link #slotCount()} tensors like {@code
   * p}). Must run with gradient recording off; temporaries are attached to {@code p}'s manager's
   * scope by the caller's sub-manager.
   *
   * <p>The tensors may be whole flat buckets of many parameters: the rule is elementwise, so one
   * call over a bucket computes exactly what one call per parameter would, in a fixed number of
   * engine calls whatever the number of parameters in it.
   *
   * @param scalars the rule's scalars as tensors on {@code p}'s device (see {@link DeviceScalars}:
   *     never a host copy, which a GPU would wait for)
   * @return the engine calls made (each a JNI crossing, and a kernel launch on a GPU), counted at
   *     their call sites for the step's ledger; the scalars made are counted by {@code scalars}
   */
  public abstract int applyTensors(
      NDArray p, NDArray g, NDArray[] state, float lr, DeviceScalars scalars);

  /**
   * {@link #applyTensors(NDArray, NDArray, NDArray[], float, DeviceScalars)} with scalars made for
   * this call alone; returns every engine call, the scalars' fills included.
   */
  public final int applyTensors(NDArray p, NDArray g, NDArray[] state, float lr) {
    try (DeviceScalars scalars = new DeviceScalars(p.getManager())) {
      int calls = applyTensors(p, g, state, lr, scalars);
      return calls + (int) scalars.made();
    }
  }

  /** A short name of the rule, checked when state is restored. */
  public abstract String name();

  /**
   * Names of the state slots ({@code m}, {@code v} for Adam; {@code momentum} for SGD; none
   * without).
   */
  public abstract String[] slotNames();

  /** Number of state vectors per parameter. */
  public final int slotCount() {
    return slots.length;
  }

  /** Slot {@code s} of parameter {@code index} (the host placement's live state; writable). */
  public final float[] slot(int s, int index) {
    float[] v = slots[s][index];
    if (v == null) {
      v = new float[sizes[index]];
      slots[s][index] = v;
    }
    return v;
  }

  /** Updates applied so far. */
  public long steps() {
    return steps;
  }

  /** Restores the step count (with the slots, through {@link #slot}). */
  public void setSteps(long steps) {
    if (steps < 0) {
      throw new IllegalArgumentException("Invalid optimizer step count " + steps);
    }
    this.steps = steps;
  }

  /** Writes the step count and every state vector. */
  public void writeState(DataOutputStream out) throws IOException {
    out.writeInt(MAGIC);
    out.writeUTF(name());
    out.writeLong(steps);
    out.writeInt(slots.length);
    out.writeInt(sizes.length);
    byte[] buf = new byte[0];
    for (int si = 0; si < slots.length; si++) {
      for (int i = 0; i < sizes.length; i++) {
        float[] v = slot(si, i);
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
      throw new IOException(
          "Invalid optimizer state: written by " + name + ", restoring into " + name());
    }
    long s = in.readLong();
    int slotCount = in.readInt();
    int count = in.readInt();
    if (slotCount != slots.length || count != sizes.length) {
      throw new IOException(
          "Invalid optimizer state: "
              + slotCount
              + " slots x "
              + count
              + " parameters, expected "
              + slots.length
              + " x "
              + sizes.length);
    }
    byte[] buf = new byte[0];
    for (int si = 0; si < slots.length; si++) {
      for (int i = 0; i < count; i++) {
        int n = in.readInt();
        if (n != sizes[i]) {
          throw new IOException(
              "Invalid optimizer state: parameter "
                  + i
                  + " has "
                  + n
                  + " values, expected "
                  + sizes[i]);
        }
        if (buf.length < 4 * n) {
          buf = new byte[4 * n];
        }
        in.readFully(buf, 0, 4 * n);
        ByteBuffer.wrap(buf, 0, 4 * n)
            .order(ByteOrder.LITTLE_ENDIAN)
            .asFloatBuffer()
            .get(slot(si, i));
      }
    }
    steps = s;
  }
}
