package dev.sparktrainer.data;

import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.ColumnReadStore;
import org.apache.parquet.column.ColumnReader;
import org.apache.parquet.column.page.PageReadStore;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.io.api.Converter;
import org.apache.parquet.io.api.GroupConverter;
import org.apache.parquet.io.api.PrimitiveConverter;
import org.apache.parquet.schema.GroupType;
import org.apache.parquet.schema.LogicalTypeAnnotation;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;
import org.apache.parquet.schema.Type;

/**
 * Decoders of one Parquet column each, reading a row group's values and repetition/definition
 * levels straight from the pages (no record assembly) into a {@link FloatSink}, with no object per
 * value: number leaves through {@link BulkColumnReader} (a page decoded at a time, a row's values
 * moved in runs), binary and boolean leaves through parquet-mr's column readers. A feature column
 * is one of
 *
 * <ul>
 *   <li>a number, or any list of numbers ({@link Leaf}: one leaf column, whatever its list encoding
 *       — 3-level {@code LIST}, 2-level legacy {@code array}, bare {@code repeated} — since the
 *       levels say where rows begin and which entries are values, empty lists or nulls);
 *   <li>a Spark ML vector ({@link Vector}: the VectorUDT struct's four leaf columns, dense or
 *       sparse);
 *   <li>an encoded image ({@link Image}: one binary leaf);
 *   <li>a struct of such columns without lists (its leaves one after the other).
 * </ul>
 *
 * <p>Why this file is long: it is the one map from the Parquet shapes a feature or label column may
 * have to the floats of a {@link FloatSink}, and most of it is {@link Leaf}, the reader of one leaf
 * column through Parquet's repetition and definition levels (which level means an empty list, a
 * null column or a null element; where a row ends; DECIMAL values; the bulk or parquet-mr reader),
 * on which the other kinds ({@link Vector}, {@link Image}, {@link Struct}) are built. The kinds are
 * nested beside the factory that picks among them and the {@link BadValue} they all throw, so that
 * one file shows which shapes are accepted and how each is read.
 */
final class ParquetColumns {
  private ParquetColumns() {}

  /**
   * A value the spec cannot take: a null, a wrong count, a bad vector. Unchecked, for speed; its
   * caller names file, row and column.
   */
  static final class BadValue extends RuntimeException {
    private static final long serialVersionUID = 1L;

    BadValue(String message) {
      super(message, null, false, false);
    }
  }

  /** One feature's decoder. */
  interface Column {
    /** Binds to a new row group: its pages, and parquet-mr's column readers over them. */
    void start(PageReadStore pages, ColumnReadStore store);

    /** Decodes the current row into {@code sink} and moves to the next row. */
    void read(FloatSink sink);

    /** Moves to the next row without decoding the values. */
    void skip();

    /**
     * After the row group's last row: fails if a column chunk holds values beyond it (a row count
     * cut short, not rows to drop).
     */
    void end();
  }

  /** Whether {@code t} is Spark ML's VectorUDT struct (type, size, indices, values). */
  static boolean isMlVector(Type t) {
    if (t.isPrimitive()) {
      return false;
    }
    GroupType g = t.asGroupType();
    return g.getFieldCount() == 4
        && g.containsField("type")
        && g.containsField("size")
        && g.containsField("indices")
        && g.containsField("values");
  }

