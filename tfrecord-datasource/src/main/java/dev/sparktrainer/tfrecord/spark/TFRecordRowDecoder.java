package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.example.ExampleScanner;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.FeatureLookup;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import dev.sparktrainer.tfrecord.spark.SparkTypes.Elem;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeArrayWriter;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeWriter;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import scala.math.BigDecimal;

/**
 * Decodes serialized records straight into {@code UnsafeRow}s of the required schema. Only the
 * selected features are decoded; the others are skipped by the scanner. The returned row is reused:
 * valid until the next call.
 */
final class TFRecordRowDecoder {
  private final RecordType recordType;
  private final UnsafeRowWriter writer;
  private final ExampleScanner scanner;
  private final Field[] contextFields; // by index in the context lookup
  private final Field[] listFields; // by index in the feature-list lookup
  private final FeatureValues values = new FeatureValues();

  TFRecordRowDecoder(StructType required, RecordType recordType) {
    validateReadSchema(required, recordType);
    this.recordType = recordType;
    this.writer = new UnsafeRowWriter(required.length(), 256);
    List<String> contextNames = new ArrayList<>();
    List<String> listNames = new ArrayList<>();
    List<Field> context = new ArrayList<>();
    List<Field> lists = new ArrayList<>();
    StructField[] fields = required.fields();
    for (int i = 0; i < fields.length; i++) {
      DataType t = fields[i].dataType();
      if (recordType == RecordType.SequenceExample && SparkTypes.isNestedArray(t)) {
        listNames.add(fields[i].name());
        lists.add(fieldFor(i, fields[i].name(), t));
      } else {
        contextNames.add(fields[i].name());
        context.add(fieldFor(i, fields[i].name(), t));
      }
    }
    this.contextFields = context.toArray(new Field[0]);
    this.listFields = lists.toArray(new Field[0]);
    this.scanner =
        recordType == RecordType.ByteArray
            ? null
            : new ExampleScanner(
                new FeatureLookup(contextNames),
                recordType == RecordType.SequenceExample ? new FeatureLookup(listNames) : null);
  }

  /**
   * Checks on the driver that every column can be read from this record type.
   *
   * @throws IllegalArgumentException naming the column, its type and what is supported
   */
  static void validateReadSchema(StructType schema, RecordType recordType) {
    if (recordType == RecordType.ByteArray) {
      for (StructField f : schema.fields()) {
        if (!f.name().equals(RecordType.BYTE_ARRAY_COLUMN)
            || SparkTypes.elemOf(f.dataType()) == null
            || !SparkTypes.elemOf(f.dataType()).bytes()) {
          throw new IllegalArgumentException(
              "recordType ByteArray has one column '"
                  + RecordType.BYTE_ARRAY_COLUMN
                  + "' of type binary; got column '"
                  + f.name()
                  + "' of type "
                  + f.dataType().simpleString());
        }
      }
      return;
    }
    for (StructField f : schema.fields()) {
      DataType t = f.dataType();
      if (!SparkTypes.hasMapping(t, recordType)) {
        throw new IllegalArgumentException(
            "Column '"
                + f.name()
                + "' of type "
                + t.simpleString()
                + " cannot be read from a "
                + recordType
                + " record: supported types are "
                + SparkTypes.supportedTypes(recordType));
      }
    }
  }

  /** Decodes one record. */
  InternalRow decode(byte[] buf, int off, int len) {
    writer.reset();
    writer.zeroOutNullBytes();
    if (recordType == RecordType.ByteArray) {
      if (contextFields.length > 0) {
        writer.write(0, buf, off, len);
      }
      return writer.getRow();
    }
    if (recordType == RecordType.Example) {
      scanner.scanExample(buf, off, len);
    } else {
      scanner.scanSequenceExample(buf, off, len);
    }
    byte[] data = scanner.buffer(); // the record, or the scanner's copy with merged values
    for (int i = 0; i < contextFields.length; i++) {
      Field f = contextFields[i];
      int fo = scanner.featureOffset[i];
      if (fo < 0) {
        writer.setNullAt(f.ordinal);
      } else {
        f.write(writer, values.decode(data, fo, scanner.featureLength[i]));
      }
    }
    for (int i = 0; i < listFields.length; i++) {
      Field f = listFields[i];
      int lo = scanner.listOffset[i];
      if (lo < 0) {
        writer.setNullAt(f.ordinal);
      } else {
        ((ListField) f).writeList(writer, data, lo, scanner.listLength[i]);
      }
    }
    return writer.getRow();
  }

