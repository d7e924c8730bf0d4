package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.GradientCollector;
import ai.djl.training.loss.Loss;
import dev.sparktrainer.collective.CommOptions;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.ReplicaSplit;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.optim.Optimizer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Arrays;

/**
 * One synchronous training step of a worker: forward on every local replica, backward segment by
 * segment (last first), each bucket gathered into a flat device tensor as soon as its segment's
 * backward is done ({@link FlatGradients}: one engine call per bucket), copied once into the
 * all-reduce arena and handed to the {@link BucketReducer} while backward goes on, then each
 * reduced bucket applied by the {@link ParameterUpdater} to the flat parameters ({@link FlatState})
 * as it comes back, and the averaged statistics written into every replica. With one worker and the
 * device optimizer nothing leaves the device. What the step pays a device for is counted in its
 * {@link StepLedger}.
 *
 * <p>Without overlap (or for a single worker) backward runs whole and the buckets are reduced one
 * after the other on the training thread: the step as it was before overlap, for comparison.
 *
 * <p>Its times are read as a {@link StepTimings} snapshot ({@link #timings}): compute (forward,
 * backward and the gradient copies), backward alone, exposed communication (the training thread
 * waiting for the ring), communication (time the all-reduces ran, hidden or not) and optimizer.
 *
 * <p>Why this file is long: it is the step's sequence — forward, backward segment by segment with
 * each finished bucket handed on, the wait for the reduced buckets, the update — and the parts are
 * already in their own classes ({@link FlatState}, {@link FlatGradients}, {@link BucketReducer},
 * the updaters, {@link HalfParameters}); what is left is their order and the timing around it, plus
 * the small public surface the loop uses (timings, parameter values and optimizer slots for
 * checkpoints and resume).
 */
public final class TrainStep implements AutoCloseable {
  private final ReplicaSet replicas;
  private final LossSpec lossSpec;
  private final Loss loss;
  private final Communicator comm;
  private final ModelSegments[] segments;

  /** Trainable indices j in the order their gradients become final (last segment first). */
  private final int[] readyOrder;

  /** Per segment (descending capture): how many entries of readyOrder it finalizes. */
  private final int[] readyPerSegment;

  final GradientBuckets buckets;
  private final FlatState flat;
  private final FlatGradients grads;

  /** {@link Precision#BF16}: the bfloat16 parameters forward and backward run on; else null. */
  private final HalfParameters half;

  /** More than one worker: buckets are all-reduced through the arena. */
  private final boolean ring;

  private final BucketReducer reducer;
  final ParameterUpdater updater;
  private final ByteBuffer mainView;

  /** For each bucket, the readyOrder position after which it is complete. */
  private final int[] completeAfter;

  /** What the step pays a device for (engine calls, crossings, allocations). */
  final StepLedger ledger = new StepLedger();

  private long computeNanos;
  private long backwardNanos;
  private long exposedNanos;
  private long communicationNanos;
  private long optimizerNanos;

  /**
   * The step of a training run: its own options (bucket size, overlap) and the ring's collective
   * timeout; backward is cut into segments only where overlap can use them (more than one worker).
   *
   * @param comm the ring (size 1: no communication)
   * @param options how gradients travel (the step waits on the ring with its operation timeout)
   * @param stepOptions the bucket size and whether all-reduces overlap backward
   * @param precision see {@link #TrainStep(ReplicaSet, LossSpec, Communicator, Optimizer,
   *     OptimizerPlacement, int, int, boolean, boolean, Duration, Precision)}
   */
  public TrainStep(
      ReplicaSet replicas,
      LossSpec lossSpec,
      Communicator comm,
      Optimizer optimizer,
      OptimizerPlacement placement,
      int hostThreads,
      CommOptions options,
      StepOptions stepOptions,
      Precision precision) {
    this(
        replicas,
        lossSpec,
        comm,
        optimizer,
        placement,
        hostThreads,
        stepOptions.bucketBytes(),
        stepOptions.overlap(),
        stepOptions.overlap() && comm != null && comm.size() > 1,
        options.operationTimeout(),
        precision);
  }