  /**
   * The decoder of the top-level field {@code name} of {@code projection}.
   *
   * @throws IllegalArgumentException naming the column if its type is not one the pipeline reads
   */
  static Column forFeature(MessageType projection, String name, boolean image) {
    Type t = projection.getType(name);
    List<ColumnDescriptor> leaves = leaves(projection, name);
    if (image) {
      if (leaves.size() != 1
          || leaves.get(0).getPrimitiveType().getPrimitiveTypeName() != PrimitiveTypeName.BINARY
          || leaves.get(0).getMaxRepetitionLevel() > 0) {
        throw new IllegalArgumentException(
            "column '" + name + "' is " + t + ": an image column must be binary");
      }
      return new Image(new Leaf(projection, leaves.get(0), name));
    }
    if (isMlVector(t)) {
      return new Vector(projection, name);
    }
    if (leaves.size() == 1) {
      return new Leaf(projection, leaves.get(0), name);
    }
    // A struct of numbers: its leaves one after the other is the field order the old reader used,
    // as long as nothing in it repeats (a list of structs would interleave fields per element).
    List<Column> parts = new ArrayList<>();
    for (ColumnDescriptor d : leaves) {
      if (d.getMaxRepetitionLevel() > 0) {
        throw new IllegalArgumentException(
            "column '"
                + name
                + "' is "
                + t
                + ": lists of structs are not supported (numbers, lists of numbers, ML vectors or images)");
      }
      parts.add(new Leaf(projection, d, name));
    }
    return new Struct(parts);
  }

  /**
   * The scale of a DECIMAL leaf (its values are unscaled integers: 1234 at scale 2 is 12.34), else
   * 0.
   */
  static int decimalScale(ColumnDescriptor desc) {
    LogicalTypeAnnotation a = desc.getPrimitiveType().getLogicalTypeAnnotation();
    return a instanceof LogicalTypeAnnotation.DecimalLogicalTypeAnnotation
        ? ((LogicalTypeAnnotation.DecimalLogicalTypeAnnotation) a).getScale()
        : 0;
  }

  /** Whether {@code desc} is a DECIMAL leaf. */
  static boolean isDecimal(ColumnDescriptor desc) {
    return desc.getPrimitiveType().getLogicalTypeAnnotation()
        instanceof LogicalTypeAnnotation.DecimalLogicalTypeAnnotation;
  }

  /** The leaf columns under top-level field {@code name}, in schema order. */
  static List<ColumnDescriptor> leaves(MessageType projection, String name) {
    List<ColumnDescriptor> out = new ArrayList<>();
    for (ColumnDescriptor d : projection.getColumns()) {
      if (d.getPath()[0].equals(name)) {
        out.add(d);
      }
    }
    return out;
  }

  /**
   * A converter tree of {@code schema}'s shape that is never called: column readers need one to
   * exist.
   */
  static GroupConverter unusedConverters(GroupType schema) {
    Converter[] children = new Converter[schema.getFieldCount()];
    for (int i = 0; i < children.length; i++) {
      Type t = schema.getType(i);
      children[i] =
          t.isPrimitive() ? new PrimitiveConverter() {} : unusedConverters(t.asGroupType());
    }
    return new GroupConverter() {
      @Override
      public Converter getConverter(int fieldIndex) {
        return children[fieldIndex];
      }

      @Override
      public void start() {}

      @Override
      public void end() {}
    };
  }

  /**
   * One leaf column: a number, or the numbers of a list at any depth, in any list encoding. A row
   * is the entries from one with repetition level 0 to the next; an entry below the maximum
   * definition level is no value: an empty list (fine: the count check decides), a null column, or
   * a null element (errors).
   */
  static final class Leaf implements Column {
    private static final byte EMPTY = 0;
    private static final byte NULL = 1;
    private static final byte NULL_ELEMENT = 2;

    private final ColumnDescriptor desc;
    private final String column;
    private final PrimitiveTypeName type;
    private final int maxDef;

    /**
     * Whether the column is a DECIMAL: its values are unscaled integers (INT32, INT64) or
     * big-endian two's complement bytes (fixed-length or plain binary) at {@link #scale}.
     */
    private final boolean decimal;

    private final int scale;

    /** What an entry of each definition level below the maximum means. */
    private final byte[] absent;

    private ColumnReader reader;

    /** {@link #reader} when it decodes in bulk, else null. */
    private BulkColumnReader bulk;

    private long left;

    /** The chunk's value count and the row group's row count, for messages. */
    private long total;

    private long rows;

    Leaf(MessageType schema, ColumnDescriptor desc, String column) {
      this(schema, desc, column, false);
    }

