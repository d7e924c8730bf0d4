package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.util.Locale;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.UserDefinedType;

/** Which Spark types map to TFRecord features, in one place for reads and writes. */
final class SparkTypes {
  private SparkTypes() {}

  /** Spark ML's vector type, recognised by name so spark-mllib stays optional. */
  static boolean isMlVector(DataType t) {
    return t instanceof UserDefinedType
        && t.getClass().getName().equals("org.apache.spark.ml.linalg.VectorUDT");
  }

  /** The element kinds a feature value can become. */
  enum Elem {
    LONG(8),
    INT(4),
    SHORT(2),
    BYTE(1),
    BOOLEAN(1),
    FLOAT(4),
    DOUBLE(8),
    DECIMAL(8),
    STRING(8),
    BINARY(8);

    /** Element size in an UnsafeArrayData. */
    final int size;

    Elem(int size) {
      this.size = size;
    }

    boolean integral() {
      return this == LONG || this == INT || this == SHORT || this == BYTE || this == BOOLEAN;
    }

    boolean floating() {
      return this == FLOAT || this == DOUBLE || this == DECIMAL;
    }

    boolean bytes() {
      return this == STRING || this == BINARY;
    }

    /** int, smallint or tinyint: int64 values must fit. */
    boolean narrowInt() {
      return this == INT || this == SHORT || this == BYTE;
    }
  }

  /** Whether a feature of kind {@code v.kind()} can fill a column of element kind {@code elem}. */
  static void checkKind(FeatureValues v, Elem elem, String name, DataType type) {
    FeatureKind k = v.kind();
    if (k == null) {
      return;
    }
    boolean ok =
        (k == FeatureKind.INT64 && (elem.integral() || elem.floating()))
            || (k == FeatureKind.FLOAT && elem.floating())
            || (k == FeatureKind.BYTES && elem.bytes());
    if (!ok) {
      throw new MalformedRecordException(
          "feature '"
              + name
              + "' is "
              + k.name().toLowerCase(Locale.ROOT)
              + " but column '"
              + name
              + "' is "
              + type.simpleString());
    }
  }

  /** An int64 value for an int, smallint or tinyint column; out of range is a malformed record. */
  static long checkRange(long value, Elem elem, String name, DataType type) {
    long min;
    long max;
    switch (elem) {
      case INT:
        min = Integer.MIN_VALUE;
        max = Integer.MAX_VALUE;
        break;
      case SHORT:
        min = Short.MIN_VALUE;
        max = Short.MAX_VALUE;
        break;
      case BYTE:
        min = Byte.MIN_VALUE;
        max = Byte.MAX_VALUE;
        break;
      default:
        return value;
    }
    if (value < min || value > max) {
      throw new MalformedRecordException(
          "feature '"
              + name
              + "' value "
              + value
              + " is out of range for column type "
              + type.simpleString());
    }
    return value;
  }

  /** Whether a column of type {@code t} has a TFRecord mapping in records of {@code recordType}. */
  static boolean hasMapping(DataType t, RecordType recordType) {
    return elemOf(t) != null
        || isMlVector(t)
        || (t instanceof ArrayType && elemOf(((ArrayType) t).elementType()) != null)
        || (recordType == RecordType.SequenceExample && isNestedArray(t));
  }

  /** The element kind of a scalar Spark type, or null if it has no TFRecord mapping. */
  static Elem elemOf(DataType t) {
    if (t == DataTypes.LongType) {
      return Elem.LONG;
    } else if (t == DataTypes.IntegerType) {
      return Elem.INT;
    } else if (t == DataTypes.ShortType) {
      return Elem.SHORT;
    } else if (t == DataTypes.ByteType) {
      return Elem.BYTE;
    } else if (t == DataTypes.BooleanType) {
      return Elem.BOOLEAN;
    } else if (t == DataTypes.FloatType) {
      return Elem.FLOAT;
    } else if (t == DataTypes.DoubleType) {
      return Elem.DOUBLE;
    } else if (t instanceof DecimalType) {
      return Elem.DECIMAL;
    } else if (t == DataTypes.StringType || t instanceof StringType) {
      return Elem.STRING;
    } else if (t == DataTypes.BinaryType) {
      return Elem.BINARY;
    }
    return null;
  }

  /** array&lt;array&lt;scalar&gt;&gt;: a SequenceExample feature list. */
  static boolean isNestedArray(DataType t) {
    return t instanceof ArrayType
        && ((ArrayType) t).elementType() instanceof ArrayType
        && elemOf(((ArrayType) ((ArrayType) t).elementType()).elementType()) != null;
  }

  static String supportedTypes(RecordType recordType) {
    String base =
        "bigint, int, smallint, tinyint, boolean, float, double, decimal, string, binary,"
            + " arrays of those, or an ml Vector";
    return recordType == RecordType.SequenceExample
        ? base + " (context), or arrays of arrays of those (feature lists)"
        : base;
  }
}
