package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.jni.JniUtils;
import dev.sparktrainer.optim.DeviceScalars;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The step's gradients as flat device buckets: gathered from the engine with one engine call per
 * bucket and replica, combined on the first replica's device (replicas, micro-batches), and moved
 * to and from the host all-reduce arena with one copy per bucket — only when the ring (or the host
 * optimizer) needs them. With one worker and the device optimizer nothing crosses to the host.
 *
 * <p><b>Why the engine's gradients can be gathered by handle.</b> Autograd keeps a parameter's
 * {@code .grad} tensor once it exists and accumulates into it in place (first-order backward), and
 * the step zeroes it in place after gathering. A flattened view of each {@code .grad} is therefore
 * taken once, after the first backward that defines it, and every later gather is one {@code cat}
 * of those views per bucket.
 *
 * <p>Every call into the engine is counted in the step's {@link StepLedger}.
 *
 * <p>Why this file is long: gathering, combining, crossing to the arena and returning a bucket
 * share one state — the views of the engine's {@code .grad} tensors taken once, the per-bucket
 * device tensors and their arena offsets, the ledger — and each path (one replica or several, CPU
 * or GPU, with or without a ring, FP32 or BF16) is a few lines over that state.
 */
final class FlatGradients implements AutoCloseable {
  private final ReplicaSet replicas;
  private final GradientBuckets buckets;
  private final FlatState flat;
  private final StepLedger ledger;

  /** The ring or the host optimizer reads gradients from the arena. */
  final boolean viaArena;

  /** For the arena's wrapping tensors and the host optimizer's staging tensors. */
  private final NDManager host;

  /** [bucket, statistics last]: a CPU tensor over the arena's slice (no copy: it is the memory). */
  private final NDArray[] arena;

  /** [replica][trainable j]: a flattened view of the engine's {@code .grad}, once it exists. */
  private final PtNDArray[][] engineGrads;

  /** [bucket]: this step's gradient of the bucket on the first replica's device. */
  private final NDArray[] sum;

  /**
   * The first replica is on the CPU, whose memory the arena is: a single replica's gradients are
   * copied straight into the arena (one copy per tensor, no bucket tensor made and copied again),
   * and the optimizer reads the reduced bucket where the ring left it.
   */
  private final boolean arenaIsDeviceMemory;

  /**
   * [replica][trainable j]: 0 not checked yet, 1 the cached view aliases the engine's {@code .grad}
   * (checked once), -1 it does not (a gradient whose layout made the flattening a copy): that
   * parameter's gradient is fetched afresh every step.
   */
  private final byte[][] aliasing;

  /** [trainable j]: a direct view of replica 0's {@code .grad} memory once it aliases (CPU). */
  private final ByteBuffer[] gradMemory;

  /** [bucket]: this step's gradient is in the arena, not in {@link #sum}. */
  private final boolean[] inArena;

  /**
   * [replica]: scalars (the replicas' weights, the accumulation's scale) on that replica's device,
   * made by a fill: a scalar from a host number would make a GPU wait for its queued work.
   */
  private final DeviceScalars[] scalars;

  /**
   * [bucket]: replica 0's engine gradients of the bucket live in this flat tensor (each {@code
   * .grad} was pointed at its slice once, by {@link GradAlias}), so the bucket's gradient needs no
   * gathering and is zeroed with one call; null while the bucket is gathered by {@code cat}. Only
   * where one replica runs one micro-batch in float32 and the arena is not its memory (a GPU; the
   * CPU's device placement without a ring).
   */
  private final NDArray[] aliased;

  /**
   * [bucket]: aliasing did not hold (checked once), or a member still had no gradient after {@link
   * #ALIAS_TRIES} steps (a parameter the loss does not reach): gathered by {@code cat}.
   */
  private final boolean[] aliasFailed;

  /** [bucket]: steps on which aliasing found a member without a gradient. */
  private final int[] aliasTries;

  private static final int ALIAS_TRIES = 3;

  /** [bucket]: its aliased gradient holds a step's values; zeroed before the next backward. */
  private final boolean[] dirty;

  /** Points the engine's gradients at flat slices; loaded on first use. */
  private GradAlias gradAlias;

  /** Arrays made for this step only (moves to other replicas' devices), closed by endStep. */
  private final List<NDArray> temporaries = new ArrayList<>();

  /**
   * {@link Precision#BF16}: the bfloat16 parameters whose gradients autograd fills (their gradients
   * are gathered, cast into float32 buckets, and zeroed); null in float32.
   */
  private HalfParameters half;