    /**
     * @param nullsAllowed whether a null inside the column is no value rather than an error
     */
    Leaf(MessageType schema, ColumnDescriptor desc, String column, boolean nullsAllowed) {
      this.desc = desc;
      this.column = column;
      this.type = desc.getPrimitiveType().getPrimitiveTypeName();
      this.maxDef = desc.getMaxDefinitionLevel();
      this.decimal = isDecimal(desc);
      this.scale = decimalScale(desc);
      this.absent = new byte[maxDef];
      // Walk the path: entry level d means the fields down to the one at level d are defined and
      // the
      // next non-required field is not. That field being repeated: an empty list; being the
      // top-level
      // column: a null column; else a null inside (an element, a struct field).
      Type t = schema;
      int level = 0;
      String[] path = desc.getPath();
      for (int i = 0; i < path.length; i++) {
        t = t.asGroupType().getType(path[i]);
        if (t.getRepetition() != Type.Repetition.REQUIRED) {
          absent[level] =
              t.getRepetition() == Type.Repetition.REPEATED || (nullsAllowed && i > 0)
                  ? EMPTY
                  : i == 0 ? NULL : NULL_ELEMENT;
          level++;
        }
      }
      if (!(decimal && type == PrimitiveTypeName.FIXED_LEN_BYTE_ARRAY)
          && type != PrimitiveTypeName.BINARY
          && type != PrimitiveTypeName.BOOLEAN
          && type != PrimitiveTypeName.INT32
          && type != PrimitiveTypeName.INT64
          && type != PrimitiveTypeName.FLOAT
          && type != PrimitiveTypeName.DOUBLE) {
        throw new IllegalArgumentException(
            "column '" + column + "' of type " + type + " is not a number");
      }
    }

    @Override
    public void start(PageReadStore pages, ColumnReadStore store) {
      // Numbers: a page at a time in bulk; binary and boolean leaves: parquet-mr's column reader.
      rows = pages.getRowCount();
      if (BulkColumnReader.supports(type)) {
        bulk = new BulkColumnReader(desc, pages.getPageReader(desc), rows);
        reader = bulk;
      } else {
        bulk = null;
        reader = store.getColumnReader(desc);
      }
      left = reader.getTotalValueCount();
      total = left;
    }

    /** Fails unless the chunk has an entry left for the row about to be read. */
    private void checkLeft() {
      if (left <= 0) {
        throw new BadValue(
            "column '"
                + String.join(".", desc.getPath())
                + "' has no value left: its chunk holds "
                + total
                + " values for the row group's "
                + rows
                + " rows");
      }
    }

    @Override
    public void end() {
      if (left > 0) {
        throw new BadValue(
            "column '"
                + String.join(".", desc.getPath())
                + "' holds "
                + left
                + " values beyond the row group's "
                + rows
                + " rows ("
                + total
                + " in all)");
      }
    }

    @Override
    public void read(FloatSink sink) {
      checkLeft();
      if (type == PrimitiveTypeName.BINARY && !decimal) {
        throw new BadValue(
            "column '" + column + "' is binary: declare it as an image, or give numbers");
      }
      if (bulk != null) {
        left -= bulk.readFloats(sink, this);
        return;
      }
      do {
        int d = reader.getCurrentDefinitionLevel();
        if (d == maxDef) {
          sink.add(number());
        } else {
          checkAbsent(d, sink.count);
        }
      } while (advance());
    }

    /**
     * Reads the row's values as ints (vector indices, type and size) into {@code into}; returns how
     * many.
     */
    int readInts(int[][] into) {
      checkLeft();
      int n = 0;
      do {
        int d = reader.getCurrentDefinitionLevel();
        if (d == maxDef) {
          if (n == into[0].length) {
            into[0] = Arrays.copyOf(into[0], Math.max(8, 2 * n));
          }
          into[0][n++] =
              type == PrimitiveTypeName.INT64
                  ? Math.toIntExact(reader.getLong())
                  : reader.getInteger();
        } else {
          checkAbsent(d, n);
        }
      } while (advance());
      return n;
    }

