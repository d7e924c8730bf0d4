package dev.sparktrainer.data;

import dev.sparktrainer.data.DatasetSpec.Encoding;
import dev.sparktrainer.tfrecord.example.ExampleScanner;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.FeatureLookup;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Decodes the spec's features and label out of one serialized {@code tf.train.Example}, either into
 * a record's float array or straight into row {@code r} of a batch's column buffers. TensorFlow's
 * own encoding of a float feature (one packed list) is a single bulk copy of its bytes; everything
 * else goes through {@link FeatureValues}. Not thread-safe: one per thread.
 */
final class RecordDecoder {
  private static final boolean LITTLE_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

  private final DatasetSpec spec;
  private final List<DatasetSpec.Feature> features;
  private final ExampleScanner scanner;
  private final FeatureValues values = new FeatureValues();
  private final boolean labelled;
  private final float[] scratch;
  private final Images images;

  RecordDecoder(DatasetSpec spec) {
    this(spec, null);
  }

  /** A decoder resizing images of another size than the declared one with {@code resize}. */
  RecordDecoder(DatasetSpec spec, ImageResize resize) {
    this.images = new Images(resize);
    this.spec = spec;
    this.features = spec.features();
    this.labelled = spec.label() != null;
    List<String> names = new ArrayList<>();
    int widest = 1;
    for (DatasetSpec.Feature f : features) {
      names.add(f.name());
      widest = Math.max(widest, f.size());
    }
    if (labelled) {
      names.add(spec.label());
    }
    this.scanner = new ExampleScanner(new FeatureLookup(names), null);
    this.scratch = new float[widest];
  }

  /** The resize of this decoder's images. */
  ImageResize imageResize() {
    return images.resize();
  }

  /** Counts this decoder's images and their decode time on {@code clock} (null: nowhere). */
  RecordDecoder clock(ImageClock clock) {
    images.clock = clock;
    return this;
  }

  /** Seeds the next record's random image box ({@link Images#seed}). */
  void seedImages(long seed) {
    images.seed(seed);
  }

  /**
   * Decodes the features into {@code out} (concatenated in column order); returns the label (0 if
   * none).
   */
  double decode(byte[] buf, int off, int len, float[] out) throws IOException {
    return decode(buf, off, len, out, null, 0);
  }

  /**
   * Decodes the features into row {@code row} of the batch's column buffers (native order, one per
   * feature column); returns the label (0 if none).
   */
  double decodeInto(byte[] buf, int off, int len, ByteBuffer[] columns, int row)
      throws IOException {
    return decode(buf, off, len, null, columns, row);
  }

  private double decode(byte[] buf, int off, int len, float[] out, ByteBuffer[] columns, int row)
      throws IOException {
    try {
      return decodeRecord(buf, off, len, out, columns, row);
    } finally {
      images.unseed();
    }
  }

  private double decodeRecord(
      byte[] buf, int off, int len, float[] out, ByteBuffer[] columns, int row) throws IOException {
    scanner.scanExample(buf, off, len);
    buf = scanner.buffer(); // the record, or the scanner's copy with merged values
    int pos = 0;
    for (int c = 0; c < features.size(); c++) {
      DatasetSpec.Feature f = features.get(c);
      int fo = scanner.featureOffset[c];
      int n = f.size();
      if (fo < 0 && f.sequence() && out != null) { // tf.io.VarLenFeature: missing is empty
        Slots.putInt(out, pos, 0);
        pos += n;
        continue;
      }
      if (fo < 0) {
        throw new MalformedRecordException("feature '" + f.name() + "' is missing");
      }
      if (!f.fixedFloat()) { // int64 ids, sequences: their slots (Slots)
        values.decode(buf, fo, scanner.featureLength[c]);
        if (out != null) {
          decodeSlots(f, out, pos);
        } else {
          decodeLongsInto(f, columns[c], row); // fixed int64: batches of sequences use records
        }
        pos += n;
        continue;
      }
      if (f.encoding() != Encoding.IMAGE) {
        int at = FeatureValues.packedFloatsAt(buf, fo, scanner.featureLength[c], n);
        if (at >= 0) { // TensorFlow's own encoding: one bulk copy
          if (out != null) {
            ByteBuffer.wrap(buf, at, 4 * n)
                .order(ByteOrder.LITTLE_ENDIAN)
                .asFloatBuffer()
                .get(out, pos, n);
          } else if (LITTLE_ENDIAN) {
            columns[c].put(4 * row * n, buf, at, 4 * n);
          } else {
            ByteBuffer.wrap(buf, at, 4 * n)
                .order(ByteOrder.LITTLE_ENDIAN)
                .asFloatBuffer()
                .get(scratch, 0, n);
            columns[c].asFloatBuffer().put(row * n, scratch, 0, n);
          }
          pos += n;
          continue;
        }
      }
      float[] dst = out != null ? out : scratch;
      int dpos = out != null ? pos : 0;
      values.decode(buf, fo, scanner.featureLength[c]);
      if (f.encoding() == Encoding.IMAGE) {
        if (values.kind() != FeatureKind.BYTES || values.count() != 1) {
          throw new MalformedRecordException(
              "feature '" + f.name() + "' must hold one encoded image");
        }
        long[] s = f.shape();
        if (f.bytes()) { // one byte per value, four to a slot: no float conversion
          try {
            if (out != null) {
              images.decodeImageBytes(
                  values.bytesBuffer(),
                  values.bytesOffset(0),
                  values.bytesLength(0),
                  (int) s[0],
                  (int) s[1],
                  (int) s[2],
                  out,
                  pos);
            } else {
              images.decodeImageBytesInto(
                  values.bytesBuffer(),
                  values.bytesOffset(0),
                  values.bytesLength(0),
                  (int) s[0],
                  (int) s[1],
                  (int) s[2],
                  columns[c],
                  4 * row * n);
            }
          } catch (IOException e) {
            throw new MalformedRecordException("feature '" + f.name() + "': " + e.getMessage());
          }
          pos += n;
          continue;
        }
        try {
          images.decodeImage(
              values.bytesBuffer(),
              values.bytesOffset(0),
              values.bytesLength(0),
              (int) s[0],
              (int) s[1],
              (int) s[2],
              dst,
              dpos);
        } catch (IOException e) {
          throw new MalformedRecordException("feature '" + f.name() + "': " + e.getMessage());
        }
      } else {
        if (values.count() != n) {
          throw new MalformedRecordException(
              "feature '"
                  + f.name()
                  + "' has "
                  + values.count()
                  + " values, expected "
                  + n
                  + " for shape "
                  + Arrays.toString(f.shape()));
        }
        if (values.kind() == FeatureKind.FLOAT) {
          System.arraycopy(values.floatArray(), 0, dst, dpos, n);
        } else if (values.kind() == FeatureKind.INT64) {
          for (int i = 0; i < n; i++) {
            dst[dpos + i] = values.longAt(i);
          }
        } else {
          throw new MalformedRecordException(
              "feature '" + f.name() + "' holds bytes, expected numbers");
        }
      }
      if (out == null) {
        columns[c].asFloatBuffer().put(row * n, scratch, 0, n);
      }
      pos += n;
    }
    if (!labelled) {
      return 0;
    }
    return label(buf);
  }