  FlatGradients(
      ReplicaSet replicas,
      GradientBuckets buckets,
      FlatState flat,
      StepLedger ledger,
      boolean viaArena) {
    this.replicas = replicas;
    this.buckets = buckets;
    this.flat = flat;
    this.ledger = ledger;
    this.viaArena = viaArena;
    int k = replicas.devices().size();
    engineGrads = new PtNDArray[k][replicas.trainable.length];
    aliasing = new byte[k][replicas.trainable.length];
    sum = new NDArray[buckets.gradientBuckets()];
    inArena = new boolean[buckets.gradientBuckets()];
    aliased = new NDArray[buckets.gradientBuckets()];
    aliasFailed = new boolean[buckets.gradientBuckets()];
    aliasTries = new int[buckets.gradientBuckets()];
    dirty = new boolean[buckets.gradientBuckets()];
    arenaIsDeviceMemory = replicas.devices().get(0).equals(Device.cpu());
    gradMemory = new ByteBuffer[replicas.trainable.length];
    host = NDManager.newBaseManager(Device.cpu());
    arena = new NDArray[buckets.buckets()];
    scalars = new DeviceScalars[k];
    for (int d = 0; d < k; d++) {
      scalars[d] = new DeviceScalars(replicas.managers[d]);
    }
    try {
      for (int b = 0; b < arena.length; b++) {
        if (buckets.count[b] > 0) {
          arena[b] =
              host.create(
                  buckets.arena.slice(buckets.start[b] * 4, buckets.count[b] * 4),
                  new Shape(buckets.count[b]),
                  DataType.FLOAT32);
        }
      }
    } catch (RuntimeException | Error e) {
      host.close();
      throw e;
    }
  }

  /** Gathers the gradients of {@code half}'s bfloat16 parameters (before the first step). */
  void useHalf(HalfParameters half) {
    this.half = half;
  }

  /** The tensor whose {@code .grad} holds trainable {@code j}'s gradient on replica {@code d}. */
  private PtNDArray leaf(int d, int j) {
    return half != null
        ? half.leaves[d][j]
        : (PtNDArray) replicas.params[d][replicas.trainable[j]].getArray();
  }

  /** The manager of host (CPU) tensors, for tensors over direct buffers. */
  NDManager host() {
    return host;
  }

  /**
   * Gathers gradient bucket {@code b} of every replica that ran ({@code counts[d] > 0}) and zeroes
   * the engine's gradients. {@code raw} (one replica, one micro-batch): the bucket is the gathered
   * gradient as it is. Otherwise each replica's is weighted by {@code counts[d] / divisor} and
   * added to what earlier micro-batches left ({@code first}: nothing), in replica order, and the
   * sum is multiplied by {@code finalScale} (1 but after an accumulated step's last micro-batch):
   * the same operations, in the same order, as a per-parameter loop.
   */
  void gather(int b, int[] counts, float divisor, boolean first, boolean raw, float finalScale) {
    inArena[b] = false;
    if (raw && viaArena && arenaIsDeviceMemory && half == null) {
      copyIntoArena(b);
      inArena[b] = true;
      return;
    }
    if (raw && half == null && counts.length == 1 && inPlace(b)) {
      replace(b, null);
      sum[b] = aliased[b]; // the engine's gradients, where backward left them: no call at all
      dirty[b] = true;
      return;
    }
    boolean firstTerm = first;
    Device home = replicas.devices().get(0);
    for (int d = 0; d < counts.length; d++) {
      if (counts[d] == 0) {
        continue;
      }
      NDArray g = cat(d, b);
      zero(d, b);
      if (half != null && !half.promoted[b]) {
        // bfloat16 gradients into a float32 bucket: one cast per bucket
        NDArray g32 = HalfParameters.toFloat32(g, replicas.devices().get(d));
        g.close();
        g = g32;
        ledger.gradientCalls++;
        ledger.deviceAllocations++;
      }
      if (raw) {
        replace(b, g);
        return;
      }
      if (!g.getDevice().equals(home)) {
        NDArray moved = g.toDevice(home, false);
        g.close();
        g = moved;
        ledger.gradientCalls++;
        ledger.deviceAllocations++;
      }
      g.muli(scalar(0, counts[d] / divisor));
      ledger.gradientCalls++;
      if (firstTerm) {
        replace(b, g);
        firstTerm = false;
      } else {
        sum[b].addi(g);
        g.close();
        ledger.gradientCalls++;
      }
    }
    if (finalScale != 1f) {
      sum[b].muli(scalar(0, finalScale));
      ledger.gradientCalls++;
    }
  }