    /** Reads the row's numbers into {@code into[0]}, growing it; returns how many. */
    int readFloats(float[][] into) {
      return readFloats(into, false);
    }

    /**
     * As {@link #readFloats(float[][])}; {@code nullIsEmpty}: a null column is no values (a
     * sequence) rather than an error.
     */
    int readFloats(float[][] into, boolean nullIsEmpty) {
      checkLeft();
      int n = 0;
      do {
        int d = reader.getCurrentDefinitionLevel();
        if (d == maxDef) {
          if (n == into[0].length) {
            into[0] = Arrays.copyOf(into[0], Math.max(8, 2 * n));
          }
          into[0][n++] = number();
        } else if (!nullIsEmpty || absent[d] != NULL) {
          checkAbsent(d, n);
        }
      } while (advance());
      return n;
    }

    /** Whether the column holds integers (INT32 or INT64, not a DECIMAL): what int64 ids take. */
    boolean integers() {
      return !decimal && (type == PrimitiveTypeName.INT32 || type == PrimitiveTypeName.INT64);
    }

    /**
     * Reads the row's integers, exactly (INT32 widened), into {@code into[0]}, growing it; returns
     * how many. {@code nullIsEmpty}: a null column is no values (a sequence) rather than an error.
     * Only for {@link #integers()} columns.
     */
    int readLongs(long[][] into, boolean nullIsEmpty) {
      checkLeft();
      int n = 0;
      do {
        int d = reader.getCurrentDefinitionLevel();
        if (d == maxDef) {
          if (n == into[0].length) {
            into[0] = Arrays.copyOf(into[0], Math.max(8, 2 * n));
          }
          into[0][n++] = type == PrimitiveTypeName.INT64 ? reader.getLong() : reader.getInteger();
        } else if (!nullIsEmpty || absent[d] != NULL) {
          checkAbsent(d, n);
        }
      } while (advance());
      return n;
    }

    /** The leaf's type as a reader would name it: {@code FLOAT}, {@code INT64 DECIMAL(10,2)}. */
    String typeName() {
      LogicalTypeAnnotation a = desc.getPrimitiveType().getLogicalTypeAnnotation();
      return type + (a == null ? "" : " " + a);
    }

    /** The row's single binary value. */
    Binary binary() {
      checkLeft();
      int d = reader.getCurrentDefinitionLevel();
      Binary b = null;
      if (d == maxDef) {
        b = reader.getBinary();
      } else {
        checkAbsent(d, 0);
      }
      advance();
      if (b == null) {
        throw new BadValue("column '" + column + "' is empty");
      }
      return b;
    }

    @Override
    public void skip() {
      checkLeft();
      if (bulk != null) {
        left -= bulk.skipRow();
        return;
      }
      do {
        if (reader.getCurrentDefinitionLevel() == maxDef) {
          reader.skip();
        }
      } while (advance());
    }

    /** Consumes the current entry; true if the next one belongs to the same row. */
    private boolean advance() {
      reader.consume();
      return --left > 0 && reader.getCurrentRepetitionLevel() != 0;
    }

    /**
     * An entry below the maximum definition level at value {@code position}: fine if an empty list,
     * else throws.
     */
    void checkAbsent(int d, int position) {
      switch (absent[d]) {
        case EMPTY:
          return;
        case NULL:
          throw new BadValue("column '" + column + "' is null");
        default:
          throw new BadValue(
              "column '"
                  + column
                  + "' has a null at value "
                  + position
                  + " ("
                  + String.join(".", desc.getPath())
                  + ")");
      }
    }

    private float number() {
      if (decimal) {
        return type == PrimitiveTypeName.INT32 || type == PrimitiveTypeName.INT64
            ? reader.getFloat() // the bulk reader applies the scale itself
            : decimalBytes().floatValue();
      }
      switch (type) {
        case FLOAT:
          return reader.getFloat();
        case DOUBLE:
          return (float) reader.getDouble();
        case INT32:
          return reader.getInteger();
        case INT64:
          return reader.getLong();
        default:
          return reader.getBoolean() ? 1 : 0;
      }
    }

