package dev.sparktrainer.train;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Locale;
import java.util.Set;
import java.util.UUID;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Writing outputs so that a reader (or the next run) finds either the previous content or the whole
 * new one, never a mix: through a temporary name and a rename where the store renames atomically
 * (HDFS, the local disk), and object by object where a rename is a copy (S3A, GCS, ...), whose
 * objects appear whole when their upload ends.
 */
public final class AtomicOutputs {
  private static final System.Logger LOG = System.getLogger(AtomicOutputs.class.getName());

  /**
   * Schemes of object stores whose rename copies and deletes, file by file: not atomic. (Hadoop 3.4
   * has no path capability saying whether a directory rename is atomic, so the scheme decides.)
   */
  private static final Set<String> COPYING_RENAME =
      Set.of("s3", "s3a", "s3n", "gs", "oss", "cosn", "obs", "wasb", "wasbs");

  private AtomicOutputs() {}

  /** Whether {@code fs} renames files and directories atomically (false for object stores). */
  public static boolean renamesAtomically(FileSystem fs) {
    String scheme = fs.getUri().getScheme();
    return scheme == null || !COPYING_RENAME.contains(scheme.toLowerCase(Locale.ROOT));
  }

  /**
   * Writes {@code bytes} to {@code file}, replacing what it held: a reader sees the old content or
   * all of the new one. Atomic stores: a temporary file next to it, renamed over it. Object stores:
   * one upload, aborted if the write fails.
   */
  public static void writeFile(FileSystem fs, Path file, byte[] bytes) throws IOException {
    if (!renamesAtomically(fs)) {
      writeWhole(fs, file, bytes);
      return;
    }
    Path tmp = new Path(file.getParent(), "_tmp-" + file.getName() + "-" + UUID.randomUUID());
    boolean done = false;
    try {
      writeWhole(fs, tmp, bytes);
      if (!fs.rename(tmp, file)) {
        // HDFS does not rename over an existing file: a moment without the file, never a partial
        // one.
        if (!(fs.exists(file) && fs.delete(file, false) && fs.rename(tmp, file))) {
          throw new IOException("Cannot rename " + tmp + " to " + file);
        }
      }
      done = true;
    } finally {
      if (!done) {
        deleteQuietly(fs, tmp, false, "the unfinished " + file.getName());
      }
    }
  }

  /**
   * Creates {@code file} with {@code bytes}; on failure the upload is aborted where the stream can.
   */
  static void writeWhole(FileSystem fs, Path file, byte[] bytes) throws IOException {
    FSDataOutputStream out = fs.create(file, true);
    boolean written = false;
    try {
      out.write(bytes);
      out.close();
      written = true;
    } finally {
      if (!written) {
        try {
          out.abort(); // an object store then publishes nothing
        } catch (UnsupportedOperationException | UncheckedIOException e) {
          try {
            out.close();
          } catch (IOException | RuntimeException closing) {
            LOG.log(System.Logger.Level.WARNING, "Could not close " + file + ": " + closing);
          }
        }
      }
    }
  }

  /**
   * Deletes {@code p}, logging (not throwing) a failure: cleanup must not hide the original error.
   */
  static void deleteQuietly(FileSystem fs, Path p, boolean recursive, String what) {
    try {
      if (!fs.delete(p, recursive) && fs.exists(p)) {
        LOG.log(System.Logger.Level.WARNING, "Could not delete " + what + " at " + p);
      }
    } catch (IOException | RuntimeException e) {
      LOG.log(System.Logger.Level.WARNING, "Could not delete " + what + " at " + p + ": " + e);
    }
  }
}