  /** One {@code cat} of replica {@code d}'s engine gradients of bucket {@code b}: a new tensor. */
  private NDArray cat(int d, int b) {
    int[] members = buckets.members[b];
    PtNDArray[] parts = new PtNDArray[members.length];
    List<NDArray> stand = null;
    for (int x = 0; x < members.length; x++) {
      int j = members[x];
      PtNDArray g = engineGrad(d, j);
      if (g == null) {
        // No gradient reached this parameter yet (unused so far): zeros for this step. Float32,
        // as every parameter is (a TorchScript module's array may be bfloat16 in a bf16 step).
        PtNDArray p = (PtNDArray) replicas.params[d][replicas.trainable[j]].getArray();
        g = (PtNDArray) p.getManager().zeros(new Shape(p.size()), DataType.FLOAT32, p.getDevice());
        ledger.gradientCalls++;
        ledger.deviceAllocations++;
        if (stand == null) {
          stand = new ArrayList<>();
        }
        stand.add(g);
      }
      parts[x] = g;
    }
    NDArray out = JniUtils.cat(parts, 0);
    ledger.gradientCalls++;
    ledger.deviceAllocations++;
    if (stand != null) {
      stand.forEach(NDArray::close);
    }
    return out;
  }

  /**
   * Copies replica 0's engine gradients of bucket {@code b} into their arena slices and zeroes them
   * (CPU: the engine's gradients are host memory). Once a gradient's view is known to alias its
   * {@code .grad}, both are plain memory copies from Java through a direct view of it: no engine
   * call per tensor.
   */
  private void copyIntoArena(int b) {
    for (int j : buckets.members[b]) {
      PtNDArray g = engineGrad(0, j);
      int at = 4 * buckets.offset[j];
      int bytes = 4 * replicas.sizes[replicas.trainable[j]];
      if (g == null) {
        fillZeros(buckets.arena, at, bytes); // no gradient reached it yet
        continue;
      }
      if (aliasing[0][j] == 1) {
        ByteBuffer memory = gradMemory[j];
        if (memory == null) {
          memory = g.toByteBuffer(true);
          ledger.gradientCalls++;
          gradMemory[j] = memory;
        }
        buckets.arena.put(at, memory, 0, bytes);
        fillZeros(memory, 0, bytes);
      } else {
        try (NDArray slice =
            FlatState.slice(arena[b], buckets.offset[j] - buckets.start[b], bytes / 4)) {
          FlatState.copy(slice, g);
        }
        PtNDArray p = (PtNDArray) replicas.params[0][replicas.trainable[j]].getArray();
        JniUtils.zeroGrad(p);
        ledger.gradientCalls += 3;
        if (aliasing[0][j] == 0 && engineGrads[0][j] != null) {
          checkAliasing(0, j, p);
        }
      }
    }
    ledger.bytesToHost += 4L * buckets.count[b];
  }

  /** Writes {@code bytes} zero bytes into {@code dst} from {@code at} (absolute; no position). */
  private static void fillZeros(ByteBuffer dst, int at, int bytes) {
    for (int done = 0; done < bytes; ) {
      int n = Math.min(ZEROS.capacity(), bytes - done);
      dst.put(at + done, ZEROS, 0, n);
      done += n;
    }
  }

  private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(1 << 20);

  /**
   * Replica {@code d}'s flattened view of the engine's gradient of trainable {@code j}, taken once;
   * null while the engine has none.
   */
  private PtNDArray engineGrad(int d, int j) {
    PtNDArray g = engineGrads[d][j];
    if (g == null) {
      PtNDArray grad = JniUtils.getGradient(leaf(d, j));
      ledger.gradientCalls++;
      if (grad != null) {
        g = JniUtils.reshape(grad, new long[] {-1});
        grad.close();
        ledger.gradientCalls++;
        if (aliasing[d][j] < 0) {
          temporaries.add(g); // a copy of this step's gradient, freed with the step
        } else {
          engineGrads[d][j] = g;
        }
      }
    }
    return g;
  }

  /** Zeroes replica {@code d}'s engine gradients of bucket {@code b}, in place. */
  private void zero(int d, int b) {
    for (int j : buckets.members[b]) {
      PtNDArray p = leaf(d, j);
      JniUtils.zeroGrad(p);
      if (aliasing[d][j] == 0 && engineGrads[d][j] != null) {
        checkAliasing(d, j, p);
      }
    }
    ledger.gradientCalls += buckets.members[b].length;
  }