    /** The current DECIMAL value. */
    private double decimalValue() {
      return type == PrimitiveTypeName.INT32 || type == PrimitiveTypeName.INT64
          ? reader.getDouble() // the bulk reader applies the scale itself
          : decimalBytes().doubleValue();
    }

    /** The current value of a DECIMAL on bytes: big-endian two's complement, at {@link #scale}. */
    private BigDecimal decimalBytes() {
      byte[] b = reader.getBinary().getBytesUnsafe();
      if (b.length == 0) {
        throw new BadValue("column '" + column + "' holds a DECIMAL of no bytes");
      }
      return new BigDecimal(new BigInteger(b), scale);
    }

    /** The row's single number (a label): null is an error. */
    double scalar() {
      checkLeft();
      int d = reader.getCurrentDefinitionLevel();
      double v;
      if (d == maxDef) {
        v =
            decimal
                ? decimalValue()
                : type == PrimitiveTypeName.DOUBLE
                    ? reader.getDouble()
                    : type == PrimitiveTypeName.INT64 ? reader.getLong() : number();
      } else {
        advance();
        throw new BadValue(
            d < absent.length && absent[d] == EMPTY
                ? "column '" + column + "' is an empty list"
                : "column '" + column + "' is null");
      }
      if (advance()) {
        throw new BadValue("column '" + column + "' holds a list, not one number");
      }
      return v;
    }
  }

  /**
   * The decoder of a feature kept in a record's slots ({@link Slots}): int64 values of a fixed
   * shape, or a sequence (int64 ids or float32 values) of any length.
   *
   * @throws IllegalArgumentException naming the column, its type and what the feature needs
   */
  static Column forSlots(MessageType projection, DatasetSpec.Feature f) {
    String name = f.name();
    Type t = projection.getType(name);
    List<ColumnDescriptor> leaves = leaves(projection, name);
    boolean ids = f.type() == DatasetSpec.ValueType.INT64;
    String declared =
        f.sequence()
            ? (ids ? "a sequence of int64 ids (COL:ids)" : "a sequence (COL:seq)")
            : "int64";
    if (leaves.size() != 1 || isMlVector(t)) {
      throw new IllegalArgumentException(
          "column '"
              + name
              + "' is "
              + t
              + ", declared "
              + declared
              + ": expected one number or a list of numbers");
    }
    Leaf leaf = new Leaf(projection, leaves.get(0), name);
    if (ids && !leaf.integers()) {
      throw new IllegalArgumentException(
          "column '"
              + name
              + "' holds "
              + leaf.typeName()
              + " values, declared "
              + declared
              + ": expected INT32 or INT64 integers (declare a float column COL:SHAPE or COL:seq)");
    }
    if (!ids && leaf.type == PrimitiveTypeName.BINARY && !leaf.decimal) {
      throw new IllegalArgumentException(
          "column '" + name + "' is binary, declared " + declared + ": expected numbers");
    }
    return new Slotted(leaf, f);
  }

  /**
   * A column kept in a record's slots ({@link Slots}), values checked here: a fixed int64 shape
   * (exactly its count of values, each id in the vocabulary when it has one), or a sequence: its
   * length as stored (the batch counts what is cut beyond the maximum, as for TFRecord), then at
   * most {@code maxLength} values. A null sequence is empty (as a missing {@code
   * tf.io.VarLenFeature}); a null element, or a null fixed column, fails.
   */
  static final class Slotted implements Column {
    private final Leaf leaf;
    private final DatasetSpec.Feature feature;
    private final boolean ids;
    private final long[][] longs = {new long[16]};
    private final float[][] floats = {new float[16]};

    Slotted(Leaf leaf, DatasetSpec.Feature feature) {
      this.leaf = leaf;
      this.feature = feature;
      this.ids = feature.type() == DatasetSpec.ValueType.INT64;
    }

