package dev.sparktrainer.data;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * A batch ready for the device: one direct buffer per feature column and one of labels (INT64 or
 * FLOAT32 by the spec's label type), all in native order so DJL wraps them without a copy on CPU.
 * Full batches' buffers come from, and go back to, pools.
 */
final class HostBatch {
  final ByteBuffer[] features;
  final double[] labels;
  /** The labels as the label tensor's bytes: int64 for INT labels, float32 for FLOAT ones. */
  final ByteBuffer labelBuffer;
  final int size;

  HostBatch(ByteBuffer[] features, double[] labels, ByteBuffer labelBuffer, int size) {
    this.features = features;
    this.labels = labels;
    this.labelBuffer = labelBuffer;
    this.size = size;
  }

  /** Column {@code c} as floats. */
  FloatBuffer floats(int c) {
    return features[c].duplicate().order(ByteOrder.nativeOrder()).asFloatBuffer();
  }

  /** Value {@code i} of column {@code c}. */
  float feature(int c, int i) {
    return features[c].getFloat(i * 4);
  }

  /** Copies {@code n} records into a batch and hands their arrays back to the record pool. */
  static HostBatch of(Record[] records, int n, PipelineContext ctx) {
    DatasetSpec spec = ctx.spec();
    int cols = spec.features().size();
    ByteBuffer[] f = new ByteBuffer[cols];
    int off = 0;
    boolean full = n == ctx.options().batchSize();
    for (int c = 0; c < cols; c++) {
      int size = spec.features().get(c).size();
      ByteBuffer col = full ? ctx.columnPool(c).take()
          : ByteBuffer.allocateDirect(n * size * 4).order(ByteOrder.nativeOrder());
      FloatBuffer fb = col.asFloatBuffer();
      for (int i = 0; i < n; i++) {
        fb.put(records[i].features, off, size);
      }
      f[c] = col;
      off += size;
    }
    double[] labels = new double[n];
    boolean intLabels = spec.labelType() == DatasetSpec.LabelType.INT;
    ByteBuffer lb = full ? ctx.labelPool().take()
        : ByteBuffer.allocateDirect(n * (intLabels ? 8 : 4)).order(ByteOrder.nativeOrder());
    float[][] spent = new float[n][];
    for (int i = 0; i < n; i++) {
      double label = records[i].label;
      labels[i] = label;
      if (intLabels) {
        lb.putLong(i * 8, (long) label);
      } else {
        lb.putFloat(i * 4, (float) label);
      }
      spent[i] = records[i].features;
    }
    ctx.recordPool().giveAll(spent, n);
    return new HostBatch(f, labels, lb, n);
  }
}
