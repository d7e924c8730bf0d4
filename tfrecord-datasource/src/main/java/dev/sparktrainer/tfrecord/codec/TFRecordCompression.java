package dev.sparktrainer.tfrecord.codec;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Locale;
import java.util.zip.Deflater;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import java.util.zip.Inflater;
import java.util.zip.InflaterInputStream;

/** TensorFlow's compression types for TFRecord files, and how each is named on disk. */
public enum TFRecordCompression {
  /** Plain framing; the only kind whose files can be split. */
  NONE(".tfrecord"),
  /** RFC 1952 gzip, as {@code tf.io.TFRecordOptions(compression_type="GZIP")} writes. */
  GZIP(".tfrecord.gz"),
  /**
   * RFC 1950 zlib, as {@code compression_type="ZLIB"} writes; named {@code .deflate}, the extension
   * of Hadoop's zlib codec, so Hadoop tools (TensorFlow's own input format among them) read it too.
   */
  ZLIB(".tfrecord.deflate");

  private static final int BUFFER = 1 << 16;
  private final String extension;

  TFRecordCompression(String extension) {
    this.extension = extension;
  }

  /** The file-name extension files of this kind are written with. */
  public String extension() {
    return extension;
  }

  public boolean isSplittable() {
    return this == NONE;
  }

  /**
   * The compression a file's name implies: {@code .gz}/{@code .gzip}, {@code .zlib}/{@code .zz}.
   */
  public static TFRecordCompression fromFileName(String name) {
    String n = name.toLowerCase(Locale.ROOT);
    if (n.endsWith(".gz") || n.endsWith(".gzip")) {
      return GZIP;
    }
    if (n.endsWith(".zlib") || n.endsWith(".zz") || n.endsWith(".deflate")) {
      return ZLIB;
    }
    return NONE;
  }

  /**
   * Parses a user's option value: {@code none}/{@code uncompressed}/empty, {@code gzip}, {@code
   * zlib} (case-insensitive, TensorFlow's names).
   *
   * @throws IllegalArgumentException naming the option and the allowed values
   */
  public static TFRecordCompression parse(String option, String value) {
    String v = value == null ? "" : value.trim().toLowerCase(Locale.ROOT);
    switch (v) {
      case "":
      case "none":
      case "uncompressed":
        return NONE;
      case "gzip":
      case "gz":
        return GZIP;
      case "zlib":
        return ZLIB;
      default:
        throw new IllegalArgumentException(
            "Invalid " + option + " '" + value + "': expected none, gzip or zlib");
    }
  }

  /** Wraps a raw stream for reading. */
  public InputStream decompress(InputStream raw) throws IOException {
    switch (this) {
      case GZIP:
        return new GZIPInputStream(raw, BUFFER);
      case ZLIB:
        return new InflaterInputStream(raw, new Inflater(), BUFFER) {
          @Override
          public void close() throws IOException {
            try {
              super.close();
            } finally {
              inf.end();
            }
          }
        };
      default:
        return raw;
    }
  }

  /** Wraps a raw stream for writing; closing the result finishes the compressed stream. */
  public OutputStream compress(OutputStream raw) throws IOException {
    switch (this) {
      case GZIP:
        return new GZIPOutputStream(raw, BUFFER);
      case ZLIB:
        return new DeflaterOutputStream(raw, new Deflater(), BUFFER, false) {
          @Override
          public void close() throws IOException {
            try {
              super.close();
            } finally {
              def.end();
            }
          }
        };
      default:
        return raw;
    }
  }
}
