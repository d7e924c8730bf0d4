package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.spark.SparkTypes.Elem;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Encodes rows as records. Numbers and booleans become int64 or float lists, strings and binary
 * bytes lists, arrays lists, ml Vectors float lists (sparse ones densified), arrays of arrays
 * SequenceExample feature lists. Null columns are omitted; a null inside an array is an error.
 */
final class TFRecordRowEncoder {
  private final RecordType recordType;
  private final Column[] columns;
  private final ExampleEncoder enc = new ExampleEncoder();

  TFRecordRowEncoder(StructType schema, RecordType recordType) {
    validateWriteSchema(schema, recordType);
    this.recordType = recordType;
    StructField[] f = schema.fields();
    columns = new Column[f.length];
    for (int i = 0; i < f.length; i++) {
      columns[i] = new Column(i, f[i].name(), f[i].dataType());
    }
  }

  /**
   * Checks on the driver, before any file is written, that every column has a TFRecord mapping.
   *
   * @throws IllegalArgumentException naming the column, its type and what is supported
   */
  static void validateWriteSchema(StructType schema, RecordType recordType) {
    if (recordType == RecordType.ByteArray) {
      if (schema.length() != 1
          || SparkTypes.elemOf(schema.fields()[0].dataType()) == null
          || !SparkTypes.elemOf(schema.fields()[0].dataType()).bytes()) {
        throw new IllegalArgumentException(
            "recordType ByteArray writes exactly one binary (or string) column; got "
                + schema.simpleString());
      }
      return;
    }
    for (StructField f : schema.fields()) {
      DataType t = f.dataType();
      if (!SparkTypes.hasMapping(t, recordType)) {
        String hint =
            recordType == RecordType.Example && SparkTypes.isNestedArray(t)
                ? " (arrays of arrays need recordType SequenceExample)"
                : "";
        throw new IllegalArgumentException(
            "Column '"
                + f.name()
                + "' of type "
                + t.simpleString()
                + " cannot be written as a TFRecord "
                + recordType
                + " feature"
                + hint
                + ": supported types are "
                + SparkTypes.supportedTypes(recordType));
      }
    }
  }

  /** The serialized record for {@code row}. */
  byte[] encode(InternalRow row) {
    if (recordType == RecordType.ByteArray) {
      if (row.isNullAt(0)) {
        throw new IllegalArgumentException(
            "recordType ByteArray: column '"
                + columns[0].name
                + "' is null; every record needs bytes");
      }
      return columns[0].elem == Elem.STRING ? row.getUTF8String(0).getBytes() : row.getBinary(0);
    }
    enc.reset();
    for (Column c : columns) {
      if (!row.isNullAt(c.ordinal)) {
        c.encode(enc, row);
      }
    }
    return recordType == RecordType.Example ? enc.finishExample() : enc.finishSequenceExample();
  }

  private static final class Column {
    final int ordinal;
    final String name;
    final byte[] key;
    final DataType type;
    final Elem elem; // scalar or element kind
    final boolean array;
    final boolean list;
    final boolean vector;
    final FeatureKind kind;

    Column(int ordinal, String name, DataType type) {
      this.ordinal = ordinal;
      this.name = name;
      this.key = name.getBytes(StandardCharsets.UTF_8);
      this.type = type;
      this.vector = SparkTypes.isMlVector(type);
      this.list = SparkTypes.isNestedArray(type);
      this.array = !list && type instanceof ArrayType;
      DataType scalar = type;
      while (scalar instanceof ArrayType) {
        scalar = ((ArrayType) scalar).elementType();
      }
      this.elem = vector ? Elem.FLOAT : SparkTypes.elemOf(scalar);
      this.kind =
          elem.integral()
              ? FeatureKind.INT64
              : elem.floating() ? FeatureKind.FLOAT : FeatureKind.BYTES;
    }

    void encode(ExampleEncoder enc, InternalRow row) {
      if (list) {
        ArrayData outer = row.getArray(ordinal);
        enc.beginFeatureList(key);
        for (int j = 0; j < outer.numElements(); j++) {
          if (outer.isNullAt(j)) {
            throw nullElement(j);
          }
          enc.beginListFeature(kind);
          addAll(enc, outer.getArray(j));
          enc.endListFeature();
        }
        enc.endFeatureList();
        return;
      }
      enc.beginFeature(key, kind);
      if (vector) {
        addVector(enc, row.getStruct(ordinal, 4));
      } else if (array) {
        addAll(enc, row.getArray(ordinal));
      } else {
        add(enc, row, ordinal);
      }
      enc.endFeature();
    }

    private void addAll(ExampleEncoder enc, ArrayData a) {
      int n = a.numElements();
      for (int i = 0; i < n; i++) {
        if (a.isNullAt(i)) {
          throw nullElement(i);
        }
        add(enc, a, i);
      }
    }

    private void add(ExampleEncoder enc, SpecializedGetters g, int i) {
      switch (elem) {
        case LONG:
          enc.addInt64(g.getLong(i));
          break;
        case INT:
          enc.addInt64(g.getInt(i));
          break;
        case SHORT:
          enc.addInt64(g.getShort(i));
          break;
        case BYTE:
          enc.addInt64(g.getByte(i));
          break;
        case BOOLEAN:
          enc.addInt64(g.getBoolean(i) ? 1 : 0);
          break;
        case FLOAT:
          enc.addFloat(g.getFloat(i));
          break;
        case DOUBLE:
          enc.addFloat((float) g.getDouble(i));
          break;
        case DECIMAL:
          DataType scalar = type instanceof ArrayType ? ((ArrayType) type).elementType() : type;
          DecimalType dt = (DecimalType) scalar;
          enc.addFloat((float) g.getDecimal(i, dt.precision(), dt.scale()).toDouble());
          break;
        case STRING:
          UTF8String s = g.getUTF8String(i);
          ByteBuffer bb = s.getByteBuffer();
          enc.addBytes(bb.array(), bb.arrayOffset() + bb.position(), bb.remaining());
          break;
        default:
          enc.addBytes(g.getBinary(i));
      }
    }

    /** Spark ML's VectorUDT layout: type (0 sparse, 1 dense), size, indices, values. */
    private void addVector(ExampleEncoder enc, InternalRow v) {
      ArrayData values = v.getArray(3);
      if (v.getByte(0) == 1) {
        for (int i = 0; i < values.numElements(); i++) {
          enc.addFloat((float) values.getDouble(i));
        }
        return;
      }
      int size = v.getInt(1);
      ArrayData indices = v.getArray(2);
      float[] dense = new float[size];
      for (int i = 0; i < indices.numElements(); i++) {
        dense[indices.getInt(i)] = (float) values.getDouble(i);
      }
      enc.addFloats(dense, 0, size);
    }

    private IllegalArgumentException nullElement(int i) {
      return new IllegalArgumentException(
          "Column '" + name + "' has a null at index " + i + ": TFRecord lists cannot hold nulls");
    }
  }
}
