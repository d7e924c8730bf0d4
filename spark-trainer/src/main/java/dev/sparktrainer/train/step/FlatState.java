package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.jni.JniUtils;
import dev.sparktrainer.model.torchscript.TorchScriptBlock;

/**
 * The replicas' parameters as a few flat device tensors: per replica, one tensor per gradient
 * bucket holding its parameters in the arena's order ({@link GradientBuckets}), and one holding the
 * non-trainable statistics. Every parameter of the blocks becomes a view into its flat tensor (the
 * {@code Parameter}'s array keeps its identity; its native tensor is swapped for the view), so an
 * optimizer that updates a flat tensor in place updates the blocks' parameters with no write-back,
 * and batch norm's running statistics land in the flat statistics tensor as forward computes them.
 *
 * <p>The flat tensors do not require gradients; the views do, and are leaves: autograd gives each
 * its own {@code .grad}, which {@link FlatGradients} gathers per bucket. Updates to the flat
 * tensors run with gradient recording off, between one backward and the next forward, so the views'
 * saved versions never change under autograd.
 */
final class FlatState implements AutoCloseable {
  /** [replica][gradient bucket]: that bucket's parameters, flat, on the replica's device. */
  final NDArray[][] values;

  /** [replica]: the statistics (batch-norm running mean and variance), flat; null without any. */
  final NDArray[] stats;

  /** Elements of each gradient bucket (the statistics: {@link #statCount}). */
  private final GradientBuckets buckets;

  FlatState(ReplicaSet replicas, GradientBuckets buckets) {
    this.buckets = buckets;
    int k = replicas.devices().size();
    int nb = buckets.gradientBuckets();
    values = new NDArray[k][nb];
    stats = new NDArray[k];
    boolean recording = JniUtils.isGradMode();
    JniUtils.setGradMode(false);
    try {
      for (int d = 0; d < k; d++) {
        for (int b = 0; b < nb; b++) {
          int[] members = buckets.members[b];
          int[] params = new int[members.length];
          int[] offsets = new int[members.length];
          for (int x = 0; x < members.length; x++) {
            params[x] = replicas.trainable[members[x]];
            offsets[x] = buckets.offset[members[x]] - buckets.start[b];
          }
          values[d][b] = flatten(replicas, d, params, offsets, buckets.count[b], true);
        }
        int statCount = buckets.count[buckets.statsBucket()];
        if (statCount > 0) {
          int[] params = replicas.stats.clone();
          int[] offsets = new int[params.length];
          int base = buckets.start[buckets.statsBucket()];
          for (int j = 0; j < params.length; j++) {
            offsets[j] = buckets.statOffset[j] - base;
          }
          stats[d] = flatten(replicas, d, params, offsets, statCount, false);
        }
      }
    } finally {
      JniUtils.setGradMode(recording);
    }
  }

  /**
   * A flat tensor of {@code count} elements on replica {@code d}'s device holding parameters {@code
   * params} at {@code offsets}; each parameter's array becomes a view into it, with its values.
   */
  private static NDArray flatten(
      ReplicaSet replicas, int d, int[] params, int[] offsets, int count, boolean trainable) {
    NDArray first = replicas.params[d][params[0]].getArray();
    NDArray flat =
        replicas.managers[d].zeros(new Shape(count), first.getDataType(), first.getDevice());
    if (replicas.blocks[d] instanceof TorchScriptBlock) {
      aliasModuleTensors(replicas, d, params, offsets, flat);
      return flat;
    }
    for (int x = 0; x < params.length; x++) {
      PtNDArray p = (PtNDArray) replicas.params[d][params[x]].getArray();
      int n = Math.toIntExact(p.size());
      PtNDArray slice = JniUtils.slice((PtNDArray) flat, 0, offsets[x], offsets[x] + n, 1);
      try (PtNDArray src = JniUtils.reshape(p, new long[] {-1})) {
        copy(slice, src);
      }
      PtNDArray view = JniUtils.reshape(slice, p.getShape().getShape());
      slice.close();
      // The parameter's NDArray (held by the block, the segments and the parameter store) now
      // refers to the view; the tensor it had is freed.
      p.intern(view);
      p.setRequiresGradient(trainable);
    }
    return flat;
  }

  /**
   * A TorchScript module computes with its own tensors: they are pointed at their slices of {@code
   * flat} (in offset order, which must leave no gap) by {@link ValueAlias}, and checked once to
   * read through it.
   */
  private static void aliasModuleTensors(
      ReplicaSet replicas, int d, int[] params, int[] offsets, NDArray flat) {
    Integer[] order = new Integer[params.length];
    for (int x = 0; x < order.length; x++) {
      order[x] = x;
    }
    java.util.Arrays.sort(order, java.util.Comparator.comparingInt(x -> offsets[x]));
    PtNDArray[] tensors = new PtNDArray[params.length];
    int at = 0;
    for (int x = 0; x < order.length; x++) {
      int i = params[order[x]];
      if (offsets[order[x]] != at) {
        throw new IllegalStateException(
            "Parameter " + replicas.names[i] + " is not where the flat layout expects it");
      }
      tensors[x] = (PtNDArray) replicas.params[d][i].getArray();
      at += replicas.sizes[i];
    }
    try (ValueAlias alias = ValueAlias.load((PtNDManager) replicas.managers[d])) {
      alias.alias(tensors, flat);
    }
    if (!ValueAlias.holds(flat, tensors, () -> flat.onesLike())) {
      throw new IllegalStateException(
          "The TorchScript module's tensors do not read through their flat tensor after"
              + " aliasing (replica "
              + d
              + ")");
    }
  }

  /**
   * {@code dst.copy_(src)} in one engine call, across devices too (a device-to-host or
   * host-to-device copy when one of them is on a GPU). Both 1-D with the same length.
   */
  static void copy(NDArray dst, NDArray src) {
    JniUtils.indexSet(
        (PtNDArray) dst, (PtNDArray) src, new long[] {0}, new long[] {dst.size()}, new long[] {1});
  }

  /** A view of elements {@code [from, from + n)} of flat tensor {@code flat} (one engine call). */
  static NDArray slice(NDArray flat, int from, int n) {
    return JniUtils.slice((PtNDArray) flat, 0, from, from + n, 1);
  }

  /** Elements of gradient bucket {@code b}. */
  int count(int b) {
    return buckets.count[b];
  }

  @Override
  public void close() {
    for (NDArray[] row : values) {
      for (NDArray a : row) {
        if (a != null) {
          a.close();
        }
      }
    }
    for (NDArray a : stats) {
      if (a != null) {
        a.close();
      }
    }
  }
}
