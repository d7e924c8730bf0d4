package dev.sparktrainer.data;

import dev.sparktrainer.data.DatasetSpec.Encoding;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongPredicate;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.HadoopReadOptions;
import org.apache.parquet.column.impl.ColumnReadStoreImpl;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.Type;

/**
 * Streams a Parquet file a row group at a time, reading only the spec's columns. Columns may be
 * numbers, lists of numbers (any list encoding), Spark ML vectors (dense or sparse), or binary
 * encoded images; int64 features and sequences ({@link ParquetColumns#forSlots}) take INT32 and
 * INT64 columns (exact values) and lists of them, float sequences lists of any number.
 *
 * <p>Values go from parquet-mr's column readers straight into a pooled record array ({@link #next})
 * or a batch's column buffers ({@link #nextInto}): no record assembly, no object per value (see
 * {@link ParquetColumns}). Rows this worker does not own are skipped without decoding their values.
 * After an error the stream is unusable (its columns may stand at different rows); errors name the
 * file, the row (its index in the file) and the column.
 */
final class ParquetStream implements RecordStream, ImageSeeding {
  private final String file;
  private final ArrayPool.Taker pool;
  private final ParquetFileReader reader;
  private final MessageType projection;
  private final String createdBy;
  private final DatasetSpec spec;
  private final LongPredicate owned;

  /** Per feature, its decoder (the spec names each column once). */
  private final ParquetColumns.Column[] columns;

  private final int[] offsets;
  private final FloatSink[] sinks;

  /** The label's column, or null without a label. */
  private final ParquetColumns.Leaf label;

  private long rowsLeftInGroup;

  /** Row groups read so far (the current one is {@code rowGroup - 1}). */
  private int rowGroup;

  /** Whether the columns are bound to a row group (checked for leftover values at its end). */
  private boolean bound;

  private long index;

  private Images images;
  private boolean seedImages;
  private long seedBase;
  private int seedItem;
  private long returned;

  ParquetStream(
      Split split, DatasetSpec spec, LongPredicate owned, Configuration conf, ArrayPool pool)
      throws IOException {
    this(split, spec, owned, conf, pool, null);
  }

  /** Counts the images this stream decodes on {@code clock} (null: nowhere). */
  ParquetStream clock(ImageClock clock) {
    if (images != null) {
      images.clock = clock;
    }
    return this;
  }

  /** As above, images of another size resized by {@code resize} (null: the default). */
  ParquetStream(
      Split split,
      DatasetSpec spec,
      LongPredicate owned,
      Configuration conf,
      ArrayPool pool,
      ImageResize resize)
      throws IOException {
    this.pool = pool.taker();
    this.file = split.path();
    this.spec = spec;
    this.owned = owned;
    this.reader = open(split.path(), conf);
    try {
      MessageType fileSchema = reader.getFooter().getFileMetaData().getSchema();
      this.createdBy = reader.getFooter().getFileMetaData().getCreatedBy();
      List<String> names = new ArrayList<>();
      for (DatasetSpec.Feature f : spec.features()) {
        names.add(f.name());
      }
      if (spec.label() != null) {
        names.add(spec.label());
      }
      List<Type> fields = new ArrayList<>();
      for (String n : names) {
        if (!fileSchema.containsField(n)) {
          throw new IOException(
              "Parquet file "
                  + file
                  + " has no column '"
                  + n
                  + "' (columns: "
                  + fileSchema.getFields().stream().map(Type::getName).toList()
                  + ")");
        }
        if (fields.stream().noneMatch(t -> t.getName().equals(n))) {
          fields.add(fileSchema.getType(n));
        }
      }
      this.projection = new MessageType(fileSchema.getName(), fields);
      List<DatasetSpec.Feature> features = spec.features();
      this.columns = new ParquetColumns.Column[features.size()];
      this.offsets = new int[features.size()];
      this.sinks = new FloatSink[features.size()];
      int pos = 0;
      for (int c = 0; c < features.size(); c++) {
        DatasetSpec.Feature f = features.get(c);
        offsets[c] = pos;
        pos += f.size();
        sinks[c] = new FloatSink();
        try {
          columns[c] =
              f.fixedFloat()
                  ? ParquetColumns.forFeature(projection, f.name(), f.encoding() == Encoding.IMAGE)
                  : ParquetColumns.forSlots(projection, f);
        } catch (IllegalArgumentException e) {
          throw new IOException("Parquet file " + file + ": " + e.getMessage(), e);
        }
        if (columns[c] instanceof ParquetColumns.Image) {
          if (images == null) {
            images = new Images(resize);
          }
          ((ParquetColumns.Image) columns[c]).shape(f.shape(), images, f.bytes());
        }
      }
      try {
        this.label =
            spec.label() == null ? null : ParquetColumns.forLabel(projection, spec.label());
      } catch (IllegalArgumentException e) {
        throw new IOException("Parquet file " + file + ": " + e.getMessage(), e);
      }
      reader.setRequestedSchema(projection);
    } catch (IOException | RuntimeException e) {
      reader.close();
      throw named(e);
    }
  }