    @Override
    public void start(PageReadStore pages, ColumnReadStore store) {
      leaf.start(pages, store);
    }

    @Override
    public void read(FloatSink sink) {
      if (leaf.type == PrimitiveTypeName.BINARY && !leaf.decimal) {
        throw new BadValue("column '" + leaf.column + "' is binary: expected numbers");
      }
      if (!feature.sequence()) {
        int n = leaf.readLongs(longs, false);
        if (n != feature.values()) {
          throw new BadValue(
              "column '"
                  + leaf.column
                  + "' has "
                  + n
                  + " values, expected "
                  + feature.values()
                  + " for shape "
                  + Arrays.toString(feature.shape()));
        }
        putIds(sink, 0, n);
      } else {
        int n = ids ? leaf.readLongs(longs, true) : leaf.readFloats(floats, true);
        sink.putInt(0, n);
        int m = Math.min(n, feature.maxLength());
        if (ids) {
          putIds(sink, 1, m);
        } else {
          float[] v = floats[0];
          for (int i = 0; i < m; i++) {
            sink.set(1 + i, v[i]);
          }
        }
      }
      sink.markFull();
    }

    private void putIds(FloatSink sink, int at, int n) {
      long[] v = longs[0];
      long vocab = feature.vocabSize();
      for (int i = 0; i < n; i++) {
        if (vocab > 0 && (v[i] < 0 || v[i] >= vocab)) {
          throw new BadValue(
              "column '"
                  + leaf.column
                  + "' value "
                  + i
                  + " is "
                  + v[i]
                  + ": outside the vocabulary [0, "
                  + vocab
                  + ")");
        }
        sink.putLong(at + 2 * i, v[i]);
      }
    }

    @Override
    public void skip() {
      leaf.skip();
    }

    @Override
    public void end() {
      leaf.end();
    }
  }

  /** A label column: one number per row. */
  static Leaf forLabel(MessageType projection, String name) {
    List<ColumnDescriptor> leaves = leaves(projection, name);
    if (leaves.size() != 1
        || (leaves.get(0).getPrimitiveType().getPrimitiveTypeName() == PrimitiveTypeName.BINARY
            && !isDecimal(leaves.get(0)))) {
      throw new IllegalArgumentException(
          "label column '"
              + name
              + "' is "
              + projection.getType(name)
              + ": a label must be one number");
    }
    return new Leaf(projection, leaves.get(0), name);
  }

  /** An encoded image in a binary column, decoded into HWC floats. */
  static final class Image implements Column {
    private final Leaf leaf;
    private int height;
    private int width;
    private int channels;
    private float[] scratch = new float[0];
    private Images images = new Images(null);

    Image(Leaf leaf) {
      this.leaf = leaf;
    }

    /** Whether the images go out as bytes, four to a float slot ({@code Feature.bytes()}). */
    private boolean packed;

    /**
     * The column's declared shape, the decoder its images go through, and whether they go out as
     * bytes ({@link DatasetSpec.Feature#bytes()}: {@code ceil(H * W * C / 4)} slots of raw bits).
     */
    void shape(long[] s, Images decoder, boolean bytes) {
      this.images = decoder;
      height = (int) s[0];
      width = (int) s[1];
      channels = (int) s[2];
      packed = bytes;
      int n = height * width * channels;
      scratch = new float[bytes ? (n + 3) / 4 : n];
    }

    @Override
    public void start(PageReadStore pages, ColumnReadStore store) {
      leaf.start(pages, store);
    }

    @Override
    public void read(FloatSink sink) {
      Binary b = leaf.binary();
      byte[] bytes = b.getBytesUnsafe();
      try {
        if (packed) {
          images.decodeImageBytes(bytes, 0, bytes.length, height, width, channels, scratch, 0);
        } else {
          images.decodeImage(bytes, 0, bytes.length, height, width, channels, scratch, 0);
        }
      } catch (IOException e) {
        throw new BadValue("column '" + leaf.column + "': " + e.getMessage());
      }
      sink.addAll(scratch, 0, scratch.length);
    }

