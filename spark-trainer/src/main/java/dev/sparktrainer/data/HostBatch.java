package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.Arrays;
import java.util.List;

/**
 * A batch ready for the device: one direct buffer per feature column and one of labels (INT64 or
 * FLOAT32 by the spec's label type), all in native order so DJL wraps them without a copy on CPU.
 * Full batches' buffers come from, and go back to, pools: a batch from {@link InputPipeline#epoch}
 * is the consumer's until it calls {@link #release()} (the device package's {@code BatchUpload}
 * does when the device batch made from it is closed).
 */
public final class HostBatch {
  final ByteBuffer[] features;
  final double[] labels;

  /** The labels as the label tensor's bytes: int64 for INT labels, float32 for FLOAT ones. */
  final ByteBuffer labelBuffer;

  final int size;

  /** Each row's draws for the device's augmentation ({@link Record#draws}). */
  final long[] draws;

  /** Per column: a sequence's padded length T in this batch; 0 for a fixed shape. */
  final int[] lengths;

  /** Per column: a sequence's mask ({@code [size, T]} float32, 1 for real positions); else null. */
  final ByteBuffer[] masks;

  /** Sequences longer than their column's maximum, cut to it in this batch. */
  final int truncated;

  /** Where {@link #release()} gives the buffers back; null once released (or for none). */
  private PipelineContext pool;

  HostBatch(ByteBuffer[] features, double[] labels, ByteBuffer labelBuffer, int size) {
    this(features, labels, labelBuffer, size, new long[size]);
  }

  HostBatch(
      ByteBuffer[] features, double[] labels, ByteBuffer labelBuffer, int size, long[] draws) {
    this(features, labels, labelBuffer, size, draws, new int[features.length], null, 0);
  }

  HostBatch(
      ByteBuffer[] features,
      double[] labels,
      ByteBuffer labelBuffer,
      int size,
      long[] draws,
      int[] lengths,
      ByteBuffer[] masks,
      int truncated) {
    this.features = features;
    this.labels = labels;
    this.labelBuffer = labelBuffer;
    this.size = size;
    this.draws = draws;
    this.lengths = lengths;
    this.masks = masks == null ? new ByteBuffer[features.length] : masks;
    this.truncated = truncated;
  }

  /** Number of examples (rows). */
  public int size() {
    return size;
  }

  /** Number of feature columns (the spec's). */
  public int columns() {
    return features.length;
  }

  /**
   * Column {@code c}: {@code size() x} the column's values, float32 in native order, in a direct
   * buffer (position 0, limit its bytes). For an image column held as bytes ({@link
   * DatasetSpec.Feature#bytes()}) each row is its {@code values()} bytes (HWC, 0..255) padded with
   * zeros to {@code 4 x size()}.
   */
  public ByteBuffer column(int c) {
    return features[c];
  }

  /** Column {@code c} as floats (a view: writes go to the batch). */
  public FloatBuffer floats(int c) {
    return features[c].duplicate().order(ByteOrder.nativeOrder()).asFloatBuffer();
  }

  /**
   * Column {@code c}'s padded length T in this batch when it is a sequence (its tensor is {@code
   * [size(), T]}, its {@link #column} holds exactly that, its {@link #mask} beside it); 0 for a
   * fixed shape.
   */
  public int paddedLength(int c) {
    return lengths[c];
  }

  /**
   * A sequence column's mask: {@code [size(), T]} float32 in native order, 1 where the position
   * holds a value, 0 where it is padding; null for a fixed shape.
   */
  public ByteBuffer mask(int c) {
    return masks[c];
  }

  /** Sequences in this batch that were longer than their column's maximum length and cut to it. */
  public int truncated() {
    return truncated;
  }

  /** The labels as the label tensor's bytes: int64 for INT labels, float32 for FLOAT ones. */
  public ByteBuffer labelBytes() {
    return labelBuffer;
  }

  /**
   * Each row's random choices for the device's augmentation (the word {@link Example#setDraws}
   * recorded; 0 where none). Read-only.
   */
  public long[] draws() {
    return draws;
  }

