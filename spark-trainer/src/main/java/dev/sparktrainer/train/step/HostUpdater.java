package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.optim.Optimizer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@link OptimizerPlacement#HOST}: parameters and optimizer state in Java arrays; each reduced
 * bucket is applied by the optimizer's Java arithmetic, its elements spread over {@code threads}
 * threads (the task's CPUs), reading the gradients straight from the arena; the bucket's new values
 * are then staged in a direct buffer and written into every replica's flat bucket with one copy.
 */
final class HostUpdater extends ParameterUpdater {
  /** Below this many elements a bucket is updated on the calling thread (hand-off costs more). */
  private static final int PARALLEL_MIN = 1 << 16;

  private final float[][] values;
  private final int threads;
  private final ExecutorService pool;
  private final List<Callable<Void>> tasks = new ArrayList<>();

  /** [gradient bucket]: the new values in the bucket's layout, and a host tensor over them. */
  private final FloatBuffer[] staged;

  private final NDArray[] stagedTensors;

  /**
   * [replica][gradient bucket]: on a CPU replica, the flat bucket's own memory (a direct view of
   * the tensor's storage, which the flat tensor and the parameters' views keep alive): the new
   * values are written there by Java, with no engine call and no copy. Null rows for GPU replicas.
   */
  private final FloatBuffer[][] inPlace;

  HostUpdater(
      ReplicaSet replicas,
      GradientBuckets buckets,
      FlatState flat,
      FlatGradients grads,
      Optimizer optimizer,
      StepLedger ledger,
      int threads) {
    super(replicas, buckets, flat, grads, optimizer, ledger);
    this.values = replicas.readValues();
    int nb = buckets.gradientBuckets();
    inPlace = new FloatBuffer[flat.values.length][];
    boolean stage = false;
    for (int d = 0; d < flat.values.length; d++) {
      // Only on the CPU device itself is toByteBuffer(true) a view (elsewhere it is a copy).
      if (nb > 0 && flat.values[d][0].getDevice().equals(Device.cpu())) {
        inPlace[d] = new FloatBuffer[nb];
        for (int b = 0; b < nb; b++) {
          inPlace[d][b] =
              flat.values[d][b].toByteBuffer(true).order(ByteOrder.nativeOrder()).asFloatBuffer();
        }
      } else {
        stage = true;
      }
    }
    // Staging (a model-sized direct buffer) only for replicas on another device.
    staged = stage ? new FloatBuffer[nb] : null;
    stagedTensors = stage ? new NDArray[nb] : new NDArray[0];
    for (int b = 0; stage && b < nb; b++) {
      ByteBuffer direct =
          ByteBuffer.allocateDirect(4 * buckets.count[b]).order(ByteOrder.nativeOrder());
      staged[b] = direct.asFloatBuffer();
      stagedTensors[b] = grads.host().create(direct, new Shape(buckets.count[b]), DataType.FLOAT32);
    }
    this.threads = Math.max(1, threads);
    for (int s = 0; s < optimizer.slotCount(); s++) {
      for (int j = 0; j < replicas.trainable.length; j++) {
        optimizer.slot(s, j); // allocated here, not lazily by concurrent updates
      }
    }
    if (this.threads > 1) {
      AtomicInteger n = new AtomicInteger();
      pool =
          Executors.newFixedThreadPool(
              this.threads - 1,
              r -> {
                Thread t = new Thread(r, "host-optimizer-" + n.incrementAndGet());
                t.setDaemon(true);
                return t;
              });
    } else {
      pool = null;
    }
  }

  @Override
  void apply(int b, boolean reduced, float lr) {
    int[] members = buckets.members[b];
    int total = buckets.count[b];
    if (pool == null || total < PARALLEL_MIN) {
      for (int j : members) {
        int i = replicas.trainable[j];
        optimizer.apply(j, values[i], buckets.floats, buckets.offset[j], 0, values[i].length, lr);
      }
    } else {
      // threads contiguous element ranges of the bucket, each across whatever parameters it covers
      tasks.clear();
      for (int t = 0; t < threads; t++) {
        long from = (long) total * t / threads;
        long to = (long) total * (t + 1) / threads;
        tasks.add(
            () -> {
              applyRange(members, (int) from, (int) to, lr);
              return null;
            });
      }
      List<Future<Void>> futures = new ArrayList<>(threads - 1);
      for (int t = 1; t < threads; t++) {
        futures.add(pool.submit(tasks.get(t)));
      }
      Throwable failure = null;
      try {
        tasks.get(0).call();
      } catch (Exception | Error e) {
        failure = e;
      }
      for (Future<Void> f : futures) {
        try {
          f.get();
        } catch (ExecutionException e) {
          failure = failure == null ? e.getCause() : failure;
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          failure = failure == null ? e : failure;
        }
      }
      if (failure != null) {
        throw new IllegalStateException("Host optimizer update failed: " + failure, failure);
      }
    }
    writeBack(b);
  }

  /**
   * Bucket {@code b}'s new values into every replica: written straight into a CPU replica's flat
   * memory; for a GPU replica staged once in a direct buffer and copied with one engine call.
   */
  private void writeBack(int b) {
    boolean isStaged = false;
    for (int d = 0; d < flat.values.length; d++) {
      if (inPlace[d] != null) {
        put(inPlace[d][b], b);
        continue;
      }
      if (!isStaged) {
        put(staged[b], b);
        isStaged = true;
      }
      FlatState.copy(flat.values[d][b], stagedTensors[b]);
      ledger.writebackCalls++;
      ledger.bytesToDevice += 4L * buckets.count[b];
    }
  }

  /** Bucket {@code b}'s new values into {@code f}, laid out as the bucket. */
  private void put(FloatBuffer f, int b) {
    for (int j : buckets.members[b]) {
      int i = replicas.trainable[j];
      f.put(buckets.offset[j] - buckets.start[b], values[i]);
    }
  }

  /** Updates bucket elements [from, to) (counted from the bucket's start). */
  private void applyRange(int[] members, int from, int to, float lr) {
    int base = buckets.offset[members[0]];
    for (int j : members) {
      int i = replicas.trainable[j];
      int pStart = buckets.offset[j] - base;
      int pEnd = pStart + values[i].length;
      int a = Math.max(from, pStart);
      int e = Math.min(to, pEnd);
      if (a < e) {
        optimizer.apply(
            j,
            values[i],
            buckets.floats,
            buckets.offset[j] + (a - pStart),
            a - pStart,
            e - pStart,
            lr);
      }
    }
  }

  @Override
  void finishStep() {
    for (int j = 0; j < replicas.stats.length; j++) {
      int i = replicas.stats[j];
      buckets.floats.get(buckets.statOffset[j], values[i], 0, values[i].length);
    }
    grads.statsFromArena();
  }

  @Override
  float[][] values() {
    float[][] out = new float[values.length][];
    for (int i = 0; i < values.length; i++) {
      out[i] = values[i].clone();
    }
    return out;
  }

  @Override
  float[] slot(int s, int j) {
    return optimizer.slot(s, j).clone();
  }

  @Override
  void restore(float[][] restored, float[][][] slots, long steps) {
    for (int i = 0; i < values.length; i++) {
      System.arraycopy(restored[i], 0, values[i], 0, values[i].length);
      replicas.upload(i, values[i]);
    }
    for (int s = 0; s < optimizer.slotCount(); s++) {
      for (int j = 0; j < replicas.trainable.length; j++) {
        float[] dst = optimizer.slot(s, j);
        if (slots == null || slots[s][j] == null) {
          Arrays.fill(dst, 0f);
        } else {
          System.arraycopy(slots[s][j], 0, dst, 0, dst.length);
        }
      }
    }
    optimizer.setSteps(steps);
  }

  @Override
  public void close() {
    if (pool != null) {
      pool.shutdownNow();
    }
    for (NDArray t : stagedTensors) {
      if (t != null) {
        t.close();
      }
    }
  }
}
