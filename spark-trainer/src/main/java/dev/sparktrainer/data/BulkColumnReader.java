package dev.sparktrainer.data;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.apache.parquet.bytes.ByteBufferInputStream;
import org.apache.parquet.bytes.BytesInput;
import org.apache.parquet.bytes.BytesUtils;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.ColumnReader;
import org.apache.parquet.column.Dictionary;
import org.apache.parquet.column.Encoding;
import org.apache.parquet.column.ValuesType;
import org.apache.parquet.column.page.DataPage;
import org.apache.parquet.column.page.DataPageV1;
import org.apache.parquet.column.page.DataPageV2;
import org.apache.parquet.column.page.DictionaryPage;
import org.apache.parquet.column.page.PageReader;
import org.apache.parquet.column.values.ValuesReader;
import org.apache.parquet.column.values.bitpacking.BytePacker;
import org.apache.parquet.column.values.bitpacking.Packer;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName;

/**
 * A {@link ColumnReader} over one number leaf column chunk (INT32, INT64, FLOAT, DOUBLE) that
 * decodes a whole page at a time into primitive arrays: the repetition and definition levels by
 * runs of the RLE/bit-packed hybrid, dictionary ids the same way and then one gather from the
 * dictionary, PLAIN values by one bulk copy. parquet-mr's own {@code ColumnReaderImpl} decodes one
 * value at a time through several virtual calls each, which was three quarters of the Parquet
 * reader's time.
 *
 * <p>Why this file is long: it is one page decoder whose parts share the current page's mutable
 * state (the level arrays, the value array of the column's type, the dictionary, the entry and
 * value cursors): loading a page (V1 and V2; PLAIN, dictionary and fallback encodings; every count
 * checked against the chunk before allocating), the row-at-a-time bulk reads, and the per-entry
 * methods parquet-mr's {@link ColumnReader} interface requires. Split, that state would have to be
 * handed between classes on every page and row. Only the static RLE/bit-packed decoders ({@link
 * #hybrid}, {@link #hybridGather}) stand alone; they stay beside their one caller as the hot loops
 * of the same decoding.
 *
 * <p>An encoding this class does not decode itself (levels in the deprecated BIT_PACKED encoding,
 * DELTA_BINARY_PACKED or BYTE_STREAM_SPLIT values) is decoded for that page by parquet-mr's own
 * values reader into the same arrays, so every file parquet-mr reads is read. {@link #readFloats}
 * moves one row's values into a {@link FloatSink} in runs ({@link ParquetColumns.Leaf} uses it);
 * the per-entry {@code ColumnReader} methods serve everything else (labels, vector fields,
 * skipping).
 */
final class BulkColumnReader implements ColumnReader {
  private final ColumnDescriptor desc;
  private final PageReader pages;
  private final PrimitiveTypeName type;
  private final int maxDef;
  private final int maxRep;
  private final long total;

  /** The row group's rows: a column without repetition has one entry per row. */
  private final long rows;

  /** The column's dotted path, for messages. */
  private final String path;

  /** 10^scale of a DECIMAL column (its values are the unscaled integers), else 1. */
  private final double divisor;

  /** Entries not yet loaded into the page arrays. */
  private long unloaded;

  // The dictionary, as the type's array (only one is used).
  private float[] dictFloats;
  private double[] dictDoubles;
  private long[] dictLongs;

  // The current page: its levels per entry, its values (present entries only), positions.
  private int[] defs = new int[0];
  private int[] reps = new int[0];
  private int[] ids = new int[0];
  private float[] floats = new float[0];
  private double[] doubles = new double[0];
  private long[] longs = new long[0];
  private int count;

  /** Whether every entry of the current page is a value (no nulls, no empty lists). */
  private boolean allPresent;

  private int pos;
  private int vpos;

  /**
   * The most entries one page may declare: its arrays (levels, ids, values: up to 20 bytes an
   * entry) take at most a sixteenth of the heap, so a header's count cannot take the memory other
   * threads need. Real writers' pages hold thousands to hundreds of thousands of entries.
   */
  static final long MAX_PAGE_ENTRIES =
      Math.max(1 << 20, Runtime.getRuntime().maxMemory() / 16 / 20);