  /**
   * Once per parameter, with its gradient just zeroed: a one written through the cached view must
   * show in the engine's {@code .grad}. If it does not, the view is a copy and would freeze the
   * gradient at its first value; the parameter's gradient is then fetched every step instead.
   */
  private void checkAliasing(int d, int j, PtNDArray p) {
    PtNDArray view = engineGrads[d][j];
    view.addi(scalar(d, 1f));
    float least;
    try (PtNDArray grad = JniUtils.getGradient(p);
        NDArray min = grad.min()) {
      if (half == null) {
        least = min.getFloat();
      } else {
        try (NDArray f = HalfParameters.toFloat32(min, min.getDevice())) {
          least = f.getFloat(); // a bfloat16 scalar (the cast is not counted: once per tensor)
        }
      }
    }
    JniUtils.zeroGrad(p);
    ledger.gradientCalls += 5;
    if (least == 1f) {
      aliasing[d][j] = 1;
    } else {
      aliasing[d][j] = -1;
      engineGrads[d][j] = null;
      view.close();
    }
  }

  private void replace(int b, NDArray g) {
    if (sum[b] != null && sum[b] != aliased[b]) {
      sum[b].close();
    }
    sum[b] = g;
  }

  /**
   * Before a step's first backward: zeroes the aliased buckets that hold the last step's gradients
   * (one call each; autograd adds into them in place).
   */
  void beginStep() {
    for (int b = 0; b < aliased.length; b++) {
      if (dirty[b]) {
        FlatState.copy(aliased[b], scalar(0, 0f)); // a fill: the engine's gradients are its slices
        ledger.gradientCalls++;
        dirty[b] = false;
      }
    }
  }

  /**
   * Whether bucket {@code b}'s gradients are (now) replica 0's flat slices. The first time every
   * member has a gradient, they are pointed at a new flat tensor with their current values (one
   * call) and checked once: a one added through the flat tensor must show in each {@code .grad}.
   */
  private boolean inPlace(int b) {
    if (aliased[b] != null) {
      return true;
    }
    if (aliasFailed[b] || (viaArena && arenaIsDeviceMemory)) {
      return false;
    }
    int[] members = buckets.members[b];
    PtNDArray[] grads = new PtNDArray[members.length];
    try {
      for (int x = 0; x < members.length; x++) {
        grads[x] = JniUtils.getGradient(leaf(0, members[x]));
        ledger.gradientCalls++;
        if (grads[x] == null) {
          // a parameter no gradient reached yet: gathered this step, tried again a few times
          aliasFailed[b] = ++aliasTries[b] >= ALIAS_TRIES;
          return false;
        }
      }
      if (gradAlias == null) {
        gradAlias = GradAlias.load((ai.djl.pytorch.engine.PtNDManager) replicas.managers[0]);
      }
      NDArray flatGrad =
          replicas.managers[0].create(
              new Shape(buckets.count[b]), DataType.FLOAT32, replicas.devices().get(0));
      ledger.gradientCalls += 2;
      ledger.deviceAllocations++;
      gradAlias.alias(grads, flatGrad);
      if (!GradAlias.holds(flatGrad, grads, this::scalarOne)) {
        aliasFailed[b] = true;
        flatGrad.close();
        return false;
      }
      for (int j : members) {
        if (engineGrads[0][j] != null) {
          engineGrads[0][j].close(); // the cat's views: not needed any more
          engineGrads[0][j] = null;
        }
      }
      aliased[b] = flatGrad;
      return true;
    } finally {
      for (PtNDArray g : grads) {
        if (g != null) {
          g.close();
        }
      }
    }
  }

  private NDArray scalarOne() {
    return scalar(0, 1f);
  }

  /** Copies bucket {@code b}'s gradient into its arena slice: the one crossing to the host. */
  void toArena(int b) {
    if (inArena[b]) {
      return; // gathered there
    }
    FlatState.copy(arena[b], sum[b]);
    ledger.gradientCalls++;
    ledger.bytesToHost += 4L * buckets.count[b];
  }

  /**
   * Bucket {@code b}'s gradient for replica {@code d}'s optimizer: the reduced one from the arena
   * (one copy back into the bucket's device tensor) when it went through the arena, else the
   * gathered one; moved to replica {@code d}'s device when that is another.
   */
  NDArray reduced(int b, int d, boolean fromArena) {
    if (fromArena && arenaIsDeviceMemory) {
      return arena[b]; // the CPU reads the reduced bucket in place
    }
    if (d == 0) {
      if (fromArena) {
        FlatState.copy(sum[b], arena[b]);
        ledger.gradientCalls++;
        ledger.bytesToDevice += 4L * buckets.count[b];
      }
      return sum[b];
    }
    Device device = replicas.devices().get(d);
    if (device.equals(replicas.devices().get(0))) {
      return sum[b];
    }
    NDArray moved = sum[b].toDevice(device, false);
    ledger.gradientCalls++;
    ledger.deviceAllocations++;
    temporaries.add(moved);
    return moved;
  }

