package dev.sparktrainer.device;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;

/**
 * One batch for one worker: the feature tensors (one per feature column, each {@code [size,
 * ...shape]}, float32) and the label tensor ({@code [size]}, int64 for class labels or float32 for
 * regression targets), attached to their own {@link NDManager} on the worker's device. The consumer
 * closes the batch when the step is done, which frees its native memory.
 */
public final class Batch implements AutoCloseable {
  private final NDManager manager;
  private final NDList features;
  private final NDArray labels;
  private final int size;
  private final Runnable onClose;
  private final boolean direct;
  private final long uploadBytes;

  /** A batch whose tensors may have been made from Java heap arrays. */
  public Batch(NDManager manager, NDList features, NDArray labels, int size) {
    this(manager, features, labels, size, null, false);
  }

  /** A batch that runs {@code onClose} after its manager is closed (to recycle buffers). */
  public Batch(NDManager manager, NDList features, NDArray labels, int size, Runnable onClose) {
    this(manager, features, labels, size, onClose, false);
  }

  /**
   * @param direct the tensors were made from direct (off-heap) memory: on a GPU one copy each, at
   *     the full rate, rather than a staging copy from the heap first
   */
  public Batch(
      NDManager manager,
      NDList features,
      NDArray labels,
      int size,
      Runnable onClose,
      boolean direct) {
    this(manager, features, labels, size, onClose, direct, -1);
  }

  /**
   * @param uploadBytes the host bytes the tensors were made from on their device (what crossed to a
   *     GPU: one byte per pixel for images that travel as uint8), or -1 if not known
   */
  public Batch(
      NDManager manager,
      NDList features,
      NDArray labels,
      int size,
      Runnable onClose,
      boolean direct,
      long uploadBytes) {
    this.uploadBytes = uploadBytes;
    this.manager = manager;
    this.features = features;
    this.labels = labels;
    this.size = size;
    this.onClose = onClose;
    this.direct = direct;
  }

  /** Whether the tensors were made from direct memory (the step's ledger counts the others). */
  public boolean direct() {
    return direct;
  }

  /**
   * The host bytes this batch's tensors were made from on their device (features and labels; an
   * image column that travels as uint8 counts one byte per pixel), or -1 if not known.
   */
  public long uploadBytes() {
    return uploadBytes;
  }

  /** The feature tensors, in the order of the spec's feature columns. */
  public NDList features() {
    return features;
  }

  /** The labels. */
  public NDArray labels() {
    return labels;
  }

  /** Number of examples (the leading dimension). */
  public int size() {
    return size;
  }

  /** The manager owning this batch's arrays. */
  public NDManager manager() {
    return manager;
  }

  @Override
  public void close() {
    manager.close();
    if (onClose != null) {
      onClose.run();
    }
  }
}
