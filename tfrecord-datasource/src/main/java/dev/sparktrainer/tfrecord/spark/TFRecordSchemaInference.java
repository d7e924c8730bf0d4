package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Infers a schema from the first {@code schemaSampleSize} records of the files, in listing order.
 *
 * <p>Rules: a feature with exactly one value in every sampled record that has it is a scalar
 * column, otherwise an array; int64 → bigint, float → float, bytes → string (binary with {@code
 * bytesAsBinary}); int64 and float mixed → float; bytes mixed with numbers is an error asking for a
 * schema; a feature only ever seen empty (no kind) → array of the bytes type. SequenceExample
 * feature lists are arrays of arrays. Columns are sorted by name.
 */
final class TFRecordSchemaInference {
  private TFRecordSchemaInference() {}

  /** A ByteArray file's schema: one binary column. */
  static StructType byteArraySchema() {
    return new StructType().add(RecordType.BYTE_ARRAY_COLUMN, DataTypes.BinaryType, false);
  }

  static Optional<StructType> infer(
      List<FileStatus> files, Configuration conf, TFRecordOptions options) throws IOException {
    if (options.recordType() == RecordType.ByteArray) {
      return Optional.of(byteArraySchema());
    }
    Map<String, Stats> context = new TreeMap<>();
    Map<String, Stats> lists = new TreeMap<>();
    int sampled = 0;
    outer:
    for (FileStatus status : files) {
      try (TFRecordReader reader =
          TFRecordFileOpener.open(status.getPath(), 0, Long.MAX_VALUE, conf, options)) {
        while (reader.next()) {
          try {
            if (options.recordType() == RecordType.Example) {
              observe(
                  context,
                  Examples.parseExample(reader.buffer(), reader.dataOffset(), reader.dataLength()));
            } else {
              Examples.Sequence s =
                  Examples.parseSequenceExample(
                      reader.buffer(), reader.dataOffset(), reader.dataLength());
              observe(context, s.context);
              for (Map.Entry<String, List<Feature>> e : s.featureLists.entrySet()) {
                Stats st = lists.computeIfAbsent(e.getKey(), Stats::new);
                for (Feature f : e.getValue()) {
                  st.observe(f);
                }
              }
            }
          } catch (MalformedRecordException e) {
            if (options.mode() == CorruptRecordPolicy.FAILFAST) {
              throw new TFRecordCorruptException(
                  status.getPath().toString(),
                  reader.recordOffset(),
                  "not a valid " + options.recordType() + ": " + e.getMessage());
            }
          }
          if (++sampled >= options.schemaSampleSize()) {
            break outer;
          }
        }
      }
    }
    if (sampled == 0) {
      return Optional.empty();
    }
    List<StructField> fields = new ArrayList<>();
    for (Stats s : context.values()) {
      if (lists.containsKey(s.name)) {
        throw new IllegalArgumentException(
            "Feature '"
                + s.name
                + "' is both a context feature and a feature list: supply a schema");
      }
      DataType t = s.elementType(options.bytesAsBinary());
      fields.add(
          DataTypes.createStructField(s.name, s.scalar() ? t : DataTypes.createArrayType(t), true));
    }
    for (Stats s : lists.values()) {
      DataType t = s.elementType(options.bytesAsBinary());
      fields.add(
          DataTypes.createStructField(
              s.name, DataTypes.createArrayType(DataTypes.createArrayType(t)), true));
    }
    fields.sort((a, b) -> a.name().compareTo(b.name()));
    return Optional.of(DataTypes.createStructType(fields));
  }

  private static void observe(Map<String, Stats> stats, Map<String, Feature> features) {
    for (Map.Entry<String, Feature> e : features.entrySet()) {
      stats.computeIfAbsent(e.getKey(), Stats::new).observe(e.getValue());
    }
  }

  private static final class Stats {
    final String name;
    FeatureKind kind;
    boolean allSingle = true;

    Stats(String name) {
      this.name = name;
    }

    void observe(Feature f) {
      if (f.size() != 1) {
        allSingle = false;
      }
      FeatureKind k = f.kind();
      if (k == null || k == kind) {
        return;
      }
      if (kind == null) {
        kind = k;
      } else if (k != FeatureKind.BYTES && kind != FeatureKind.BYTES) {
        kind = FeatureKind.FLOAT; // int64 and float mixed
      } else {
        throw new IllegalArgumentException(
            "Feature '"
                + name
                + "' holds bytes in some records and numbers in others: supply a schema");
      }
    }

    boolean scalar() {
      return allSingle && kind != null;
    }

    DataType elementType(boolean bytesAsBinary) {
      if (kind == FeatureKind.INT64) {
        return DataTypes.LongType;
      }
      if (kind == FeatureKind.FLOAT) {
        return DataTypes.FloatType;
      }
      return bytesAsBinary ? DataTypes.BinaryType : DataTypes.StringType;
    }
  }
}
