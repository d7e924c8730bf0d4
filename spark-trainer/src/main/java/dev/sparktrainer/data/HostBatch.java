package dev.sparktrainer.data;

/** A batch still on the Java heap: one float array per feature column, and the labels. */
final class HostBatch {
  final float[][] features;
  final double[] labels;
  final int size;

  HostBatch(float[][] features, double[] labels, int size) {
    this.features = features;
    this.labels = labels;
    this.size = size;
  }

  static HostBatch of(Record[] records, int n, DatasetSpec spec) {
    int cols = spec.features().size();
    float[][] f = new float[cols][];
    int off = 0;
    for (int c = 0; c < cols; c++) {
      int size = spec.features().get(c).size();
      float[] col = new float[n * size];
      for (int i = 0; i < n; i++) {
        System.arraycopy(records[i].features, off, col, i * size, size);
      }
      f[c] = col;
      off += size;
    }
    double[] labels = new double[n];
    for (int i = 0; i < n; i++) {
      labels[i] = records[i].label;
    }
    return new HostBatch(f, labels, n);
  }
}