    @Override
    public void skip() {
      leaf.skip();
    }

    @Override
    public void end() {
      leaf.end();
    }
  }

  /**
   * Spark ML's VectorUDT: {@code type} 1 dense ({@code values}), 0 sparse ({@code size}, {@code
   * indices}, {@code values}).
   */
  static final class Vector implements Column {
    private final String column;
    private final Leaf type;
    private final Leaf size;
    private final Leaf indices;
    private final Leaf values;
    private final int[][] ints = {new int[8]};
    private final float[][] floats = {new float[8]};

    Vector(MessageType projection, String name) {
      this.column = name;
      this.type = new Leaf(projection, leaf(projection, name, "type"), name + ".type");
      // A dense vector has no size and no indices (nulls); the counts are checked below.
      this.size = new Leaf(projection, leaf(projection, name, "size"), name + ".size", true);
      this.indices =
          new Leaf(projection, leaf(projection, name, "indices"), name + ".indices", true);
      this.values = new Leaf(projection, leaf(projection, name, "values"), name + ".values", true);
    }

    private static ColumnDescriptor leaf(MessageType projection, String name, String field) {
      for (ColumnDescriptor d : projection.getColumns()) {
        if (d.getPath()[0].equals(name) && d.getPath()[1].equals(field)) {
          return d;
        }
      }
      throw new IllegalArgumentException(
          "vector column '" + name + "' has no leaf '" + field + "'");
    }

    @Override
    public void start(PageReadStore pages, ColumnReadStore store) {
      type.start(pages, store);
      size.start(pages, store);
      indices.start(pages, store);
      values.start(pages, store);
    }

    @Override
    public void read(FloatSink sink) {
      int t;
      try {
        t = (int) type.scalar();
      } catch (BadValue e) {
        throw new BadValue(
            "column '" + column + "' is null"); // the struct, and so its type, is null
      }
      int n = ints(size);
      int dim = n == 0 ? -1 : ints[0][0];
      int nIdx = ints(indices);
      int nVal = values.readFloats(floats);
      if (t == 1) {
        sink.addAll(floats[0], 0, nVal);
        return;
      }
      if (t != 0) {
        throw new BadValue(
            "column '" + column + "' is a vector of unknown type " + t + " (0 sparse, 1 dense)");
      }
      if (dim < 0 || nIdx != nVal) {
        throw new BadValue(
            "column '"
                + column
                + "' is a sparse vector with size "
                + dim
                + ", "
                + nIdx
                + " indices and "
                + nVal
                + " values");
      }
      int start = sink.count;
      for (int k = 0; k < dim; k++) {
        sink.add(0f);
      }
      int[] idx = ints[0];
      for (int k = 0; k < nIdx; k++) {
        if (idx[k] < 0 || idx[k] >= dim) {
          throw new BadValue(
              "column '"
                  + column
                  + "' is a sparse vector of size "
                  + dim
                  + " with index "
                  + idx[k]);
        }
        sink.set(start + idx[k], floats[0][k]);
      }
    }

    private int ints(Leaf l) {
      return l.readInts(ints);
    }

    @Override
    public void skip() {
      type.skip();
      size.skip();
      indices.skip();
      values.skip();
    }

    @Override
    public void end() {
      type.end();
      size.end();
      indices.end();
      values.end();
    }
  }

  /** A struct of numbers: its leaves, one after the other. */
  static final class Struct implements Column {
    private final List<Column> parts;

    Struct(List<Column> parts) {
      this.parts = parts;
    }

    @Override
    public void start(PageReadStore pages, ColumnReadStore store) {
      for (Column c : parts) {
        c.start(pages, store);
      }
    }

    @Override
    public void read(FloatSink sink) {
      for (Column c : parts) {
        c.read(sink);
      }
    }

    @Override
    public void skip() {
      for (Column c : parts) {
        c.skip();
      }
    }

    @Override
    public void end() {
      for (Column c : parts) {
        c.end();
      }
    }
  }
}