  private double label(byte[] buf) throws MalformedRecordException {
    int lo = scanner.featureOffset[features.size()];
    if (lo < 0) {
      throw new MalformedRecordException("label '" + spec.label() + "' is missing");
    }
    values.decode(buf, lo, scanner.featureLength[features.size()]);
    if (values.count() != 1) {
      throw new MalformedRecordException(
          "label '" + spec.label() + "' has " + values.count() + " values, expected 1");
    }
    if (values.kind() == FeatureKind.INT64) {
      return values.longAt(0);
    } else if (values.kind() == FeatureKind.FLOAT) {
      return values.floatAt(0);
    }
    throw new MalformedRecordException(
        "label '" + spec.label() + "' holds bytes, expected a number");
  }

  /**
   * Writes a non-float column's slots from {@link #values}: a sequence's length (the record's own,
   * which may exceed the maximum: the batch counts what it cut) then at most {@code maxLength}
   * values; a fixed int64 shape's values.
   */
  private void decodeSlots(DatasetSpec.Feature f, float[] out, int pos)
      throws MalformedRecordException {
    int count = values.count();
    boolean ids = f.type() == DatasetSpec.ValueType.INT64;
    if (count > 0) {
      checkKind(f);
    }
    int n;
    if (f.sequence()) {
      Slots.putInt(out, pos++, count);
      n = Math.min(count, f.maxLength());
    } else {
      n = f.values();
      if (count != n) {
        throw new MalformedRecordException(
            "feature '"
                + f.name()
                + "' has "
                + count
                + " values, expected "
                + n
                + " for shape "
                + Arrays.toString(f.shape()));
      }
    }
    if (ids) {
      for (int i = 0; i < n; i++) {
        long v = values.longAt(i);
        checkId(f, i, v);
        Slots.putLong(out, pos + 2 * i, v);
      }
    } else if (n > 0) {
      System.arraycopy(values.floatArray(), 0, out, pos, n);
    }
  }

  /** A fixed int64 shape's values straight into row {@code row} of its batch column. */
  private void decodeLongsInto(DatasetSpec.Feature f, ByteBuffer column, int row)
      throws MalformedRecordException {
    int n = f.values();
    if (values.count() != n) {
      throw new MalformedRecordException(
          "feature '"
              + f.name()
              + "' has "
              + values.count()
              + " values, expected "
              + n
              + " for shape "
              + Arrays.toString(f.shape()));
    }
    checkKind(f);
    for (int i = 0; i < n; i++) {
      long v = values.longAt(i);
      checkId(f, i, v);
      column.putLong(8 * (row * n + i), v);
    }
  }

  private void checkKind(DatasetSpec.Feature f) throws MalformedRecordException {
    FeatureKind want =
        f.type() == DatasetSpec.ValueType.INT64 ? FeatureKind.INT64 : FeatureKind.FLOAT;
    if (values.kind() != want) {
      throw new MalformedRecordException(
          "feature '"
              + f.name()
              + "' holds "
              + (values.kind() == FeatureKind.FLOAT
                  ? "floats"
                  : values.kind() == FeatureKind.INT64 ? "int64 values" : "bytes")
              + ", expected "
              + (want == FeatureKind.INT64 ? "int64 ids (an Int64List)" : "floats (a FloatList)"));
    }
  }

  private static void checkId(DatasetSpec.Feature f, int i, long v)
      throws MalformedRecordException {
    long vocab = f.vocabSize();
    if (vocab > 0 && (v < 0 || v >= vocab)) {
      throw new MalformedRecordException(
          "feature '"
              + f.name()
              + "' value "
              + i
              + " is "
              + v
              + ": outside the vocabulary [0, "
              + vocab
              + ")");
    }
  }
}
