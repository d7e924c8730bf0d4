package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.ExampleScanner;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.FeatureLookup;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import dev.sparktrainer.tfrecord.spark.SparkTypes.Elem;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ColumnVectorUtils;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one file split of Example (or ByteArray) records into columnar batches: each selected
 * feature is decoded once and appended to its column vector — a float list is one bulk copy — so
 * Spark's generated code reads columns directly instead of rows. A record is decoded and checked in
 * full before anything is appended, so a malformed record dropped under DROPMALFORMED leaves no
 * partial values behind. A failure part way through a batch (corrupt framing under FAILFAST, an I/O
 * error) first hands out the rows decoded before it and is thrown by the next call, so that under
 * {@code ignoreCorruptFiles} the rows before the corruption are kept, as with the row reader.
 */
final class TFRecordColumnarReader implements PartitionReader<ColumnarBatch> {
  private final TFRecordReader reader;
  private final MalformedRecords malformed;
  private final int batchSize;
  private final RecordType recordType;
  private final ExampleScanner scanner;
  private final Column[] columns;
  private final FeatureValues[] values;
  private final WritableColumnVector[] vectors;
  private final ColumnarBatch batch;

  /** A failure held back while the rows decoded before it are handed out. */
  private Exception deferred;

  /** Whether a scan of these columns can be read as columnar batches. */
  static boolean supports(StructType data, StructType partition, RecordType recordType) {
    if (recordType == RecordType.SequenceExample) {
      return false;
    }
    for (StructField f : data.fields()) {
      DataType t =
          f.dataType() instanceof ArrayType
              ? ((ArrayType) f.dataType()).elementType()
              : f.dataType();
      Elem e = SparkTypes.elemOf(t);
      if (e == null || e == Elem.DECIMAL) {
        return false;
      }
    }
    for (StructField f : partition.fields()) {
      if (f.dataType() instanceof ArrayType || SparkTypes.isMlVector(f.dataType())) {
        return false;
      }
    }
    return true;
  }

  TFRecordColumnarReader(
      Path path,
      long start,
      long length,
      Configuration conf,
      StructType required,
      StructType partitionSchema,
      InternalRow partitionValues,
      TFRecordOptions options,
      int batchSize,
      AtomicLong dropped)
      throws IOException {
    TFRecordRowDecoder.validateReadSchema(required, options.recordType());
    this.recordType = options.recordType();
    this.batchSize = batchSize;
    StructField[] fields = required.fields();
    columns = new Column[fields.length];
    values = new FeatureValues[fields.length];
    List<String> names = new ArrayList<>();
    for (int i = 0; i < fields.length; i++) {
      columns[i] = new Column(fields[i].name(), fields[i].dataType());
      values[i] = new FeatureValues();
      names.add(fields[i].name());
    }
    scanner =
        recordType == RecordType.ByteArray
            ? null
            : new ExampleScanner(new FeatureLookup(names), null);
    OnHeapColumnVector[] data = OnHeapColumnVector.allocateColumns(batchSize, required);
    vectors = data;
    ColumnVector[] all = new ColumnVector[fields.length + partitionSchema.length()];
    System.arraycopy(data, 0, all, 0, data.length);
    for (int p = 0; p < partitionSchema.length(); p++) {
      ConstantColumnVector c =
          new ConstantColumnVector(batchSize, partitionSchema.fields()[p].dataType());
      populate(c, batchSize, partitionValues, p, partitionSchema.fields()[p].dataType());
      all[fields.length + p] = c;
    }
    batch = new ColumnarBatch(all);
    this.reader = TFRecordFileOpener.open(path, start, length, conf, options);
    this.malformed =
        new MalformedRecords(
            reader, options, dropped, path + " [" + start + ", " + (start + length) + ")");
  }

  /** A constant column: Spark's populate, plus structs (the {@code _metadata} column). */
  private static void populate(
      ConstantColumnVector c, int rows, InternalRow row, int ordinal, DataType type) {
    if (type instanceof StructType && !row.isNullAt(ordinal)) {
      StructField[] fields = ((StructType) type).fields();
      InternalRow struct = row.getStruct(ordinal, fields.length);
      for (int i = 0; i < fields.length; i++) {
        ConstantColumnVector child = new ConstantColumnVector(rows, fields[i].dataType());
        populate(child, rows, struct, i, fields[i].dataType());
        c.setChild(i, child);
      }
    } else {
      ColumnVectorUtils.populate(c, row, ordinal);
    }
  }