  private Field fieldFor(int ordinal, String name, DataType t) {
    Elem e = SparkTypes.elemOf(t);
    if (e != null) {
      return new ScalarField(ordinal, name, t, e);
    }
    if (SparkTypes.isMlVector(t)) {
      return new VectorField(ordinal, name, t);
    }
    DataType inner = ((ArrayType) t).elementType();
    if (inner instanceof ArrayType) {
      return new ListField(ordinal, name, t, SparkTypes.elemOf(((ArrayType) inner).elementType()));
    }
    return new ArrayField(ordinal, name, t, SparkTypes.elemOf(inner));
  }

  /** One column: how a decoded feature becomes its value. */
  private abstract static class Field {
    final int ordinal;
    final String name;
    final DataType type;
    final Elem elem;
    final int precision;
    final int scale;

    Field(int ordinal, String name, DataType type, Elem elem) {
      this.ordinal = ordinal;
      this.name = name;
      this.type = type;
      this.elem = elem;
      DataType scalar = type;
      while (scalar instanceof ArrayType) {
        scalar = ((ArrayType) scalar).elementType();
      }
      this.precision = scalar instanceof DecimalType ? ((DecimalType) scalar).precision() : 0;
      this.scale = scalar instanceof DecimalType ? ((DecimalType) scalar).scale() : 0;
    }

    abstract void write(UnsafeRowWriter w, FeatureValues v);

    void checkKind(FeatureValues v) {
      SparkTypes.checkKind(v, elem, name, type);
    }

    /** Writes value {@code i} of {@code v} as element {@code ord} of {@code w}. */
    final void writeElem(UnsafeWriter w, int ord, FeatureValues v, int i) {
      switch (elem) {
        case LONG:
          w.write(ord, v.longAt(i));
          break;
        case INT:
          w.write(ord, (int) SparkTypes.checkRange(v.longAt(i), elem, name, type));
          break;
        case SHORT:
          w.write(ord, (short) SparkTypes.checkRange(v.longAt(i), elem, name, type));
          break;
        case BYTE:
          w.write(ord, (byte) SparkTypes.checkRange(v.longAt(i), elem, name, type));
          break;
        case BOOLEAN:
          w.write(ord, v.longAt(i) != 0);
          break;
        case FLOAT:
          w.write(ord, v.kind() == FeatureKind.INT64 ? (float) v.longAt(i) : v.floatAt(i));
          break;
        case DOUBLE:
          w.write(
              ord, v.kind() == FeatureKind.INT64 ? (double) v.longAt(i) : (double) v.floatAt(i));
          break;
        case DECIMAL:
          Decimal d = new Decimal();
          if (v.kind() == FeatureKind.INT64) {
            d.set(v.longAt(i));
          } else {
            float x = v.floatAt(i);
            if (!Float.isFinite(x)) {
              throw new MalformedRecordException(
                  "feature '" + name + "' value " + x + " cannot be a " + type.simpleString());
            }
            d.set(new BigDecimal(new java.math.BigDecimal(Float.toString(x))));
          }
          if (!d.changePrecision(precision, scale)) {
            throw new MalformedRecordException(
                "feature '" + name + "' value " + d + " does not fit " + type.simpleString());
          }
          w.write(ord, d, precision, scale);
          break;
        default: // STRING, BINARY: raw bytes
          w.write(ord, v.bytesBuffer(), v.bytesOffset(i), v.bytesLength(i));
      }
    }