  /**
   * Gives the batch's buffers back to the pipeline's pools, once nothing refers to them any more
   * (on CPU a tensor made from a column wraps its memory). Later calls do nothing.
   */
  public void release() {
    PipelineContext p = pool;
    pool = null;
    if (p != null) {
      p.recycle(this);
    }
  }

  /** The pools {@link #release()} gives this batch's buffers back to. */
  void pool(PipelineContext p) {
    this.pool = p;
  }

  /** Value {@code i} of column {@code c}. */
  float feature(int c, int i) {
    return features[c].getFloat(i * 4);
  }

  /**
   * Makes a batch of {@code n} records: decoded ones are copied, and their arrays handed back to
   * the record pool; records not decoded yet are decoded straight into the batch, and their read
   * buffers released. A record that does not decode fails the batch, naming its file and offset.
   */
  static HostBatch of(Record[] records, int n, PipelineContext ctx) throws IOException {
    DatasetSpec spec = ctx.spec();
    if (spec.hasSequences()) {
      return padded(records, n, ctx);
    }
    int cols = spec.features().size();
    ByteBuffer[] f = new ByteBuffer[cols];
    boolean full = n == ctx.options().batchSize();
    FloatBuffer[] views = new FloatBuffer[cols];
    for (int c = 0; c < cols; c++) {
      int size = spec.features().get(c).size();
      f[c] =
          full
              ? ctx.columnPool(c).take()
              : ByteBuffer.allocateDirect(n * size * 4).order(ByteOrder.nativeOrder());
    }
    double[] labels = new double[n];
    long[] draws = new long[n];
    boolean intLabels = spec.labelType() == DatasetSpec.LabelType.INT;
    ByteBuffer lb =
        full
            ? ctx.labelPool().take()
            : ByteBuffer.allocateDirect(n * (intLabels ? 8 : 4)).order(ByteOrder.nativeOrder());
    float[][] spent = new float[n][];
    int decoded = 0;
    RecordDecoder decoder = null;
    ReadBuffers.Tally tally = null;
    for (int i = 0; i < n; i++) {
      Record r = records[i];
      double label;
      if (r.raw == null) {
        int off = 0;
        for (int c = 0; c < cols; c++) {
          int size = spec.features().get(c).size();
          if (views[c] == null) {
            views[c] = f[c].asFloatBuffer();
          }
          views[c].put(i * size, r.features, off, size);
          off += size;
        }
        label = r.label;
        draws[i] = r.draws;
        spent[decoded++] = r.features;
      } else {
        if (decoder == null) {
          decoder = ctx.decoder();
        }
        try {
          label = decoder.decodeInto(r.raw.buf, r.rawOffset, r.rawLength, f, i);
        } catch (MalformedRecordException | IOException e) {
          throw new TFRecordCorruptException(r.raw.file, r.fileOffset, e.getMessage(), e);
        }
        if (tally == null) {
          tally = new ReadBuffers.Tally();
        }
        tally.add(r.raw);
      }
      labels[i] = label;
      if (intLabels) {
        lb.putLong(i * 8, (long) label);
      } else {
        lb.putFloat(i * 4, (float) label);
      }
    }
    if (tally != null) {
      tally.release();
    }
    ctx.recordPool().giveAll(spent, decoded);
    return new HostBatch(f, labels, lb, n, draws);
  }