  /**
   * @param comm the ring (size 1: no communication)
   * @param overlap reduce buckets on a communication thread while backward goes on
   * @param segmented cut backward into segments (only useful with overlap and more than one worker)
   */
  TrainStep(
      ReplicaSet replicas,
      LossSpec lossSpec,
      Communicator comm,
      Optimizer optimizer,
      OptimizerPlacement placement,
      int hostThreads,
      int bucketBytes,
      boolean overlap,
      boolean segmented,
      Duration operationTimeout) {
    this(
        replicas,
        lossSpec,
        comm,
        optimizer,
        placement,
        hostThreads,
        bucketBytes,
        overlap,
        segmented,
        operationTimeout,
        Precision.FP32);
  }

  /**
   * @param precision {@link Precision#BF16}: forward and backward on a bfloat16 copy of the
   *     parameters ({@link HalfParameters}); the optimizer, its state and the master weights stay
   *     float32
   */
  TrainStep(
      ReplicaSet replicas,
      LossSpec lossSpec,
      Communicator comm,
      Optimizer optimizer,
      OptimizerPlacement placement,
      int hostThreads,
      int bucketBytes,
      boolean overlap,
      boolean segmented,
      Duration operationTimeout,
      Precision precision) {
    this.replicas = replicas;
    this.lossSpec = lossSpec;
    this.loss = lossSpec.newLoss();
    this.comm = comm;
    int k = replicas.devices().size();
    int[] sizes = replicas.trainableSizes();
    int[] statSizes = new int[replicas.stats.length];
    for (int j = 0; j < statSizes.length; j++) {
      statSizes[j] = replicas.sizes[replicas.stats[j]];
    }
    Layout layout = Layout.of(replicas, segmented, sizes, statSizes, bucketBytes);
    // One gradient bucket (an MLP's 0.94 MB in a 25 MiB bucket): its gradients are complete only
    // when backward ends, so nothing can overlap its all-reduce. Segments would only add their
    // cost to backward, and the communication thread a hand-off each way (measured on the MLP, 2
    // workers: 10 % slower than without): backward runs whole and the training thread reduces.
    boolean overlapUseful = layout.buckets.gradientBuckets() > 1;
    if (segmented && !overlapUseful) {
      layout = Layout.of(replicas, false, sizes, statSizes, bucketBytes);
    }
    segments = layout.segments;
    readyOrder = layout.readyOrder;
    readyPerSegment = layout.readyPerSegment;
    buckets = layout.buckets;
    completeAfter = new int[buckets.gradientBuckets()];
    for (int b = 0, pos = 0; b < completeAfter.length; b++) {
      pos += buckets.members[b].length;
      completeAfter[b] = pos;
    }
    ring = comm != null && comm.size() > 1;
    mainView = buckets.arena.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    // What is started here is closed again if a later part fails (a device out of memory in the
    // updater, say): a retried stage must not leak a thread or a model-sized arena per attempt.
    FlatState f = null;
    FlatGradients g = null;
    HalfParameters h = null;
    BucketReducer r = null;
    try {
      f = new FlatState(replicas, buckets);
      g =
          new FlatGradients(
              replicas, buckets, f, ledger, ring || placement == OptimizerPlacement.HOST);
      if (precision == Precision.BF16) {
        h = new HalfParameters(replicas, buckets, f, ledger);
        g.useHalf(h);
      }
      r =
          ring && overlap && overlapUseful
              ? new BucketReducer(comm, buckets, operationTimeout)
              : null;
      updater =
          ParameterUpdater.create(
              placement, replicas, buckets, f, g, optimizer, ledger, hostThreads);
    } catch (RuntimeException | Error e) {
      closeQuietly(r, e);
      closeQuietly(h, e);
      closeQuietly(g, e);
      closeQuietly(f, e);
      throw e;
    }
    flat = f;
    grads = g;
    half = h;
    reducer = r;
  }