  /**
   * After the last micro-batch: the statistics averaged over the replicas that ran, into the arena
   * when they go through it ({@code viaArena}), else straight into every replica's statistics.
   */
  void gatherStats(int[] counts, int active) {
    NDArray[] stats = flat.stats;
    if (stats[0] == null) {
      return;
    }
    Device home = replicas.devices().get(0);
    NDArray avg = null;
    boolean owned = false;
    if (active == 1) {
      avg = stats[0];
    } else {
      float w = 1f / active;
      for (int d = 0; d < counts.length; d++) {
        if (counts[d] == 0) {
          continue;
        }
        NDArray s = stats[d];
        NDArray term;
        if (!s.getDevice().equals(home)) {
          try (NDArray moved = s.toDevice(home, false)) {
            term = moved.mul(scalar(0, w));
          }
          ledger.otherCalls += 2;
          ledger.deviceAllocations += 2;
        } else {
          term = s.mul(scalar(0, w));
          ledger.otherCalls++;
          ledger.deviceAllocations++;
        }
        if (avg == null) {
          avg = term;
          owned = true;
        } else {
          avg.addi(term);
          term.close();
          ledger.otherCalls++;
        }
      }
    }
    try {
      if (viaArena) {
        int sb = buckets.statsBucket();
        FlatState.copy(arena[sb], avg);
        ledger.otherCalls++;
        ledger.bytesToHost += 4L * buckets.count[sb];
      } else {
        for (NDArray s : stats) {
          if (s != avg) {
            FlatState.copy(s, avg);
            ledger.otherCalls++;
          }
        }
      }
    } finally {
      if (owned) {
        avg.close();
      }
    }
  }

  /** Copies the reduced statistics from the arena into every replica's statistics. */
  void statsFromArena() {
    int sb = buckets.statsBucket();
    if (flat.stats[0] == null) {
      return;
    }
    for (NDArray s : flat.stats) {
      FlatState.copy(s, arena[sb]);
      ledger.otherCalls++;
      ledger.bytesToDevice += 4L * buckets.count[sb];
    }
  }

  /** Frees what this step made for other devices. */
  void endStep() {
    temporaries.forEach(NDArray::close);
    temporaries.clear();
    for (DeviceScalars x : scalars) {
      x.endStep();
    }
  }

  /** {@code v} on replica {@code d}'s device; a fill when new (counted in the ledger). */
  private NDArray scalar(int d, float v) {
    long made = scalars[d].made();
    NDArray a = scalars[d].of(v);
    if (scalars[d].made() != made) {
      ledger.otherCalls++;
      ledger.deviceAllocations++;
    }
    return a;
  }

  /**
   * The last step's final gradient of every bucket, in arena order (tests): the arena's when it
   * went through the arena, else the device buckets'.
   */
  float[] values() {
    int n = buckets.start[buckets.statsBucket()];
    float[] out = new float[n];
    if (viaArena) {
      buckets.floats.get(0, out);
      return out;
    }
    for (int b = 0; b < sum.length; b++) {
      if (sum[b] != null) {
        float[] v = sum[b].toFloatArray();
        System.arraycopy(v, 0, out, buckets.start[b], v.length);
      }
    }
    return out;
  }

  @Override
  public void close() {
    // The engine's gradients outlive this step (they are the parameters'): leave them zero, as the
    // step without aliasing does after every bucket, so that a later step over the same replicas
    // does not add its first gradient to this one's last.
    try {
      beginStep();
    } catch (RuntimeException e) {
      // closing after a failure (a device error, say): the failure is what matters
    }
    endStep();
    for (NDArray[] row : engineGrads) {
      for (NDArray a : row) {
        if (a != null) {
          a.close();
        }
      }
    }
    for (int b = 0; b < sum.length; b++) {
      if (sum[b] != null && sum[b] != aliased[b]) {
        sum[b].close();
      }
    }
    for (NDArray a : aliased) {
      if (a != null) {
        a.close();
      }
    }
    if (gradAlias != null) {
      gradAlias.close();
    }
    for (DeviceScalars x : scalars) {
      x.close();
    }
    host.close();
  }
}