  /**
   * A batch of decoded records whose sequence columns are padded to the batch's own longest
   * sequence (at least 1) with the options' pad value, each with its mask (tf.data's {@code
   * padded_batch}); fixed columns are copied as they are.
   */
  static HostBatch padded(Record[] records, int n, PipelineContext ctx) {
    DatasetSpec spec = ctx.spec();
    List<DatasetSpec.Feature> fs = spec.features();
    int cols = fs.size();
    boolean full = n == ctx.options().batchSize();
    ByteBuffer[] f = new ByteBuffer[cols];
    ByteBuffer[] masks = new ByteBuffer[cols];
    int[] lengths = new int[cols];
    int[] offsets = new int[cols];
    int truncated = 0;
    for (int c = 0, off = 0; c < cols; c++) {
      offsets[c] = off;
      DatasetSpec.Feature feature = fs.get(c);
      off += feature.size();
      int bytes;
      if (feature.sequence()) {
        int t = 1;
        for (int i = 0; i < n; i++) {
          int len = Slots.getInt(records[i].features, offsets[c]);
          if (len > feature.maxLength()) {
            truncated++;
          }
          t = Math.max(t, Math.min(len, feature.maxLength()));
        }
        lengths[c] = t;
        bytes = n * t * (feature.type() == DatasetSpec.ValueType.INT64 ? 8 : 4);
        masks[c] =
            full
                ? ctx.maskPool(c).take()
                : ByteBuffer.allocateDirect(n * t * 4).order(ByteOrder.nativeOrder());
        masks[c].limit(n * t * 4);
      } else {
        bytes = 4 * n * feature.size();
      }
      f[c] =
          full
              ? ctx.columnPool(c).take()
              : ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
      f[c].limit(bytes);
    }
    double pad = ctx.options().padValue();
    double[] labels = new double[n];
    long[] draws = new long[n];
    boolean intLabels = spec.labelType() == DatasetSpec.LabelType.INT;
    ByteBuffer lb =
        full
            ? ctx.labelPool().take()
            : ByteBuffer.allocateDirect(n * (intLabels ? 8 : 4)).order(ByteOrder.nativeOrder());
    float[][] spent = new float[n][];
    // Bulk copies only: a row's values, then its padding and mask from these rows of constants.
    int longest = 1;
    for (int t : lengths) {
      longest = Math.max(longest, t);
    }
    float[] ones = new float[longest];
    Arrays.fill(ones, 1f);
    float[] zeros = new float[longest];
    long[] longPad = new long[longest];
    Arrays.fill(longPad, (long) pad);
    float[] floatPad = new float[longest];
    Arrays.fill(floatPad, (float) pad);
    FloatBuffer[] floatViews = new FloatBuffer[cols];
    FloatBuffer[] maskViews = new FloatBuffer[cols];
    LongBuffer[] longViews = new LongBuffer[cols];
    for (int c = 0; c < cols; c++) {
      floatViews[c] = f[c].asFloatBuffer();
      if (masks[c] != null) {
        maskViews[c] = masks[c].asFloatBuffer();
        longViews[c] = f[c].asLongBuffer();
      }
    }
    for (int i = 0; i < n; i++) {
      float[] v = records[i].features;
      for (int c = 0; c < cols; c++) {
        DatasetSpec.Feature feature = fs.get(c);
        if (!feature.sequence()) {
          int w = feature.size();
          floatViews[c].put(i * w, v, offsets[c], w); // int64 slots are the longs' bytes
          continue;
        }
        int t = lengths[c];
        int m = Math.min(Slots.getInt(v, offsets[c]), feature.maxLength());
        maskViews[c].put(i * t, ones, 0, m).put(i * t + m, zeros, 0, t - m);
        if (feature.type() == DatasetSpec.ValueType.INT64) {
          Slots.copyLongs(v, offsets[c] + 1, m, f[c], 8 * i * t);
          longViews[c].put(i * t + m, longPad, 0, t - m);
        } else {
          floatViews[c].put(i * t, v, offsets[c] + 1, m).put(i * t + m, floatPad, 0, t - m);
        }
      }
      labels[i] = records[i].label;
      draws[i] = records[i].draws;
      if (intLabels) {
        lb.putLong(i * 8, (long) records[i].label);
      } else {
        lb.putFloat(i * 4, (float) records[i].label);
      }
      spent[i] = v;
    }
    ctx.recordPool().giveAll(spent, n);
    return new HostBatch(f, labels, lb, n, draws, lengths, masks, truncated);
  }

  /** Gives back what {@code n} records hold without making a batch of them (skipped steps). */
  static void discard(Record[] records, int n, PipelineContext ctx) {
    float[][] spent = new float[n][];
    int decoded = 0;
    ReadBuffers.Tally tally = null;
    for (int i = 0; i < n; i++) {
      if (records[i].raw == null) {
        spent[decoded++] = records[i].features;
      } else {
        if (tally == null) {
          tally = new ReadBuffers.Tally();
        }
        tally.add(records[i].raw);
      }
    }
    if (tally != null) {
      tally.release();
    }
    ctx.recordPool().giveAll(spent, decoded);
  }
}