  private static void closeQuietly(AutoCloseable c, Throwable failure) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (Exception | Error e) {
      failure.addSuppressed(e);
    }
  }

  /** The step's ledger: engine calls, host/device bytes and device allocations so far. */
  public StepLedger ledger() {
    return ledger;
  }

  /**
   * The model cut into backward segments (or whole), the order backward makes the trainable
   * parameters' gradients ready, how many each segment finalizes, and the buckets cut from that
   * order.
   */
  private record Layout(
      ModelSegments[] segments, int[] readyOrder, int[] readyPerSegment, GradientBuckets buckets) {
    static Layout of(
        ReplicaSet replicas, boolean segmented, int[] sizes, int[] statSizes, int bucketBytes) {
      int k = replicas.devices().size();
      ModelSegments[] segments = new ModelSegments[k];
      for (int d = 0; d < k; d++) {
        segments[d] = ModelSegments.of(replicas.blocks[d], replicas.params[d], segmented);
      }
      int[] trainableOf = new int[replicas.names.length];
      Arrays.fill(trainableOf, -1);
      for (int j = 0; j < replicas.trainable.length; j++) {
        trainableOf[replicas.trainable[j]] = j;
      }
      ModelSegments seg = segments[0];
      int[] readyOrder = new int[replicas.trainable.length];
      int[] readyPerSegment = new int[seg.count()];
      int n = 0;
      for (int s = seg.count() - 1; s >= 0; s--) {
        int[] ids = seg.parameters[s];
        for (int x = ids.length - 1; x >= 0; x--) {
          int j = trainableOf[ids[x]];
          if (j >= 0) {
            readyOrder[n++] = j;
            readyPerSegment[s]++;
          }
        }
      }
      return new Layout(
          segments,
          readyOrder,
          readyPerSegment,
          new GradientBuckets(readyOrder, sizes, statSizes, bucketBytes));
    }
  }

  /** Number of backward segments (1: backward runs whole). */
  public int segmentCount() {
    return segments[0].count();
  }

  /** Number of gradient buckets (one all-reduce each). */
  public int gradientBuckets() {
    return buckets.gradientBuckets();
  }

  /** Where this step's time went so far. */
  public StepTimings timings() {
    return new StepTimings(
        computeNanos, backwardNanos, exposedNanos, communicationNanos, optimizerNanos);
  }

  /** Copies of the current parameter values, in the replica set's order. */
  public float[][] parameterValues() {
    return updater.values();
  }

  /** Copies of the optimizer's state: slot, then trainable parameter. */
  public float[][][] optimizerSlots() {
    float[][][] slots = new float[updater.optimizer.slotCount()][replicas.trainable.length][];
    for (int s = 0; s < slots.length; s++) {
      for (int j = 0; j < slots[s].length; j++) {
        slots[s][j] = updater.slot(s, j);
      }
    }
    return slots;
  }

  /** Optimizer steps taken (the schedule's position). */
  public long optimizerSteps() {
    return updater.optimizer.steps();
  }

  /**
   * Sets every replica's parameters and the optimizer's state (a resume, or the start's broadcast).
   *
   * @param slots slot, then trainable parameter; as {@link #optimizerSlots} gives them
   */
  public void restore(float[][] values, float[][][] slots, long optimizerSteps) {
    updater.restore(values, slots, optimizerSteps);
    if (half != null) {
      half.frozenChanged(); // their bfloat16 copies are made once, from these values
    }
  }

  /**
   * One step over {@code batch} at learning rate {@code lr}; adds (loss x samples, correct,
   * samples) to {@code acc}.
   */
  public void run(Batch batch, int rngSeed, float lr, double[] acc) {
    accumulate(batch, rngSeed, acc, 0, 1);
    update(lr);
  }

  /** Samples of the micro-batches accumulated so far in this optimizer step. */
  private long accumulated;

  /** The reducer's submission count and busy time when this step's all-reduces began. */
  private long base;

  private long busyAtStart;

  /**
   * Forward and backward of micro-batch {@code micro} (0-based) of {@code of} that make one
   * optimizer step (gradient accumulation): their gradients are summed in the arena, weighted by
   * their samples, so that after the last one the arena holds the gradient of the mean loss over
   * all their samples, as one batch of all of them would. Only the last micro-batch's gradients are
   * handed to the all-reduce (overlapping its backward), and only after it are the batch-norm
   * running statistics (which every forward updated) taken. Call {@link #update} after the last
   * one.
   */
  public void accumulate(Batch batch, int rngSeed, double[] acc, int micro, int of) {
    boolean last = micro == of - 1;
    if (micro == 0) {
      accumulated = 0;
    }
    int k = segments.length;
    int total = batch.size();
    accumulated += total;
    // Weights: a single micro-batch as always (each replica's share of the batch); with several,
    // each replica's sample count, and the sum divided once by all samples after the last one.
    float divisor = of == 1 ? total : 1f;
    float finalScale = of == 1 || !last ? 1f : 1f / Math.max(1, accumulated);
    int[] counts = ReplicaSplit.counts(total, k);
    int active = 0;
    for (int d = 0; d < k; d++) {
      active += counts[d] > 0 ? 1 : 0;
    }
    NDList[] xs = new NDList[k];
    NDArray[] ys = new NDArray[k];
    countBatch(batch);
    ReplicaSplit.split(batch, replicas.devices(), counts, xs, ys);
    if (last) {
      base = reducer == null ? 0 : reducer.submitted();
      busyAtStart = reducer == null ? 0 : reducer.busyNanos();
    }
    boolean raw = k == 1 && of == 1;
    int segs = segments[0].count();
    long t0 = System.nanoTime();
    long tBackward;
    ReplicaSet.JVM_LOCK.lock();
    NDManager[] scopes = new NDManager[k];
    try {
      if (micro == 0) {
        grads.beginStep(); // zeroes the buckets whose gradients backward adds into in place
      }
      if (half != null && micro == 0) {
        half.refresh(); // the bfloat16 copy from the master the last update (or a resume) wrote
      }
      replicas.managers[0].getEngine().setRandomSeed(rngSeed);
      try (GradientCollector gc = replicas.managers[0].getEngine().newGradientCollector()) {
        NDList[][] inputs = new NDList[k][segs];
        NDList[][] outputs = new NDList[k][segs];
        NDArray[] losses = new NDArray[k];
        for (int d = 0; d < k; d++) {
          if (counts[d] == 0) {
            continue;
          }
          scopes[d] = replicas.managers[d].newSubManager();
          xs[d].attach(scopes[d]);
          ys[d].attach(scopes[d]);
          NDArray pred;
          if (half == null) {
            pred = segments[d].forward(replicas.stores[d], xs[d], inputs[d], outputs[d]).head();
          } else {
            // bfloat16 from the model's entry to its output, the loss in float32
            NDList x = half.inputs(xs[d], scopes[d]);
            NDArray out = segments[d].forward(half.stores[d], x, inputs[d], outputs[d]).head();
            pred = half.output(out);
          }
          losses[d] = lossSpec.evaluate(loss, ys[d], pred);
          acc[0] += losses[d].getFloat() * (double) counts[d];
          acc[1] += lossSpec.correct(ys[d], pred);
          ReplicaSet.addRegressionSums(lossSpec, ys[d], pred, acc);
          acc[2] += counts[d];
        }
        tBackward = System.nanoTime();
        int captured = 0;
        int nextBucket = 0;
        for (int s = segs - 1; s >= 0; s--) {
          for (int d = 0; d < k; d++) {
            if (counts[d] == 0) {
              continue;
            }
            if (s == segs - 1) {
              gc.backward(losses[d]);
            } else {
              backwardThrough(gc, outputs[d][s], inputs[d][s + 1]);
            }
          }
          captured += readyPerSegment[s];
          while (nextBucket < completeAfter.length && completeAfter[nextBucket] <= captured) {
            grads.gather(nextBucket, counts, divisor, micro == 0, raw, finalScale);
            if (last && grads.viaArena) {
              grads.toArena(nextBucket);
              if (reducer != null) {
                reducer.submit(nextBucket);
              }
            }
            nextBucket++;
          }
        }
        if (last) {
          grads.gatherStats(counts, active);
          if (reducer != null && buckets.count[buckets.statsBucket()] > 0) {
            reducer.submit(buckets.statsBucket());
          }
        }
      }
    } finally {
      for (NDManager s : scopes) {
        if (s != null) {
          s.close();
        }
      }
      ReplicaSet.JVM_LOCK.unlock();
    }
    long t1 = System.nanoTime();
    computeNanos += t1 - t0;
    backwardNanos += t1 - tBackward;
  }

  /**
   * Ends the optimizer step begun by {@link #accumulate}: all-reduces what the reducer has not (or
   * everything, without overlap), and applies each bucket's update at learning rate {@code lr}.
   */
  public void update(float lr) {
    long t1 = System.nanoTime();
    long reducedHere = 0;
    if (reducer == null && comm != null && comm.size() > 1) {
      for (int b = 0; b < buckets.buckets(); b++) {
        reducedHere += reduceHere(b);
      }
    }
    updater.beginStep();
    long waited = 0;
    // In-place updates of the parameters' flat tensors run with gradient recording off. PyTorch's
    // grad mode is per thread and on by default in a new thread (a Spark task's, a pool's).
    boolean recording = JniUtils.isGradMode();
    JniUtils.setGradMode(false);
    ledger.otherCalls += 3;
    try {
      for (int b = 0; b < buckets.gradientBuckets(); b++) {
        if (reducer != null) {
          long w = System.nanoTime();
          reducer.await(base + b + 1);
          waited += System.nanoTime() - w;
        }
        updater.apply(b, ring, lr);
      }
      if (reducer != null && buckets.count[buckets.statsBucket()] > 0) {
        long w = System.nanoTime();
        reducer.await(base + buckets.gradientBuckets() + 1);
        waited += System.nanoTime() - w;
      }
      updater.finishStep();
    } finally {
      JniUtils.setGradMode(recording);
      grads.endStep();
    }
    ledger.steps++;
    long t2 = System.nanoTime();
    if (reducer != null) {
      // Every bucket of the step is reduced: the reducer's busy time since the step began is this
      // step's.
      communicationNanos += reducer.busyNanos() - busyAtStart;
    }
    exposedNanos += waited + reducedHere;
    communicationNanos += reducedHere;
    optimizerNanos += t2 - t1 - waited - reducedHere;
  }

  /** All-reduces bucket {@code b} on the training thread (no overlap); returns the time it took. */
  private long reduceHere(int b) {
    if (buckets.count[b] == 0) {
      return 0;
    }
    long t = System.nanoTime();
    BucketReducer.reduce(comm, buckets, mainView, b);
    return System.nanoTime() - t;
  }

  /**
   * The batch's share of the ledger: a batch made from heap arrays, and the bytes of a batch that
   * is not on the replicas' device yet ({@link ReplicaSplit} moves it there).
   */
  private void countBatch(Batch batch) {
    if (!batch.direct()) {
      ledger.heapUploads++;
    }
    // A batch made on the replicas' device from host bytes: those bytes crossed (image columns
    // that travel as uint8 count one byte per pixel).
    if (batch.uploadBytes() >= 0 && batch.labels().getDevice().equals(replicas.devices().get(0))) {
      ledger.bytesToDevice += batch.uploadBytes();
    }
    for (NDArray a : batch.features()) {
      if (!a.getDevice().equals(replicas.devices().get(0))) {
        ledger.bytesToDevice += a.size() * a.getDataType().getNumOfBytes();
      }
    }
    NDArray y = batch.labels();
    if (!y.getDevice().equals(replicas.devices().get(0))) {
      ledger.bytesToDevice += y.size() * y.getDataType().getNumOfBytes();
    }
  }

  /** Backward through one segment from its output, given the next segment's input gradients. */
  private static void backwardThrough(GradientCollector gc, NDList out, NDList nextIn) {
    if (out.size() == 1
        && out.head() instanceof PtNDArray o
        && nextIn.head() instanceof PtNDArray in
        && HalfParameters.isFloating(in)) {
      try (NDArray g = in.getGradient()) {
        JniUtils.backward(o, (PtNDArray) g, false, false);
      }
      return;
    }
    // Several tensors between segments (or another engine): backward of sum(out_i * grad_i) over
    // the floating-point ones (an integer tensor carries no gradient).
    NDArray sum = null;
    for (int i = 0; i < out.size(); i++) {
      if (!HalfParameters.isFloating(nextIn.get(i))) {
        continue;
      }
      NDArray term = out.get(i).mul(nextIn.get(i).getGradient()).sum();
      sum = sum == null ? term : sum.add(term);
    }
    if (sum == null) {
      return;
    }
    if (sum.getDataType() == DataType.UNKNOWN && sum instanceof PtNDArray) {
      // bfloat16 (a sequence model's activations, mask and attention bias in a bf16 step): the
      // collector's backward seeds it with onesLike, which names a type DJL's JNI cannot (the JVM
      // ends). The seed is made from the sum itself instead, as [1]: to the power of a float32
      // 0-dim zero (made on the device, no host scalar) it is ones and stays bfloat16.
      try (NDArray root = sum.reshape(1);
          NDArray detached = root.stopGradient();
          NDArray zero = root.getManager().zeros(new Shape());
          NDArray one = detached.pow(zero)) {
        JniUtils.backward((PtNDArray) root, (PtNDArray) one, false, false);
      }
      return;
    }
    gc.backward(sum);
  }

  /** The last step's final gradients, in arena order (for tests). */
  float[] gradients() {
    return grads.values();
  }

  @Override
  public void close() {
    try {
      if (reducer != null) {
        reducer.close();
      }
    } finally {
      try {
        updater.close();
      } finally {
        try {
          grads.close();
        } finally {
          try {
            if (half != null) {
              half.close();
            }
          } finally {
            flat.close();
          }
        }
      }
    }
  }
}
