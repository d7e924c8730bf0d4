package dev.sparktrainer.data;

import dev.sparktrainer.data.DatasetSpec.Encoding;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongPredicate;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.convert.GroupRecordConverter;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.io.ColumnIOFactory;
import org.apache.parquet.io.RecordReader;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType;
import org.apache.parquet.schema.Type;

/**
 * Streams a Parquet file a row group at a time, reading only the spec's columns. Columns may be
 * numbers, lists of numbers (any list encoding), Spark ML vectors (dense or sparse), or binary
 * encoded images.
 */
final class ParquetStream implements RecordStream {
  private final String file;
  private final ArrayPool.Taker pool;
  private final ParquetFileReader reader;
  private final MessageType fileSchema;
  private final MessageType projection;
  private final DatasetSpec spec;
  private final LongPredicate owned;
  private final int[] columnIndex; // features, then the label, in the projection
  private RecordReader<Group> rows;
  private long rowsLeftInGroup;
  private long index;

  ParquetStream(Split split, DatasetSpec spec, LongPredicate owned, Configuration conf, ArrayPool pool)
      throws IOException {
    this.pool = pool.taker();
    this.file = split.path();
    this.spec = spec;
    this.owned = owned;
    this.reader = ParquetFileReader.open(HadoopInputFile.fromPath(new Path(split.path()), conf));
    try {
      this.fileSchema = reader.getFooter().getFileMetaData().getSchema();
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
          throw new IOException("Parquet file " + file + " has no column '" + n + "' (columns: "
              + fileSchema.getFields().stream().map(Type::getName).toList() + ")");
        }
        if (fields.stream().noneMatch(t -> t.getName().equals(n))) {
          fields.add(fileSchema.getType(n));
        }
      }
      this.projection = new MessageType(fileSchema.getName(), fields);
      this.columnIndex = new int[names.size()];
      for (int i = 0; i < names.size(); i++) {
        columnIndex[i] = projection.getFieldIndex(names.get(i));
      }
      reader.setRequestedSchema(projection);
    } catch (IOException | RuntimeException e) {
      reader.close();
      throw e;
    }
  }

  @Override
  public Record next() throws IOException {
    while (true) {
      if (rowsLeftInGroup == 0) {
        PageReadStore pages = reader.readNextRowGroup();
        if (pages == null) {
          return null;
        }
        rowsLeftInGroup = pages.getRowCount();
        rows = new ColumnIOFactory().getColumnIO(projection, fileSchema)
            .getRecordReader(pages, new GroupRecordConverter(projection));
      }
      Group g = rows.read();
      rowsLeftInGroup--;
      long j = index++;
      if (owned.test(j)) {
        try {
          return decode(g);
        } catch (IOException | RuntimeException e) {
          throw new IOException("Parquet file " + file + ", row " + j + ": " + e.getMessage(), e);
        }
      }
    }
  }

  private Record decode(Group g) throws IOException {
    float[] out = pool.take();
    int pos = 0;
    List<DatasetSpec.Feature> features = spec.features();
    for (int c = 0; c < features.size(); c++) {
      DatasetSpec.Feature f = features.get(c);
      int field = columnIndex[c];
      if (g.getFieldRepetitionCount(field) == 0) {
        throw new IOException("column '" + f.name() + "' is null");
      }
      if (f.encoding() == Encoding.IMAGE) {
        byte[] b = g.getBinary(field, 0).getBytes();
        long[] s = f.shape();
        Images.decode(b, 0, b.length, (int) s[0], (int) s[1], (int) s[2], out, pos);
        pos += f.size();
        continue;
      }
      FloatSink sink = new FloatSink(out, pos, f.size());
      flatten(g, field, projection.getType(field), sink);
      if (sink.count != f.size()) {
        throw new IOException("column '" + f.name() + "' has " + sink.count + " values, expected "
            + f.size() + " for shape " + Arrays.toString(f.shape()));
      }
      pos += f.size();
    }
    double label = 0;
    if (spec.label() != null) {
      int field = columnIndex[features.size()];
      if (g.getFieldRepetitionCount(field) != 1) {
        throw new IOException("label '" + spec.label() + "' is null");
      }
      label = number(g, field, projection.getType(field).asPrimitiveType(), 0);
    }
    return new Record(out, label);
  }

  /** Appends every number under {@code g}'s field {@code field}, in order. */
  private static void flatten(Group g, int field, Type type, FloatSink sink) throws IOException {
    int reps = g.getFieldRepetitionCount(field);
    for (int i = 0; i < reps; i++) {
      if (type.isPrimitive()) {
        sink.add((float) number(g, field, type.asPrimitiveType(), i));
        continue;
      }
      Group child = g.getGroup(field, i);
      GroupType gt = type.asGroupType();
      if (isMlVector(gt)) {
        vector(child, gt, sink);
      } else {
        for (int k = 0; k < gt.getFieldCount(); k++) {
          flatten(child, k, gt.getType(k), sink);
        }
      }
    }
  }

  private static boolean isMlVector(GroupType t) {
    return t.getFieldCount() == 4 && t.containsField("type") && t.containsField("size")
        && t.containsField("indices") && t.containsField("values");
  }

  /** Spark ML's VectorUDT: type 1 dense (values), 0 sparse (size, indices, values). */
  private static void vector(Group v, GroupType t, FloatSink sink) throws IOException {
    int type = v.getInteger(t.getFieldIndex("type"), 0);
    List<Float> values = new ArrayList<>();
    FloatSink valueSink = new FloatSink(null, 0, Integer.MAX_VALUE) {
      @Override
      void add(float x) {
        values.add(x);
        count++;
      }
    };
    int vi = t.getFieldIndex("values");
    if (v.getFieldRepetitionCount(vi) > 0) {
      flatten(v, vi, t.getType(vi), valueSink);
    }
    if (type == 1) {
      for (float x : values) {
        sink.add(x);
      }
      return;
    }
    int size = v.getInteger(t.getFieldIndex("size"), 0);
    List<Float> idx = new ArrayList<>();
    FloatSink idxSink = new FloatSink(null, 0, Integer.MAX_VALUE) {
      @Override
      void add(float x) {
        idx.add(x);
        count++;
      }
    };
    int ii = t.getFieldIndex("indices");
    if (v.getFieldRepetitionCount(ii) > 0) {
      flatten(v, ii, t.getType(ii), idxSink);
    }
    float[] dense = new float[size];
    for (int k = 0; k < idx.size(); k++) {
      dense[(int) (float) idx.get(k)] = values.get(k);
    }
    for (float x : dense) {
      sink.add(x);
    }
  }

  private static double number(Group g, int field, PrimitiveType t, int i) throws IOException {
    switch (t.getPrimitiveTypeName()) {
      case FLOAT:
        return g.getFloat(field, i);
      case DOUBLE:
        return g.getDouble(field, i);
      case INT32:
        return g.getInteger(field, i);
      case INT64:
        return g.getLong(field, i);
      case BOOLEAN:
        return g.getBoolean(field, i) ? 1 : 0;
      default:
        throw new IOException("column '" + t.getName() + "' of type " + t.getPrimitiveTypeName()
            + " is not a number");
    }
  }

  /** Collects floats into a record, refusing more than expected. */
  private static class FloatSink {
    final float[] out;
    final int off;
    final int max;
    int count;

    FloatSink(float[] out, int off, int max) {
      this.out = out;
      this.off = off;
      this.max = max;
    }

    void add(float x) throws IOException {
      if (count >= max) {
        throw new IOException("more values than the shape holds (" + max + ")");
      }
      out[off + count++] = x;
    }
  }

  @Override
  public void close() throws IOException {
    reader.close();
  }
}
