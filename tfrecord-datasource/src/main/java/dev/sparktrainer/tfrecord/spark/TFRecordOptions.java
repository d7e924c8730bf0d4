package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.Serializable;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * The options of the {@code tfrecord} source, parsed once on the driver into an immutable,
 * serializable value. Precedence: the read/write option, then the session conf {@code
 * spark.sql.tfrecord.<option>}, then the default. Option names are case-insensitive.
 */
public final class TFRecordOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  /** {@code Example} (default), {@code SequenceExample} or {@code ByteArray}. */
  public static final String RECORD_TYPE = "recordType";

  /**
   * Write: {@code none} (default), {@code gzip}, {@code zlib}. Read: overrides the file-name rule.
   */
  public static final String COMPRESSION = "compression";

  /** Synonym of {@link #COMPRESSION}, as spark-tfrecord users write it. */
  public static final String CODEC = "codec";

  /** {@code FAILFAST} (default) or {@code DROPMALFORMED}. */
  public static final String MODE = "mode";

  /** Records longer than this many bytes are corruption (default 256 MiB). */
  public static final String MAX_RECORD_LENGTH = "maxRecordLength";

  /** How many records schema inference samples (default 1000). */
  public static final String SCHEMA_SAMPLE_SIZE = "schemaSampleSize";

  /** Infer bytes features as {@code binary} instead of {@code string} (default false). */
  public static final String BYTES_AS_BINARY = "bytesAsBinary";

  /** Read as columnar batches where the columns allow it (default true). */
  public static final String COLUMNAR = "columnar";

  /** Rows per columnar batch (default 4096). */
  public static final String BATCH_SIZE = "batchSize";

  /** Prefix of the session-conf fallbacks. */
  public static final String SESSION_CONF_PREFIX = "spark.sql.tfrecord.";

  public static final int DEFAULT_SCHEMA_SAMPLE_SIZE = 1000;

  private final RecordType recordType;
  private final TFRecordCompression writeCompression;
  private final TFRecordCompression readCompression; // null: from the file name
  private final CorruptRecordPolicy mode;
  private final int maxRecordLength;
  private final int schemaSampleSize;
  private final boolean bytesAsBinary;
  private final boolean columnar;
  private final int batchSize;

  private TFRecordOptions(Function<String, String> get) {
    String rt = get.apply(RECORD_TYPE);
    recordType = rt == null ? RecordType.Example : RecordType.parse(rt);
    String comp = get.apply(COMPRESSION);
    String optionName = COMPRESSION;
    if (comp == null) {
      comp = get.apply(CODEC);
      optionName = CODEC;
    }
    writeCompression = comp == null ? TFRecordCompression.NONE : parseCodec(optionName, comp);
    readCompression = comp == null ? null : writeCompression;
    mode = CorruptRecordPolicy.parse(MODE, get.apply(MODE));
    maxRecordLength =
        intOption(
            get,
            MAX_RECORD_LENGTH,
            TFRecordReader.DEFAULT_MAX_RECORD_LENGTH,
            1,
            Integer.MAX_VALUE - 80);
    schemaSampleSize =
        intOption(get, SCHEMA_SAMPLE_SIZE, DEFAULT_SCHEMA_SAMPLE_SIZE, 1, Integer.MAX_VALUE);
    bytesAsBinary = boolOption(get, BYTES_AS_BINARY, false);
    columnar = boolOption(get, COLUMNAR, true);
    batchSize = intOption(get, BATCH_SIZE, 4096, 1, 1 << 20);
  }

  /**
   * Parses options; {@code sessionConf} supplies the {@code spark.sql.tfrecord.*} fallbacks (may be
   * empty).
   *
   * @throws IllegalArgumentException naming the option, the value and what is allowed
   */
  public static TFRecordOptions parse(
      Map<String, String> options, Map<String, String> sessionConf) {
    Map<String, String> ci = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    ci.putAll(options);
    Map<String, String> conf = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    conf.putAll(sessionConf);
    return new TFRecordOptions(
        name -> {
          String v = ci.get(name);
          return v != null ? v : conf.get(SESSION_CONF_PREFIX + name);
        });
  }

  public static TFRecordOptions parse(Map<String, String> options) {
    return parse(options, Map.of());
  }

  private static TFRecordCompression parseCodec(String option, String value) {
    // spark-tfrecord users pass Hadoop codec class names
    String v = value.trim();
    if (v.endsWith("GzipCodec")) {
      return TFRecordCompression.GZIP;
    }
    if (v.endsWith("DefaultCodec") || v.endsWith("DeflateCodec")) {
      return TFRecordCompression.ZLIB;
    }
    return TFRecordCompression.parse(option, v);
  }

  private static int intOption(
      Function<String, String> get, String name, int dflt, int min, int max) {
    String v = get.apply(name);
    if (v == null) {
      return dflt;
    }
    try {
      long n = Long.parseLong(v.trim());
      if (n >= min && n <= max) {
        return (int) n;
      }
    } catch (NumberFormatException e) {
      // fall through to the error below
    }
    throw new IllegalArgumentException(
        "Invalid " + name + " '" + v + "': expected an integer in " + min + ".." + max);
  }

  private static boolean boolOption(Function<String, String> get, String name, boolean dflt) {
    String v = get.apply(name);
    if (v == null) {
      return dflt;
    }
    switch (v.trim().toLowerCase(Locale.ROOT)) {
      case "true":
        return true;
      case "false":
        return false;
      default:
        throw new IllegalArgumentException(
            "Invalid " + name + " '" + v + "': expected true or false");
    }
  }

  public RecordType recordType() {
    return recordType;
  }

  public TFRecordCompression writeCompression() {
    return writeCompression;
  }

  /** The compression of a file: the explicit option if given, else from the file name. */
  public TFRecordCompression compressionOf(String fileName) {
    return readCompression != null ? readCompression : TFRecordCompression.fromFileName(fileName);
  }

  public CorruptRecordPolicy mode() {
    return mode;
  }

  public int maxRecordLength() {
    return maxRecordLength;
  }

  public int schemaSampleSize() {
    return schemaSampleSize;
  }

  public boolean bytesAsBinary() {
    return bytesAsBinary;
  }

  public boolean columnar() {
    return columnar;
  }

  public int batchSize() {
    return batchSize;
  }
}