  /**
   * Opens {@code path} with page checksums verified where the writer wrote them (parquet-mr does by
   * default): a flipped bit in a page fails naming the file instead of changing a value. Every
   * failure to read the footer is an IOException naming the file (the planner counts rows with it
   * too).
   */
  static ParquetFileReader open(String path, Configuration conf) throws IOException {
    try {
      return ParquetFileReader.open(
          HadoopInputFile.fromPath(new Path(path), conf),
          HadoopReadOptions.builder(conf).usePageChecksumVerification(true).build());
    } catch (IOException | RuntimeException e) {
      // A footer that does not parse, a bad magic number, offsets out of range (parquet-mr's
      // InvalidParquetMetadataException, or an NPE): name the file.
      if (e.getMessage() != null && e.getMessage().contains(path)) {
        throw e instanceof IOException ? (IOException) e : new IOException(e.getMessage(), e);
      }
      throw new IOException("Parquet file " + path + ": cannot read its footer (" + e + ")", e);
    }
  }

  /** {@code e} as an IOException whose message names the file. */
  private IOException named(Exception e) {
    if (e instanceof IOException && e.getMessage() != null && e.getMessage().contains(file)) {
      return (IOException) e;
    }
    return new IOException("Parquet file " + file + ": " + e.getMessage(), e);
  }

  /** Binds the columns to the next row group; false at the end of the file. */
  private boolean nextRowGroup() throws IOException {
    while (rowsLeftInGroup == 0) {
      if (bound) {
        bound = false;
        try {
          for (ParquetColumns.Column c : columns) {
            c.end();
          }
          if (label != null) {
            label.end();
          }
        } catch (RuntimeException e) {
          throw error(e);
        }
      }
      PageReadStore pages;
      try {
        pages = reader.readNextRowGroup();
      } catch (IOException | RuntimeException e) {
        // A chunk out of the file's range, a page header that does not parse, a checksum that
        // does not match: parquet-mr's message rarely names the file.
        throw new IOException(
            "Parquet file " + file + ", row group " + rowGroup + ": cannot read it (" + e + ")", e);
      }
      if (pages == null) {
        return false;
      }
      rowGroup++;
      rowsLeftInGroup = pages.getRowCount();
      ColumnReadStoreImpl store =
          new ColumnReadStoreImpl(
              pages, ParquetColumns.unusedConverters(projection), projection, createdBy);
      try {
        for (ParquetColumns.Column c : columns) {
          c.start(pages, store);
        }
        if (label != null) {
          label.start(pages, store);
        }
        bound = true;
      } catch (RuntimeException e) { // a dictionary or first page that does not decode
        throw error(e);
      }
    }
    return true;
  }

  /** Skips the rows this worker does not own; false at the end of the file. */
  private boolean nextOwned() throws IOException {
    while (nextRowGroup()) {
      if (owned.test(index)) {
        return true;
      }
      try {
        for (ParquetColumns.Column c : columns) {
          c.skip();
        }
        if (label != null) {
          label.skip();
        }
      } catch (RuntimeException e) {
        throw error(e);
      }
      index++;
      rowsLeftInGroup--;
    }
    return false;
  }

  @Override
  public Record next() throws IOException {
    if (!nextOwned()) {
      return null;
    }
    float[] out = pool.take();
    for (int c = 0; c < sinks.length; c++) {
      sinks[c].toArray(out, offsets[c], spec.features().get(c).size());
    }
    if (seedImages && images != null) {
      images.seed(ImageSeeding.seed(seedBase, seedItem, returned));
    }
    try {
      Record r = new Record(out, decodeRow());
      returned++;
      return r;
    } finally {
      if (images != null) {
        images.unseed();
      }
    }
  }

  @Override
  public void seedImages(long base, int item) {
    seedImages = true;
    seedBase = base;
    seedItem = item;
  }

  /**
   * Decodes the next row this worker owns straight into row {@code b.size()} of {@code b}'s column
   * buffers; false at the end of the file.
   */
  boolean nextInto(BatchBuilder b) throws IOException {
    if (!nextOwned()) {
      return false;
    }
    ByteBuffer[] cols = b.columns();
    for (int c = 0; c < sinks.length; c++) {
      int width = spec.features().get(c).size();
      sinks[c].toBuffer(cols[c], 4 * width * b.size(), width);
    }
    b.commit(decodeRow());
    return true;
  }

  /** Decodes the current row into the sinks; returns its label. */
  private double decodeRow() throws IOException {
    long row = index++;
    rowsLeftInGroup--;
    int c = 0;
    try {
      for (; c < columns.length; c++) {
        columns[c].read(sinks[c]);
        DatasetSpec.Feature f = spec.features().get(c);
        if (sinks[c].count != f.size()) {
          throw new ParquetColumns.BadValue(
              "column '"
                  + f.name()
                  + "' has "
                  + sinks[c].count
                  + " values, expected "
                  + f.size()
                  + " for shape "
                  + Arrays.toString(f.shape()));
        }
      }
      return label == null ? 0 : label.scalar();
    } catch (RuntimeException e) {
      index = row;
      throw error(e);
    }
  }

  private IOException error(RuntimeException e) {
    String what =
        e instanceof ParquetColumns.BadValue
            ? e.getMessage()
            : "cannot decode column values (" + e + ")";
    return new IOException(
        "Parquet file "
            + file
            + ", row "
            + index
            + ": "
            + what
            + " (row group "
            + (rowGroup - 1)
            + ")",
        e);
  }

  @Override
  public void close() throws IOException {
    reader.close();
  }
}
