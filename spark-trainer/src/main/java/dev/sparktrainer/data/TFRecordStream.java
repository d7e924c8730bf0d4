package dev.sparktrainer.data;

import dev.sparktrainer.data.DatasetSpec.Encoding;
import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.ExampleScanner;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.FeatureLookup;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongPredicate;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * Reads a split of TFRecord {@code tf.train.Example}s with the data source's codec: framing and
 * CRCs verified, only the spec's features decoded, and records this worker does not own skipped
 * without decoding.
 */
final class TFRecordStream implements RecordStream {
  private final TFRecordReader reader;
  private final ArrayPool.Taker pool;
  private final DatasetSpec spec;
  private final LongPredicate owned;
  private final ExampleScanner scanner;
  private final FeatureValues values = new FeatureValues();
  private final int featureSize;
  private final boolean labelled;
  private long index;

  TFRecordStream(Split split, DatasetSpec spec, LongPredicate owned, Configuration conf, int maxRecordLength,
      ArrayPool pool) throws IOException {
    this.pool = pool.taker();
    this.spec = spec;
    this.owned = owned;
    this.featureSize = spec.featureSize();
    this.labelled = spec.label() != null;
    List<String> names = new ArrayList<>();
    for (DatasetSpec.Feature f : spec.features()) {
      names.add(f.name());
    }
    if (labelled) {
      names.add(spec.label());
    }
    this.scanner = new ExampleScanner(new FeatureLookup(names), null);
    Path path = new Path(split.path());
    this.reader = TFRecordFiles.open(path, split.start(), split.length(), conf,
        TFRecordCompression.fromFileName(path.getName()), maxRecordLength, CorruptRecordPolicy.FAILFAST);
  }

  @Override
  public Record next() throws IOException {
    while (reader.next()) {
      long j = index++;
      if (!owned.test(j)) {
        continue;
      }
      try {
        return decode(reader.buffer(), reader.dataOffset(), reader.dataLength());
      } catch (MalformedRecordException | IOException e) {
        throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), e.getMessage(), e);
      }
    }
    return null;
  }

  private Record decode(byte[] buf, int off, int len) throws IOException {
    scanner.scanExample(buf, off, len);
    float[] out = pool.take();
    int pos = 0;
    List<DatasetSpec.Feature> features = spec.features();
    for (int c = 0; c < features.size(); c++) {
      DatasetSpec.Feature f = features.get(c);
      int fo = scanner.featureOffset[c];
      if (fo < 0) {
        throw new MalformedRecordException("feature '" + f.name() + "' is missing");
      }
      int n = f.size();
      if (f.encoding() != Encoding.IMAGE) {
        int at = FeatureValues.packedFloatsAt(buf, fo, scanner.featureLength[c], n);
        if (at >= 0) { // TensorFlow's own encoding: one bulk copy
          java.nio.ByteBuffer.wrap(buf, at, 4 * n).order(java.nio.ByteOrder.LITTLE_ENDIAN)
              .asFloatBuffer().get(out, pos, n);
          pos += n;
          continue;
        }
      }
      values.decode(buf, fo, scanner.featureLength[c]);
      if (f.encoding() == Encoding.IMAGE) {
        if (values.kind() != dev.sparktrainer.tfrecord.example.FeatureKind.BYTES || values.count() != 1) {
          throw new MalformedRecordException("feature '" + f.name() + "' must hold one encoded image");
        }
        long[] s = f.shape();
        try {
          Images.decode(values.bytesBuffer(), values.bytesOffset(0), values.bytesLength(0),
              (int) s[0], (int) s[1], (int) s[2], out, pos);
        } catch (IOException e) {
          throw new MalformedRecordException("feature '" + f.name() + "': " + e.getMessage());
        }
      } else {
        if (values.count() != n) {
          throw new MalformedRecordException("feature '" + f.name() + "' has " + values.count()
              + " values, expected " + n + " for shape " + java.util.Arrays.toString(f.shape()));
        }
        if (values.kind() == dev.sparktrainer.tfrecord.example.FeatureKind.FLOAT) {
          System.arraycopy(values.floatArray(), 0, out, pos, n);
        } else if (values.kind() == dev.sparktrainer.tfrecord.example.FeatureKind.INT64) {
          for (int i = 0; i < n; i++) {
            out[pos + i] = values.longAt(i);
          }
        } else {
          throw new MalformedRecordException("feature '" + f.name() + "' holds bytes, expected numbers");
        }
      }
      pos += n;
    }
    double label = 0;
    if (labelled) {
      int lo = scanner.featureOffset[features.size()];
      if (lo < 0) {
        throw new MalformedRecordException("label '" + spec.label() + "' is missing");
      }
      values.decode(buf, lo, scanner.featureLength[features.size()]);
      if (values.count() != 1) {
        throw new MalformedRecordException("label '" + spec.label() + "' has " + values.count() + " values, expected 1");
      }
      if (values.kind() == dev.sparktrainer.tfrecord.example.FeatureKind.INT64) {
        label = values.longAt(0);
      } else if (values.kind() == dev.sparktrainer.tfrecord.example.FeatureKind.FLOAT) {
        label = values.floatAt(0);
      } else {
        throw new MalformedRecordException("label '" + spec.label() + "' holds bytes, expected a number");
      }
    }
    return new Record(out, label);
  }

  @Override
  public void close() throws IOException {
    reader.close();
  }
}