  /**
   * @param rows the row group's row count
   */
  BulkColumnReader(ColumnDescriptor desc, PageReader pages, long rows) {
    this.desc = desc;
    this.rows = rows;
    this.path = String.join(".", desc.getPath());
    this.pages = pages;
    this.type = desc.getPrimitiveType().getPrimitiveTypeName();
    if (!supports(type)) {
      throw new IllegalArgumentException("not a number column: " + desc);
    }
    this.maxDef = desc.getMaxDefinitionLevel();
    this.maxRep = desc.getMaxRepetitionLevel();
    this.total = pages.getTotalValueCount();
    this.unloaded = total;
    this.divisor = Math.pow(10, ParquetColumns.decimalScale(desc));
    DictionaryPage dp = pages.readDictionaryPage();
    if (dp != null) {
      try {
        Dictionary d = dp.getEncoding().initDictionary(desc, dp);
        int n = d.getMaxId() + 1;
        switch (type) {
          case FLOAT:
            dictFloats = new float[n];
            for (int i = 0; i < n; i++) {
              dictFloats[i] = d.decodeToFloat(i);
            }
            break;
          case DOUBLE:
            dictDoubles = new double[n];
            for (int i = 0; i < n; i++) {
              dictDoubles[i] = d.decodeToDouble(i);
            }
            break;
          case INT32:
            dictLongs = new long[n];
            for (int i = 0; i < n; i++) {
              dictLongs[i] = d.decodeToInt(i);
            }
            break;
          default:
            dictLongs = new long[n];
            for (int i = 0; i < n; i++) {
              dictLongs[i] = d.decodeToLong(i);
            }
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read the dictionary of " + desc, e);
      }
    }
    if (total > 0) {
      loadPage();
    }
  }

  /** Loads the next page that has entries. */
  private void loadPage() {
    do {
      loadOnePage();
    } while (count == 0 && unloaded > 0);
  }

  /** Whether this reader decodes columns of {@code t}. */
  static boolean supports(PrimitiveTypeName t) {
    return t == PrimitiveTypeName.FLOAT
        || t == PrimitiveTypeName.DOUBLE
        || t == PrimitiveTypeName.INT32
        || t == PrimitiveTypeName.INT64;
  }

  // --- the page -------------------------------------------------------------------------------

  private void loadOnePage() {
    DataPage page = pages.readPage();
    if (page == null) {
      throw new ParquetColumns.BadValue(
          "column '"
              + path
              + "' ends after "
              + (total - unloaded)
              + " of its "
              + total
              + " values");
    }
    int n = page.getValueCount();
    // The header's count sizes the arrays: bound it by what the chunk can hold before allocating.
    long loaded = total - unloaded;
    long room = maxRep == 0 ? Math.min(unloaded, rows - loaded) : unloaded;
    if (n < 0 || n > room || n > MAX_PAGE_ENTRIES) {
      throw new ParquetColumns.BadValue(
          "column '"
              + path
              + "': a page declares "
              + n
              + " values, but "
              + (n < 0 || n > room
                  ? "only "
                      + Math.max(room, 0)
                      + " are left in the column chunk ("
                      + total
                      + " values, "
                      + rows
                      + " rows)"
                  : "a page may hold at most " + MAX_PAGE_ENTRIES + " (a sixteenth of the heap)"));
    }
    if (defs.length < n) {
      int cap = Math.max(n, 2 * defs.length);
      defs = new int[cap];
      reps = new int[cap];
    }
    try {
      page.accept(
          new DataPage.Visitor<Void>() {
            @Override
            public Void visit(DataPageV1 p) {
              try {
                ByteBufferInputStream in = ByteBufferInputStream.wrap(p.getBytes().toByteBuffer());
                levelsV1(in, p.getRlEncoding(), ValuesType.REPETITION_LEVEL, maxRep, reps, n);
                levelsV1(in, p.getDlEncoding(), ValuesType.DEFINITION_LEVEL, maxDef, defs, n);
                values(in, p.getValueEncoding(), n);
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
              return null;
            }

            @Override
            public Void visit(DataPageV2 p) {
              try {
                levelsV2(p.getRepetitionLevels(), maxRep, reps, n);
                levelsV2(p.getDefinitionLevels(), maxDef, defs, n);
                values(
                    ByteBufferInputStream.wrap(p.getData().toByteBuffer()), p.getDataEncoding(), n);
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
              return null;
            }
          });
    } catch (UncheckedIOException e) {
      throw new IllegalStateException(
          "cannot decode a page of column "
              + String.join(".", desc.getPath())
              + ": "
              + e.getCause().getMessage(),
          e);
    }
    count = n;
    pos = 0;
    vpos = 0;
    unloaded -= n;
  }

  private void levelsV1(
      ByteBufferInputStream in, Encoding enc, ValuesType vt, int max, int[] out, int n)
      throws IOException {
    if (max == 0) {
      Arrays.fill(out, 0, n, 0);
    } else if (enc == Encoding.RLE) {
      int len = BytesUtils.readIntLittleEndian(in);
      hybrid(in.slice(len), BytesUtils.getWidthFromMaxInt(max), out, n);
    } else {
      ValuesReader r = enc.getValuesReader(desc, vt);
      r.initFromPage(n, in);
      for (int i = 0; i < n; i++) {
        out[i] = r.readInteger();
      }
    }
  }

  private void levelsV2(BytesInput bytes, int max, int[] out, int n) throws IOException {
    if (max == 0) {
      Arrays.fill(out, 0, n, 0);
    } else {
      hybrid(bytes.toByteBuffer(), BytesUtils.getWidthFromMaxInt(max), out, n);
    }
  }

  /**
   * Decodes the page's present values (entries at the maximum definition level) into the type's
   * array.
   */
  private void values(ByteBufferInputStream in, Encoding enc, int n) throws IOException {
    int present = 0;
    for (int i = 0; i < n; i++) {
      if (defs[i] == maxDef) {
        present++;
      }
    }
    allPresent = present == n;
    if (enc == Encoding.PLAIN) {
      long bytes =
          (long) present
              * (type == PrimitiveTypeName.FLOAT || type == PrimitiveTypeName.INT32 ? 4 : 8);
      if (bytes > in.available()) {
        throw new IOException(
            present + " PLAIN values need " + bytes + " bytes, the page has " + in.available());
      }
    }
    ensureValues(present);
    if (enc.usesDictionary()) {
      if (dictFloats == null && dictDoubles == null && dictLongs == null) {
        throw new IOException("a dictionary-encoded page without a dictionary page");
      }
      if (ids.length < present) {
        ids = new int[Math.max(present, 2 * ids.length)];
      }
      if (present == 0) {
        return;
      }
      ByteBuffer b = in.slice(in.available());
      if (!b.hasRemaining()) {
        throw new IOException("a dictionary-encoded page without ids");
      }
      int width = b.get(b.position()) & 0xFF;
      if (width > 32) {
        throw new IOException("dictionary id bit width " + width);
      }
      b.position(b.position() + 1);
      try {
        if (type == PrimitiveTypeName.FLOAT && b.hasArray()) {
          // Ids straight to floats, no id array (the common case: Spark's dictionary-encoded
          // floats).
          hybridGather(
              b.array(),
              b.arrayOffset() + b.position(),
              b.arrayOffset() + b.limit(),
              width,
              dictFloats,
              floats,
              present);
          return;
        }
        hybrid(b, width, ids, present);
        int[] id = ids;
        switch (type) {
          case FLOAT:
            for (int i = 0; i < present; i++) {
              floats[i] = dictFloats[id[i]];
            }
            break;
          case DOUBLE:
            for (int i = 0; i < present; i++) {
              doubles[i] = dictDoubles[id[i]];
            }
            break;
          default:
            for (int i = 0; i < present; i++) {
              longs[i] = dictLongs[id[i]];
            }
        }
      } catch (ArrayIndexOutOfBoundsException e) {
        throw new IOException("a dictionary id beyond the dictionary", e);
      }
    } else if (enc == Encoding.PLAIN) {
      ByteBuffer b =
          in.slice(
                  present
                      * (type == PrimitiveTypeName.FLOAT || type == PrimitiveTypeName.INT32
                          ? 4
                          : 8))
              .order(ByteOrder.LITTLE_ENDIAN);
      switch (type) {
        case FLOAT:
          b.asFloatBuffer().get(floats, 0, present);
          break;
        case DOUBLE:
          b.asDoubleBuffer().get(doubles, 0, present);
          break;
        case INT32:
          for (int i = 0, at = b.position(); i < present; i++, at += 4) {
            longs[i] = b.getInt(at);
          }
          break;
        default:
          b.asLongBuffer().get(longs, 0, present);
      }
    } else {
      ValuesReader r = enc.getValuesReader(desc, ValuesType.VALUES);
      r.initFromPage(present, in);
      for (int i = 0; i < present; i++) {
        switch (type) {
          case FLOAT:
            floats[i] = r.readFloat();
            break;
          case DOUBLE:
            doubles[i] = r.readDouble();
            break;
          case INT32:
            longs[i] = r.readInteger();
            break;
          default:
            longs[i] = r.readLong();
        }
      }
    }
  }

  private void ensureValues(int n) {
    switch (type) {
      case FLOAT:
        if (floats.length < n) {
          floats = new float[Math.max(n, 2 * floats.length)];
        }
        break;
      case DOUBLE:
        if (doubles.length < n) {
          doubles = new double[Math.max(n, 2 * doubles.length)];
        }
        break;
      default:
        if (longs.length < n) {
          longs = new long[Math.max(n, 2 * longs.length)];
        }
    }
  }

  /** parquet-mr's generated little-endian unpackers, 8 values at a time, per bit width. */
  private static final BytePacker[] PACKERS = new BytePacker[33];

  static {
    for (int w = 0; w <= 32; w++) {
      PACKERS[w] = Packer.LITTLE_ENDIAN.newBytePacker(w);
    }
  }

  /**
   * Decodes {@code n} values of the RLE/bit-packed hybrid encoding (bit width {@code width}) from
   * {@code b}'s position into {@code out}: a run is filled at once, bit-packed groups are unpacked
   * 8 values at a time by parquet-mr's generated unpackers.
   */
  static void hybrid(ByteBuffer b, int width, int[] out, int n) throws IOException {
    if (b.hasArray()) {
      hybrid(b.array(), b.arrayOffset() + b.position(), b.arrayOffset() + b.limit(), width, out, n);
    } else {
      byte[] a = new byte[b.remaining()];
      b.duplicate().get(a);
      hybrid(a, 0, a.length, width, out, n);
    }
  }

  private static void hybrid(byte[] a, int p, int lim, int width, int[] out, int n)
      throws IOException {
    BytePacker packer = PACKERS[width];
    int bytesPerRun = (width + 7) >>> 3;
    int i = 0;
    while (i < n) {
      // The run's header: an unsigned LEB128 varint.
      int header = 0;
      int shift = 0;
      int x;
      do {
        if (p >= lim) {
          throw new IOException(
              "RLE/bit-packed levels or ids cut off after " + i + " of " + n + " values");
        }
        x = a[p++];
        header |= (x & 0x7F) << shift;
        shift += 7;
      } while ((x & 0x80) != 0 && shift < 35);
      if ((header & 1) == 0) {
        int run = header >>> 1;
        if (p + bytesPerRun > lim) {
          throw new IOException(
              "an RLE run's value is cut off after " + i + " of " + n + " values");
        }
        int v = 0;
        for (int k = 0; k < bytesPerRun; k++) {
          v |= (a[p++] & 0xFF) << (8 * k);
        }
        int end = Math.min(n, i + run);
        Arrays.fill(out, i, end, v);
        i = end;
      } else {
        int groups = header >>> 1;
        for (int g = 0; g < groups && i < n; g++, p += width) {
          if (p + width <= lim && i + 8 <= n) {
            packer.unpack8Values(a, p, out, i);
            i += 8;
          } else {
            // The last group: fewer values wanted, or cut short in the file (writers may drop its
            // padding).
            int k = Math.min(8, n - i);
            int need = (k * width + 7) >>> 3;
            if (p + need > lim) {
              throw new IOException(
                  "bit-packed levels or ids cut off after " + i + " of " + n + " values");
            }
            byte[] pad = new byte[width];
            System.arraycopy(a, p, pad, 0, Math.min(width, lim - p));
            int[] eight = new int[8];
            packer.unpack8Values(pad, 0, eight, 0);
            System.arraycopy(eight, 0, out, i, k);
            i += k;
          }
        }
      }
    }
  }

  /**
   * {@link #hybrid} fused with the dictionary lookup: {@code out[i] = dict[id i]}, bit width 8 (up
   * to 256 distinct values, the usual case) a byte at a time, other widths 8 ids at a time.
   */
  static void hybridGather(byte[] a, int p, int lim, int width, float[] dict, float[] out, int n)
      throws IOException {
    BytePacker packer = PACKERS[width];
    int bytesPerRun = (width + 7) >>> 3;
    int[] eight = new int[8];
    int i = 0;
    while (i < n) {
      int header = 0;
      int shift = 0;
      int x;
      do {
        if (p >= lim) {
          throw new IOException("dictionary ids cut off after " + i + " of " + n + " values");
        }
        x = a[p++];
        header |= (x & 0x7F) << shift;
        shift += 7;
      } while ((x & 0x80) != 0 && shift < 35);
      if ((header & 1) == 0) {
        int run = header >>> 1;
        if (p + bytesPerRun > lim) {
          throw new IOException("dictionary ids cut off after " + i + " of " + n + " values");
        }
        int v = 0;
        for (int k = 0; k < bytesPerRun; k++) {
          v |= (a[p++] & 0xFF) << (8 * k);
        }
        int end = Math.min(n, i + run);
        Arrays.fill(out, i, end, dict[v]);
        i = end;
      } else {
        int values = Math.min(n - i, (header >>> 1) * 8);
        if (width == 8 && p + values <= lim) {
          for (int k = 0; k < values; k++) {
            out[i + k] = dict[a[p + k] & 0xFF];
          }
          i += values;
          p += (header >>> 1) * 8;
          continue;
        }
        int groups = header >>> 1;
        for (int g = 0; g < groups && i < n; g++, p += width) {
          int k = Math.min(8, n - i);
          if (p + width <= lim) {
            packer.unpack8Values(a, p, eight, 0);
          } else {
            int need = (k * width + 7) >>> 3;
            if (p + need > lim) {
              throw new IOException("dictionary ids cut off after " + i + " of " + n + " values");
            }
            byte[] pad = new byte[width];
            System.arraycopy(a, p, pad, 0, lim - p);
            packer.unpack8Values(pad, 0, eight, 0);
          }
          for (int j = 0; j < k; j++) {
            out[i + j] = dict[eight[j]];
          }
          i += k;
        }
      }
    }
  }

  // --- a row at a time, in runs ---------------------------------------------------------------

  /**
   * Moves the current row's values into {@code sink} (as floats) and advances to the next row; an
   * entry below the maximum definition level goes to {@code absent} (which throws for a null).
   *
   * @return the entries consumed
   */
  int readFloats(FloatSink sink, ParquetColumns.Leaf absent) {
    checkPosition();
    int consumed = 0;
    boolean first = true;
    while (true) {
      int start = pos;
      int p = pos;
      int v = vpos;
      int runStart = v;
      int[] d = defs;
      int[] r = reps;
      int end = count;
      if (allPresent && p < end) {
        // Every entry a value: the row ends at the next repetition level 0.
        if (first) {
          p++;
          first = false;
        }
        while (p < end && r[p] != 0) {
          p++;
        }
        v += p - start;
      }
      for (; p < end; p++) {
        if (!first && r[p] == 0) {
          break;
        }
        first = false;
        if (d[p] == maxDef) {
          v++;
        } else {
          flush(sink, runStart, v - runStart);
          runStart = v;
          absent.checkAbsent(d[p], sink.count);
        }
      }
      flush(sink, runStart, v - runStart);
      consumed += p - start;
      pos = p;
      vpos = v;
      if (p < end || unloaded == 0) {
        return consumed;
      }
      loadPage();
    }
  }

  /** Moves past the current row without looking at its values; returns the entries consumed. */
  int skipRow() {
    checkPosition();
    int consumed = 0;
    boolean first = true;
    while (true) {
      int start = pos;
      int p = pos;
      int v = vpos;
      int[] d = defs;
      int[] r = reps;
      int end = count;
      for (; p < end; p++) {
        if (!first && r[p] == 0) {
          break;
        }
        first = false;
        if (d[p] == maxDef) {
          v++;
        }
      }
      consumed += p - start;
      pos = p;
      vpos = v;
      if (p < end || unloaded == 0) {
        return consumed;
      }
      loadPage();
    }
  }

  private void flush(FloatSink sink, int from, int n) {
    if (n == 0) {
      return;
    }
    switch (type) {
      case FLOAT:
        sink.addAll(floats, from, n);
        break;
      case DOUBLE:
        for (int i = from; i < from + n; i++) {
          sink.add((float) doubles[i]);
        }
        break;
      default:
        if (divisor != 1) {
          for (int i = from; i < from + n; i++) {
            sink.add((float) (longs[i] / divisor));
          }
        } else {
          for (int i = from; i < from + n; i++) {
            sink.add(longs[i]);
          }
        }
    }
  }

  // --- ColumnReader, one entry at a time ------------------------------------------------------

  @Override
  public long getTotalValueCount() {
    return total;
  }

  /** Fails unless an entry is at hand: no leftovers of an earlier page are read as values. */
  private void checkPosition() {
    if (pos >= count) {
      throw new ParquetColumns.BadValue(
          "column '"
              + path
              + "' has no value left: its chunk holds "
              + total
              + " values for the row group's "
              + rows
              + " rows");
    }
  }

  @Override
  public void consume() {
    checkPosition();
    if (defs[pos] == maxDef) {
      vpos++;
    }
    if (++pos == count && unloaded > 0) {
      loadPage();
    }
  }

  @Override
  public int getCurrentRepetitionLevel() {
    checkPosition();
    return reps[pos];
  }

  @Override
  public int getCurrentDefinitionLevel() {
    checkPosition();
    return defs[pos];
  }

  @Override
  public void writeCurrentValueToConverter() {
    throw new UnsupportedOperationException("no converters");
  }

  @Override
  public void skip() {
    // The values are decoded a page at a time: consume() moves past this one.
  }

  @Override
  public int getCurrentValueDictionaryID() {
    throw new UnsupportedOperationException("dictionary ids are not kept");
  }

  /**
   * {@inheritDoc}
   *
   * <p>A DECIMAL column's unscaled integer; {@link #getFloat} and {@link #getDouble} give its
   * value.
   */
  @Override
  public int getInteger() {
    return type == PrimitiveTypeName.FLOAT
        ? (int) floats[vpos]
        : type == PrimitiveTypeName.DOUBLE ? (int) doubles[vpos] : Math.toIntExact(longs[vpos]);
  }

  @Override
  public boolean getBoolean() {
    throw new UnsupportedOperationException("column " + desc + " is not boolean");
  }

  @Override
  public long getLong() {
    return type == PrimitiveTypeName.FLOAT
        ? (long) floats[vpos]
        : type == PrimitiveTypeName.DOUBLE ? (long) doubles[vpos] : longs[vpos];
  }

  @Override
  public Binary getBinary() {
    throw new UnsupportedOperationException("column " + desc + " is not binary");
  }

  @Override
  public float getFloat() {
    return (float) getDouble();
  }

  @Override
  public double getDouble() {
    return type == PrimitiveTypeName.FLOAT
        ? floats[vpos]
        : type == PrimitiveTypeName.DOUBLE
            ? doubles[vpos]
            : divisor != 1 ? longs[vpos] / divisor : longs[vpos];
  }

  @Override
  public ColumnDescriptor getDescriptor() {
    return desc;
  }
}
