package dev.sparktrainer.device;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.HostBatch;
import dev.sparktrainer.data.Normalization;
import java.nio.ByteBuffer;

/**
 * A host batch made a {@link Batch} of tensors on a worker's device: each feature column from its
 * direct buffer (normalized in place first when a {@link Normalization} is given), an image column
 * that travels as uint8 packed to one byte per pixel and made float32 there ({@link DeviceImages}),
 * the labels as int64 or float32. On CPU the tensors wrap the host batch's memory, so the host
 * batch is released (its buffers back to the pipeline's pools) when the device batch is closed.
 */
final class BatchUpload {
  private final DatasetSpec spec;
  private final NDManager manager;

  /** Applied to every host batch before it goes to the device; null for none. */
  private final Normalization normalization;

  /** How image columns cross to the device (uint8, converted there; or float32 as decoded). */
  private final DeviceImages images;

  /**
   * @throws IllegalArgumentException if {@code normalization} was fitted on another number of
   *     feature values than the spec has
   */
  BatchUpload(
      DatasetSpec spec, Normalization normalization, DeviceImages images, NDManager manager) {
    if (normalization != null && !spec.fixedFloatOnly()) {
      throw new IllegalArgumentException(
          "Normalization applies to float32 features of a fixed shape; the data has "
              + spec.features()
              + " (leave the int64 and sequence columns out of it)");
    }
    if (normalization != null && normalization.size() != spec.featureSize()) {
      throw new IllegalArgumentException(
          "The normalization was fitted on "
              + normalization.size()
              + " feature values per example, the data has "
              + spec.featureSize()
              + " ("
              + spec.features()
              + ")");
    }
    this.spec = spec;
    this.normalization = normalization;
    this.images = images;
    this.manager = manager;
  }

  /** How this upload's image columns cross to the device. */
  DeviceImages images() {
    return images;
  }

  /**
   * The device batch of {@code hb}, on a sub-manager of the worker's manager; closing it releases
   * {@code hb}. On failure {@code hb} is left to the caller.
   */
  Batch upload(HostBatch hb) {
    NDManager m = manager.newSubManager();
    try {
      NDList features = new NDList();
      int first = 0;
      long upload = 0;
      int size = hb.size();
      for (int c = 0; c < hb.columns(); c++) {
        int width = spec.features().get(c).size();
        if (images.uint8(c)) { // one byte per pixel crosses; float32 made on the device
          // The host batch holds the bytes (TFRecord data), or floats k / 255f packed here.
          boolean own = images.hostBytes();
          ByteBuffer bytes =
              own ? images.bytes(c, hb.column(c), size) : images.pack(c, hb.floats(c), size);
          try {
            features.add(images.upload(m, c, bytes, size, hb.draws()));
          } finally {
            if (!own || images.pooledBytes(c)) {
              images.give(c, bytes);
            }
          }
          upload += (long) size * width;
          first += width;
          continue;
        }
        DatasetSpec.Feature feature = spec.features().get(c);
        DataType type =
            feature.type() == DatasetSpec.ValueType.INT64 ? DataType.INT64 : DataType.FLOAT32;
        if (feature.sequence()) { // [size, T] padded to the batch's longest, and its mask
          Shape padded = new Shape(size, hb.paddedLength(c));
          features.add(m.create(hb.column(c), padded, type));
          features.add(m.create(hb.mask(c), padded, DataType.FLOAT32));
          upload += hb.column(c).limit() + hb.mask(c).limit();
          continue;
        }
        upload += 4L * size * width;
        if (normalization != null) { // in place: the buffer is the batch's own until it is released
          normalization.apply(hb.floats(c), size, width, first);
        }
        first += width;
        long[] shape = spec.features().get(c).shape();
        long[] full = new long[shape.length + 1];
        full[0] = size;
        System.arraycopy(shape, 0, full, 1, shape.length);
        features.add(m.create(hb.column(c), new Shape(full), type));
      }
      NDArray labels =
          m.create(
              hb.labelBytes(),
              new Shape(size),
              spec.labelType() == DatasetSpec.LabelType.INT ? DataType.INT64 : DataType.FLOAT32);
      upload += (long) size * labels.getDataType().getNumOfBytes();
      // On CPU the arrays wrap the batch's direct buffers: they go back to the pool on close.
      return new Batch(m, features, labels, size, hb::release, true, upload);
    } catch (RuntimeException e) {
      m.close();
      throw e;
    }
  }
}
