package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.function.LongPredicate;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * Reads a split of TFRecord {@code tf.train.Example}s with the data source's codec: framing and
 * CRCs verified, only the spec's features decoded, and records this worker does not own skipped
 * without decoding.
 *
 * <p>Two ways to hand records on. Decoded into a pooled float array (what a shuffle buffer holds).
 * Or, with {@link ReadBuffers} given, not decoded at all: the record points into the reader's own
 * buffer, which the reader hands over instead of reusing, and the batch stage decodes it straight
 * into the batch — the fewest copies, for pipelines without a shuffle buffer.
 */
final class TFRecordStream implements RecordStream, ImageSeeding {
  private final TFRecordReader reader;
  private final ArrayPool.Taker pool;
  private final LongPredicate owned;
  private final RecordDecoder decoder;
  private final ReadBuffers readBuffers;
  private ReadBuffers.Handed current;
  private int handed;
  private long index;
  private boolean seedImages;
  private long seedBase;
  private int seedItem;
  private long returned;

  TFRecordStream(
      Split split,
      DatasetSpec spec,
      LongPredicate owned,
      Configuration conf,
      int maxRecordLength,
      ArrayPool pool,
      ReadBuffers readBuffers)
      throws IOException {
    this(split, spec, owned, conf, maxRecordLength, pool, readBuffers, null);
  }

  /** As above, images of another size resized by {@code resize} (null: the default). */
  TFRecordStream(
      Split split,
      DatasetSpec spec,
      LongPredicate owned,
      Configuration conf,
      int maxRecordLength,
      ArrayPool pool,
      ReadBuffers readBuffers,
      ImageResize resize)
      throws IOException {
    this.pool = pool.taker();
    this.owned = owned;
    this.decoder = readBuffers == null ? new RecordDecoder(spec, resize) : null;
    this.readBuffers = readBuffers;
    Path path = new Path(split.path());
    this.reader =
        TFRecordFiles.open(
            path,
            split.start(),
            split.length(),
            conf,
            TFRecordCompression.fromFileName(path.getName()),
            maxRecordLength,
            CorruptRecordPolicy.FAILFAST);
    if (readBuffers != null) {
      current = readBuffers.new Handed(reader.buffer(), reader.file());
      reader.setBufferHandoff(
          new TFRecordReader.BufferHandoff() {
            private byte[] fresh;

            @Override
            public byte[] take(int minLength) {
              fresh = readBuffers.take(minLength);
              return fresh;
            }

            @Override
            public void retire(byte[] retired) {
              // The reader has copied its unread bytes into the fresh buffer: the records handed
              // out of
              // the retired one are all that hold it now.
              current.readerDone(handed);
              current = readBuffers.new Handed(fresh, reader.file());
              handed = 0;
              fresh = null;
            }
          });
    }
  }

  /** Counts the images this stream decodes on {@code clock} (null: nowhere). */
  TFRecordStream clock(ImageClock clock) {
    if (decoder != null) {
      decoder.clock(clock);
    }
    return this;
  }

  @Override
  public Record next() throws IOException {
    while (reader.next()) {
      long j = index++;
      if (!owned.test(j)) {
        continue;
      }
      if (readBuffers != null) {
        handed++;
        return new Record(current, reader.dataOffset(), reader.dataLength(), reader.recordOffset());
      }
      float[] out = pool.take();
      try {
        if (seedImages) {
          decoder.seedImages(ImageSeeding.seed(seedBase, seedItem, returned));
        }
        double label =
            decoder.decode(reader.buffer(), reader.dataOffset(), reader.dataLength(), out);
        returned++;
        return new Record(out, label);
      } catch (MalformedRecordException | IOException e) {
        throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), e.getMessage(), e);
      }
    }
    return null;
  }

  /**
   * Decodes the next record this worker owns straight into row {@code b.size()} of {@code b} (from
   * the reader's own buffer, just checked, still in cache); false at the end of the split.
   */
  boolean nextInto(BatchBuilder b) throws IOException {
    while (reader.next()) {
      long j = index++;
      if (!owned.test(j)) {
        continue;
      }
      try {
        b.commit(
            decoder.decodeInto(
                reader.buffer(), reader.dataOffset(), reader.dataLength(), b.columns(), b.size()));
        return true;
      } catch (MalformedRecordException | IOException e) {
        throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), e.getMessage(), e);
      }
    }
    return false;
  }

  /**
   * Moves to the next record this worker owns without decoding it ({@link #decodeInto}, {@link
   * #decode} decode it); false at the end of the split.
   */
  boolean advance() throws IOException {
    while (reader.next()) {
      if (owned.test(index++)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Decodes the record {@link #advance} moved to into row {@code row} of {@code columns}; returns
   * its label.
   */
  double decodeInto(ByteBuffer[] columns, int row) throws IOException {
    try {
      return decoder.decodeInto(
          reader.buffer(), reader.dataOffset(), reader.dataLength(), columns, row);
    } catch (MalformedRecordException | IOException e) {
      throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), e.getMessage(), e);
    }
  }

  /** Decodes the record {@link #advance} moved to into a pooled array. */
  Record decode() throws IOException {
    float[] out = pool.take();
    try {
      double label = decoder.decode(reader.buffer(), reader.dataOffset(), reader.dataLength(), out);
      return new Record(out, label);
    } catch (MalformedRecordException | IOException e) {
      throw new TFRecordCorruptException(reader.file(), reader.recordOffset(), e.getMessage(), e);
    }
  }

  @Override
  public void seedImages(long base, int item) {
    if (decoder == null) {
      throw new IllegalStateException("a stream that hands over undecoded records decodes nothing");
    }
    seedImages = true;
    seedBase = base;
    seedItem = item;
  }

  @Override
  public long recordOffset() {
    return reader.recordOffset();
  }

  @Override
  public void close() throws IOException {
    if (current != null) {
      current.readerDone(handed);
      current = null;
    }
    reader.close();
  }
}
