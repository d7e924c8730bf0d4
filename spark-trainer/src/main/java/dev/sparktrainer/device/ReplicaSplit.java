package dev.sparktrainer.device;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import java.util.List;

/**
 * A worker's batch split across its local replicas, one per device (MirroredStrategy inside a
 * machine): consecutive slices along axis 0, as even as the rows allow, each moved to its device.
 */
public final class ReplicaSplit {
  private ReplicaSplit() {}

  /**
   * The rows of each of {@code replicas} slices of a batch of {@code rows}: {@code rows /
   * replicas}, the first {@code rows % replicas} one more.
   */
  public static int[] counts(int rows, int replicas) {
    int[] counts = new int[replicas];
    for (int d = 0; d < replicas; d++) {
      counts[d] = rows / replicas + (d < rows % replicas ? 1 : 0);
    }
    return counts;
  }

  /**
   * Splits {@code batch} along axis 0 into slices of {@code counts} rows, slice {@code d} moved to
   * {@code devices.get(d)}: its features into {@code xs[d]}, its labels into {@code ys[d]}. With
   * one slice the batch's own tensors, moved (a no-op when already there).
   */
  public static void split(
      Batch batch, List<Device> devices, int[] counts, NDList[] xs, NDArray[] ys) {
    int k = counts.length;
    if (k == 1) {
      xs[0] = batch.features().toDevice(devices.get(0), false);
      ys[0] = batch.labels().toDevice(devices.get(0), false);
      return;
    }
    long[] bounds = new long[k - 1];
    long at = 0;
    for (int d = 0; d < k - 1; d++) {
      at += counts[d];
      bounds[d] = at;
    }
    NDList[] featureParts = new NDList[batch.features().size()];
    for (int f = 0; f < featureParts.length; f++) {
      featureParts[f] = batch.features().get(f).split(bounds, 0);
    }
    NDList labelParts = batch.labels().split(bounds, 0);
    for (int d = 0; d < k; d++) {
      NDList x = new NDList(featureParts.length);
      for (NDList part : featureParts) {
        x.add(part.get(d).toDevice(devices.get(d), false));
      }
      xs[d] = x;
      ys[d] = labelParts.get(d).toDevice(devices.get(d), false);
    }
  }
}