    /** Writes all values of {@code v} as an array at the writer's cursor. */
    final void writeArray(UnsafeArrayWriter aw, FeatureValues v) {
      checkKind(v);
      int n = v.count();
      aw.initialize(n);
      if (elem == Elem.FLOAT && v.kind() == FeatureKind.FLOAT) {
        // One copy of the whole list: the data region ends at the cursor.
        long dataStart = aw.cursor() - roundToWord(4L * n);
        Platform.copyMemory(
            v.floatArray(), Platform.FLOAT_ARRAY_OFFSET, aw.getBuffer(), dataStart, 4L * n);
      } else if (elem == Elem.LONG) {
        long dataStart = aw.cursor() - 8L * n;
        Platform.copyMemory(
            v.longArray(), Platform.LONG_ARRAY_OFFSET, aw.getBuffer(), dataStart, 8L * n);
      } else {
        for (int i = 0; i < n; i++) {
          writeElem(aw, i, v, i);
        }
      }
    }

    private static long roundToWord(long bytes) {
      return (bytes + 7) & ~7L;
    }
  }

  private static final class ScalarField extends Field {
    ScalarField(int ordinal, String name, DataType type, Elem elem) {
      super(ordinal, name, type, elem);
    }

    @Override
    void write(UnsafeRowWriter w, FeatureValues v) {
      checkKind(v);
      int n = v.count();
      if (n == 0) {
        w.setNullAt(ordinal);
      } else if (n == 1) {
        writeElem(w, ordinal, v, 0);
      } else {
        throw new MalformedRecordException(
            "feature '"
                + name
                + "' has "
                + n
                + " values but column '"
                + name
                + "' is a scalar "
                + type.simpleString()
                + ": declare it array<"
                + type.simpleString()
                + ">");
      }
    }
  }

  private static final class ArrayField extends Field {
    private UnsafeArrayWriter aw;

    ArrayField(int ordinal, String name, DataType type, Elem elem) {
      super(ordinal, name, type, elem);
    }

    @Override
    void write(UnsafeRowWriter w, FeatureValues v) {
      if (aw == null) {
        aw = new UnsafeArrayWriter(w, elem.size);
      }
      int prev = w.cursor();
      writeArray(aw, v);
      w.setOffsetAndSizeFromPreviousCursor(ordinal, prev);
    }
  }

  /** A SequenceExample feature list: array of arrays. */
  private final class ListField extends Field {
    private UnsafeArrayWriter outer;
    private UnsafeArrayWriter inner;

    ListField(int ordinal, String name, DataType type, Elem elem) {
      super(ordinal, name, type, elem);
    }

    @Override
    void write(UnsafeRowWriter w, FeatureValues v) {
      throw new IllegalStateException("feature lists are written with writeList");
    }

    void writeList(UnsafeRowWriter w, byte[] buf, int off, int len) {
      if (outer == null) {
        outer = new UnsafeArrayWriter(w, 8);
        inner = new UnsafeArrayWriter(w, elem.size);
      }
      int prev = w.cursor();
      int n = scanner.countInList(buf, off, len);
      outer.initialize(n);
      scanner.forEachInList(
          buf,
          off,
          len,
          (j, b, fo, fl) -> {
            int prevInner = w.cursor();
            writeArray(inner, values.decode(b, fo, fl));
            outer.setOffsetAndSizeFromPreviousCursor(j, prevInner);
          });
      w.setOffsetAndSizeFromPreviousCursor(ordinal, prev);
    }
  }

  /** An ml Vector (dense), from a float or int64 list. */
  private static final class VectorField extends Field {
    private UnsafeRowWriter struct;
    private UnsafeArrayWriter valuesWriter;

    VectorField(int ordinal, String name, DataType type) {
      super(ordinal, name, type, Elem.DOUBLE);
    }

    @Override
    void write(UnsafeRowWriter w, FeatureValues v) {
      checkKind(v);
      if (struct == null) {
        struct = new UnsafeRowWriter(w, 4);
        valuesWriter = new UnsafeArrayWriter(struct, 8);
      }
      int prev = w.cursor();
      struct.resetRowWriter();
      struct.write(0, (byte) 1); // dense
      struct.setNullAt(1);
      struct.setNullAt(2);
      int prevValues = w.cursor();
      int n = v.count();
      valuesWriter.initialize(n);
      for (int i = 0; i < n; i++) {
        writeElem(valuesWriter, i, v, i);
      }
      struct.setOffsetAndSizeFromPreviousCursor(3, prevValues);
      w.setOffsetAndSizeFromPreviousCursor(ordinal, prev);
    }
  }
}