  @Override
  public boolean next() throws IOException {
    if (deferred != null) {
      Exception e = deferred;
      deferred = null;
      if (e instanceof IOException) {
        throw (IOException) e;
      }
      throw (RuntimeException) e;
    }
    for (WritableColumnVector v : vectors) {
      v.reset();
    }
    int rows = 0;
    try {
      while (rows < batchSize && reader.next()) {
        if (decode(reader.buffer(), reader.dataOffset(), reader.dataLength())) {
          rows++;
        }
      }
    } catch (IOException | RuntimeException e) {
      if (rows == 0) {
        throw e;
      }
      deferred = e; // the rows before it first
    } finally {
      malformed.report();
    }
    batch.setNumRows(rows);
    return rows > 0;
  }

  /** Decodes and checks one record, then appends it; false if it was dropped. */
  private boolean decode(byte[] buf, int off, int len) throws IOException {
    if (recordType == RecordType.ByteArray) {
      if (columns.length > 0) {
        vectors[0].appendByteArray(buf, off, len);
      }
      return true;
    }
    try {
      scanner.scanExample(buf, off, len);
      byte[] data = scanner.buffer(); // the record, or the scanner's copy with merged values
      for (int i = 0; i < columns.length; i++) {
        int fo = scanner.featureOffset[i];
        if (fo >= 0) {
          columns[i].check(values[i].decode(data, fo, scanner.featureLength[i]));
        }
      }
    } catch (MalformedRecordException | IndexOutOfBoundsException e) {
      malformed.onMalformed(e);
      return false;
    }
    for (int i = 0; i < columns.length; i++) {
      if (scanner.featureOffset[i] < 0) {
        vectors[i].appendNull();
      } else {
        columns[i].append(vectors[i], values[i]);
      }
    }
    return true;
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() throws IOException {
    malformed.close();
    try {
      reader.close();
    } finally {
      batch.close();
    }
  }

  /** One column: checks a decoded feature, then appends it. */
  private static final class Column {
    final String name;
    final DataType type;
    final boolean array;
    final Elem elem;

    Column(String name, DataType type) {
      this.name = name;
      this.type = type;
      this.array = type instanceof ArrayType;
      this.elem = SparkTypes.elemOf(array ? ((ArrayType) type).elementType() : type);
    }

    void check(FeatureValues v) {
      SparkTypes.checkKind(v, elem, name, type);
      if (!array && v.count() > 1) {
        throw new MalformedRecordException(
            "feature '"
                + name
                + "' has "
                + v.count()
                + " values but column '"
                + name
                + "' is a scalar "
                + type.simpleString()
                + ": declare it array<"
                + type.simpleString()
                + ">");
      }
      if (elem.narrowInt()) {
        for (int i = 0; i < v.count(); i++) {
          SparkTypes.checkRange(v.longAt(i), elem, name, type);
        }
      }
    }

    void append(WritableColumnVector vec, FeatureValues v) {
      int n = v.count();
      if (!array) {
        if (n == 0) {
          vec.appendNull();
        } else {
          appendOne(vec, v, 0);
        }
        return;
      }
      vec.appendArray(n);
      WritableColumnVector child = vec.arrayData();
      if (elem == Elem.FLOAT && v.kind() == FeatureKind.FLOAT) {
        child.appendFloats(n, v.floatArray(), 0);
      } else if (elem == Elem.LONG && n > 0) {
        child.appendLongs(n, v.longArray(), 0);
      } else {
        for (int i = 0; i < n; i++) {
          appendOne(child, v, i);
        }
      }
    }

    private void appendOne(WritableColumnVector vec, FeatureValues v, int i) {
      boolean fromInt = v.kind() == FeatureKind.INT64;
      switch (elem) {
        case LONG:
          vec.appendLong(v.longAt(i));
          break;
        case INT:
          vec.appendInt((int) v.longAt(i));
          break;
        case SHORT:
          vec.appendShort((short) v.longAt(i));
          break;
        case BYTE:
          vec.appendByte((byte) v.longAt(i));
          break;
        case BOOLEAN:
          vec.appendBoolean(v.longAt(i) != 0);
          break;
        case FLOAT:
          vec.appendFloat(fromInt ? (float) v.longAt(i) : v.floatAt(i));
          break;
        case DOUBLE:
          vec.appendDouble(fromInt ? (double) v.longAt(i) : (double) v.floatAt(i));
          break;
        default: // STRING, BINARY
          vec.appendByteArray(v.bytesBuffer(), v.bytesOffset(i), v.bytesLength(i));
      }
    }
  }
}
