package dev.sparktrainer.data;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * A batch filled one row at a time, in pooled full-size column buffers: rows decoded straight into
 * it ({@link #columns()} at row {@link #size()}, then {@link #commit}), rows copied from decoded
 * records, or rows moved over from another builder (the last partial batches of parallel readers).
 * Not thread-safe.
 */
final class BatchBuilder {
  private final PipelineContext ctx;
  private final int capacity;
  private final int[] widths;
  private final boolean intLabels;
  private ByteBuffer[] columns;
  private ByteBuffer labels;
  private final double[] labelValues;
  private final long[] drawValues;
  private final float[][] spent;
  private int spentCount;
  private int size;

  BatchBuilder(PipelineContext ctx) {
    this.ctx = ctx;
    DatasetSpec spec = ctx.spec();
    this.capacity = ctx.options().batchSize();
    this.widths = new int[spec.features().size()];
    this.columns = new ByteBuffer[widths.length];
    for (int c = 0; c < widths.length; c++) {
      widths[c] = spec.features().get(c).size();
      columns[c] = ctx.columnPool(c).take();
    }
    this.intLabels = spec.labelType() == DatasetSpec.LabelType.INT;
    this.labels = ctx.labelPool().take();
    this.labelValues = new double[capacity];
    this.drawValues = new long[capacity];
    this.spent = new float[capacity][];
  }

  int size() {
    return size;
  }

  boolean full() {
    return size == capacity;
  }

  /** The column buffers (native order) to decode row {@link #size()} into. */
  ByteBuffer[] columns() {
    return columns;
  }

  /** Ends row {@link #size()}, whose features were written into {@link #columns()}. */
  void commit(double label) {
    drawValues[size] = 0;
    labelValues[size] = label;
    if (intLabels) {
      labels.putLong(size * 8, (long) label);
    } else {
      labels.putFloat(size * 4, (float) label);
    }
    size++;
  }

  /** Adds a decoded record; its array goes back to the record pool with the batch. */
  void add(Record r) {
    int off = 0;
    for (int c = 0; c < widths.length; c++) {
      columns[c].asFloatBuffer().put(size * widths[c], r.features, off, widths[c]);
      off += widths[c];
    }
    spent[spentCount++] = r.features;
    commit(r.label);
    drawValues[size - 1] = r.draws;
  }

  /** Moves as many of {@code other}'s last rows as fit here; returns how many moved. */
  int takeRowsFrom(BatchBuilder other) {
    int n = Math.min(capacity - size, other.size);
    int from = other.size - n;
    for (int c = 0; c < widths.length; c++) {
      int w = 4 * widths[c];
      columns[c].put(size * w, other.columns[c], from * w, n * w);
    }
    for (int i = 0; i < n; i++) {
      commit(other.labelValues[from + i]);
      drawValues[size - 1] = other.drawValues[from + i];
    }
    other.size -= n;
    return n;
  }

  /**
   * The batch. A full one keeps the pooled buffers (they go back to the pool when the batch is
   * recycled); a partial one (the epoch's last) is copied into buffers of its exact size.
   */
  HostBatch build() {
    giveSpent();
    if (size == capacity) {
      HostBatch b = new HostBatch(columns, labelValues, labels, size, drawValues.clone());
      columns = null;
      labels = null;
      return b;
    }
    ByteBuffer[] exact = new ByteBuffer[widths.length];
    for (int c = 0; c < widths.length; c++) {
      int bytes = 4 * widths[c] * size;
      exact[c] = ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
      exact[c].put(0, columns[c], 0, bytes);
    }
    int labelBytes = (intLabels ? 8 : 4) * size;
    ByteBuffer exactLabels = ByteBuffer.allocateDirect(labelBytes).order(ByteOrder.nativeOrder());
    exactLabels.put(0, labels, 0, labelBytes);
    HostBatch b =
        new HostBatch(
            exact,
            Arrays.copyOf(labelValues, size),
            exactLabels,
            size,
            Arrays.copyOf(drawValues, size));
    release();
    return b;
  }

  /** Gives the buffers back without making a batch. */
  void release() {
    giveSpent();
    if (columns != null) {
      for (int c = 0; c < columns.length; c++) {
        ctx.columnPool(c).give(columns[c]);
      }
      ctx.labelPool().give(labels);
      columns = null;
      labels = null;
    }
    size = 0;
  }

  private void giveSpent() {
    ctx.recordPool().giveAll(spent, spentCount);
    Arrays.fill(spent, 0, spentCount, null);
    spentCount = 0;
  }
}
