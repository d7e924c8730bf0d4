package dev.sparktrainer.checkpoint;

import java.io.DataOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CancellationException;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.LongConsumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A directory of checkpoints on a Hadoop FileSystem ({@code file:}, {@code hdfs:}, {@code s3a:},
 * ...).
 *
 * <h2>Files</h2>
 *
 * <p>Each checkpoint is one file {@code ckpt-<step>.bin} (the step zero-padded to 19 digits, so
 * names sort by step). It is written as {@code _tmp-<step>-<uuid>} (hidden from Hadoop listings by
 * the underscore) and renamed into place, so a reader never sees a partial checkpoint under its
 * final name. After a write, all but the newest {@code keep} checkpoints up to its step are deleted
 * (one of a later step, which the run restarted before because it was corrupt, is left to be
 * replaced), and so are temporary files of this or earlier steps that a writer killed before its
 * rename left behind. {@link #write} is synchronous and does not retry (a failure goes to its
 * caller, which can write the next checkpoint); {@link AsyncCheckpointWriter} takes it off the
 * training thread.
 *
 * <h2>Format (version 2)</h2>
 *
 * <p>Integers and floats are little-endian; CRCs are CRC-32C; offsets are 64-bit, so a checkpoint
 * may be larger than 2 GiB (a single array is a Java {@code float[]}, at most {@code
 * Integer.MAX_VALUE} floats).
 *
 * <pre>
 * header    magic "STCK" (4 bytes) | version int32 = 2 | step int64                      (16 bytes)
 * metadata  length int32 | bytes | CRC int32                                         (at byte 16)
 * arrays    one record per array, in order, without gaps:
 *             name length int32 | name (UTF-8) | count int32 (floats) |
 *             data (4 * count bytes) | CRC of the data int32
 * manifest  step int64 | metadata offset int64 | metadata length int32 | metadata CRC int32 |
 *           array count int32 | per array:
 *             name length int32 | name | record offset int64 | count int32 | data CRC int32
 * footer    manifest offset int64 | manifest length int32 | manifest CRC int32 |
 *           magic "STCK"                                                              (20 bytes)
 * </pre>
 *
 * <p>Arrays are written and read through one buffer of 1 MiB: neither side ever holds a {@code
 * byte[]} of a whole array or of the whole state. A reader first checks the header, the footer and
 * the manifest (so a truncated file fails at once, without reading its arrays), then reads every
 * record and checks it against the manifest: its offset, name, count and data CRC.
 *
 * <h2>Which checkpoint {@link #latest()} restores</h2>
 *
 * <p>The newest one that verifies. A checkpoint that is provably bad (bad magic, unsupported
 * version, a CRC mismatch, truncation, a missing footer, a manifest inconsistent with the records)
 * is skipped with a warning naming the file and the reason, in favour of the previous one. Any
 * other failure (an unreachable store, a permission error, a timeout) proves nothing about the
 * checkpoint: it is retried (4 attempts in all, waiting 0.5, 1 and 2 s between them), then thrown,
 * naming the file. Falling back to an older checkpoint, or to none, because of a transient error
 * would silently throw away the user's progress. A file in format 1 (written by an older version of
 * spark-trainer) is not skipped either: {@link IncompatibleCheckpointException}. A file deleted
 * between the listing and its reading (replaced by a re-run of its step, or pruned by another
 * writer) is skipped. {@link #latest(Consumer)} tells its caller each checkpoint it skipped and why
 * ({@link SkippedCheckpoint}), so that the trainer can record it in the run's history.
 *
 * <p>{@link #withBeforeRename} runs a hook between writing the temporary file and renaming it (the
 * trainer's fault injection, testing only, pauses there so that a test can kill a process while a
 * checkpoint is being written).
 */
public final class CheckpointStore {
  private static final System.Logger LOG = System.getLogger(CheckpointStore.class.getName());
  private static final Pattern NAME = Pattern.compile("ckpt-(\\d{19})\\.bin");
  private static final Pattern TEMP = Pattern.compile("_tmp-(\\d+)-.*");

  /** Waits between attempts to read, for a failure that does not prove a checkpoint bad. */
  private static final long[] RETRY_DELAYS_MILLIS = {500, 1000, 2000};

  private final Path dir;
  private final Configuration conf;
  private final int keep;
  private final long[] retryDelaysMillis;

  /** Run with the step before each rename (see {@link #withBeforeRename}); a no-op by default. */
  private final LongConsumer beforeRename;

  /**
   * A store in {@code dir} (any Hadoop FileSystem URI) keeping the newest {@code keep} (>= 1)
   * checkpoints.
   */
  public CheckpointStore(String dir, Configuration conf, int keep) {
    this(dir, conf, keep, RETRY_DELAYS_MILLIS);
  }

  /** A store whose reads wait {@code retryDelaysMillis} between attempts (tests: short waits). */
  CheckpointStore(String dir, Configuration conf, int keep, long[] retryDelaysMillis) {
    this(dir, conf, keep, retryDelaysMillis, step -> {});
  }

  private CheckpointStore(
      String dir,
      Configuration conf,
      int keep,
      long[] retryDelaysMillis,
      LongConsumer beforeRename) {
    if (keep < 1) {
      throw new IllegalArgumentException("Invalid keepCheckpoints " + keep + ": expected >= 1");
    }
    this.dir = new Path(dir);
    this.conf = conf;
    this.keep = keep;
    this.retryDelaysMillis = retryDelaysMillis.clone();
    this.beforeRename = Objects.requireNonNull(beforeRename, "beforeRename");
  }

  /**
   * This store with {@code hook} run on the writing thread, given the step, after a checkpoint's
   * temporary file is complete and before it is renamed into place (the trainer's fault injection
   * pauses there; testing only). An {@link UncheckedIOException} it throws is rethrown as its
   * cause; the temporary file is deleted then, as for any failed write.
   */
  public CheckpointStore withBeforeRename(LongConsumer hook) {
    return new CheckpointStore(dir.toString(), conf, keep, retryDelaysMillis, hook);
  }

  /** The directory. */
  public String directory() {
    return dir.toString();
  }

  /** Name of the checkpoint file for {@code step}. */
  static String fileName(long step) {
    return String.format("ckpt-%019d.bin", step);
  }

  /**
   * Writes {@code state} atomically (streamed to a temporary file, then renamed), then deletes the
   * old checkpoints beyond {@code keep} (see the class comment). A checkpoint of the same step is
   * replaced (a re-run after a retry).
   *
   * @throws IOException if it cannot be written (not retried: the caller may write the next one);
   *     nothing is left under the final name then
   */
  public void write(CheckpointState state) throws IOException {
    write(state, () -> false);
  }

  /**
   * {@link #write(CheckpointState)}, giving up before the rename (the temporary file deleted,
   * nothing pruned) when {@code cancelled} says so: the writer of an attempt that failed must not
   * complete a checkpoint, or prune, while the next attempt writes into the same directory.
   *
   * @throws java.util.concurrent.CancellationException if cancelled
   */
  public void write(CheckpointState state, BooleanSupplier cancelled) throws IOException {
    long step = state.step();
    FileSystem fs = dir.getFileSystem(conf);
    fs.mkdirs(dir);
    Path tmp = new Path(dir, "_tmp-" + step + "-" + UUID.randomUUID());
    Path target = new Path(dir, fileName(step));
    boolean renamed = false;
    try {
      try (FSDataOutputStream out = fs.create(tmp, true)) {
        CheckpointFormat.write(out, state);
        out.hsync();
      }
      try {
        beforeRename.accept(step);
      } catch (UncheckedIOException e) {
        throw e.getCause();
      }
      if (cancelled.getAsBoolean()) {
        throw new CancellationException(
            "Checkpoint of step "
                + step
                + " to "
                + dir
                + " abandoned: its training attempt failed");
      }
      if (fs.exists(target)) {
        fs.delete(target, false); // a re-run of the same step (after a retry) replaces it
      }
      if (!fs.rename(tmp, target)) {
        throw new IOException("Cannot rename checkpoint " + tmp + " to " + target);
      }
      renamed = true;
    } finally {
      if (!renamed) {
        try {
          fs.delete(tmp, false);
        } catch (IOException e) {
          LOG.log(
              System.Logger.Level.WARNING, "Cannot delete temporary checkpoint " + tmp + ": " + e);
        }
      }
    }
    prune(fs, step);
  }

  /**
   * Deletes the checkpoints of steps up to {@code written} beyond the newest {@code keep} of them,
   * and temporary files of steps up to {@code written}: what a writer killed before its rename left
   * (a complete checkpoint of that step or a later one now exists, so they are never needed). The
   * live writer is rank 0 of the current attempt; a straggler of an earlier attempt whose file goes
   * away only fails its own rename.
   *
   * <p>Checkpoints of later steps are left alone: one exists when the run restarted before it,
   * because {@link #latest} skipped it as corrupt (or from a straggler). Counting them would delete
   * the run's new, good checkpoints as soon as they are written, until it passes the bad ones'
   * steps; a bad one is replaced when the run writes its step again.
   */
  private void prune(FileSystem fs, long written) {
    try {
      List<Long> steps = steps(fs);
      int upTo = 0;
      while (upTo < steps.size() && steps.get(upTo) <= written) {
        upTo++;
      }
      for (int i = 0; i < upTo - keep; i++) {
        Path old = new Path(dir, fileName(steps.get(i)));
        if (!fs.delete(old, false)) {
          LOG.log(System.Logger.Level.WARNING, "Cannot delete old checkpoint " + old);
        }
      }
      for (FileStatus st : fs.listStatus(dir)) {
        Matcher m = TEMP.matcher(st.getPath().getName());
        if (st.isFile() && m.matches() && Long.parseLong(m.group(1)) <= written) {
          LOG.log(
              System.Logger.Level.INFO,
              "Deleting "
                  + st.getPath()
                  + ": an incomplete checkpoint left by a writer that stopped before its rename");
          fs.delete(st.getPath(), false);
        }
      }
    } catch (IOException | NumberFormatException e) {
      // Keeping too many checkpoints is not worth failing a training job for.
      LOG.log(System.Logger.Level.WARNING, "Cannot prune checkpoints in " + dir + ": " + e);
    }
  }

  /**
   * Steps of the checkpoints in the directory, ascending, from their names (not verified). A
   * listing that fails is retried as reads are.
   */
  public List<Long> steps() throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    return withRetries("list the checkpoints in", dir, () -> steps(fs));
  }

  private List<Long> steps(FileSystem fs) throws IOException {
    List<Long> out = new ArrayList<>();
    if (!fs.exists(dir)) {
      return out;
    }
    for (FileStatus st : fs.listStatus(dir)) {
      Matcher m = NAME.matcher(st.getPath().getName());
      if (st.isFile() && m.matches()) {
        out.add(Long.parseLong(m.group(1)));
      }
    }
    out.sort(Comparator.naturalOrder());
    return out;
  }

  /**
   * The newest checkpoint that verifies, with its arrays loaded; empty if there is none. See the
   * class comment for what is skipped and what is retried. Same as {@link #latest(Consumer)}, the
   * skipped checkpoints only logged.
   *
   * @throws IOException naming the file and the cause when a checkpoint cannot be read for a reason
   *     that does not prove it bad, after 4 attempts
   * @throws IncompatibleCheckpointException if the newest readable candidate was written in format
   *     1
   */
  public Optional<CheckpointState> latest() throws IOException {
    return latest(skipped -> {});
  }

  /**
   * The newest checkpoint that verifies, with its arrays loaded; empty if there is none (no
   * checkpoint, or every one skipped). Each checkpoint passed over — provably bad, or deleted since
   * the listing — is logged at WARNING and given to {@code onSkipped}, newest first, before this
   * returns. See the class comment for what is skipped and what is retried.
   *
   * @throws IOException naming the file and the cause when a checkpoint cannot be read for a reason
   *     that does not prove it bad, after 4 attempts (what was skipped before it was still
   *     reported)
   * @throws IncompatibleCheckpointException if the newest readable candidate was written in format
   *     1
   */
  public Optional<CheckpointState> latest(Consumer<SkippedCheckpoint> onSkipped)
      throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    List<Long> steps = withRetries("list the checkpoints in", dir, () -> steps(fs));
    for (int i = steps.size() - 1; i >= 0; i--) {
      long step = steps.get(i);
      Path p = new Path(dir, fileName(step));
      try {
        CheckpointState state = withRetries("read checkpoint", p, () -> readIfPresent(fs, p, step));
        if (state != null) {
          return Optional.of(state);
        }
        String reason =
            "deleted since the directory was listed (replaced, or pruned by another writer)";
        LOG.log(System.Logger.Level.WARNING, "Skipping checkpoint " + p + ": " + reason);
        onSkipped.accept(new SkippedCheckpoint(p.toString(), reason));
      } catch (CorruptCheckpointException e) {
        LOG.log(
            System.Logger.Level.WARNING,
            e.getMessage()
                + (i > 0
                    ? "; skipping it for the previous one"
                    : "; skipping it (there is no older one)"));
        onSkipped.accept(new SkippedCheckpoint(p.toString(), e.summary()));
      }
    }
    return Optional.empty();
  }

  /** Reads the checkpoint of {@code step}, once: no retry, nothing skipped. */
  CheckpointState read(long step) throws IOException {
    Path p = new Path(dir, fileName(step));
    return read(p.getFileSystem(conf), p, step);
  }

  /** The checkpoint in {@code p}, or null if it no longer exists. */
  private static CheckpointState readIfPresent(FileSystem fs, Path p, long step)
      throws IOException {
    try {
      return read(fs, p, step);
    } catch (FileNotFoundException e) {
      // Some file systems say "not found" for what is a permission error: only a file that is
      // really gone is skipped; otherwise it is an error like any other (retried, then thrown).
      if (!fs.exists(p)) {
        return null;
      }
      throw e;
    }
  }

  private static CheckpointState read(FileSystem fs, Path p, long step) throws IOException {
    long length = fs.getFileStatus(p).getLen();
    try (FSDataInputStream in = fs.open(p)) {
      return CheckpointFormat.read(in, length, p.toString(), step);
    }
  }

  /** An I/O call that may be retried. */
  @FunctionalInterface
  private interface IoCall<T> {
    T call() throws IOException;
  }

  /**
   * Runs {@code call}, retrying a failure that proves nothing about the checkpoint (all but a
   * corrupt or incompatible one, and an interruption; a timeout is retried) after the configured
   * waits, then throwing it with {@code what} and {@code path} in the message.
   */
  private <T> T withRetries(String what, Path path, IoCall<T> call) throws IOException {
    for (int attempt = 1; ; attempt++) {
      try {
        return call.call();
      } catch (CorruptCheckpointException | IncompatibleCheckpointException e) {
        throw e;
      } catch (IOException e) {
        // An interruption ends the attempts. A timeout is an InterruptedIOException too
        // (SocketTimeoutException: a DataNode read, Hadoop's ConnectTimeoutException, S3A's
        // AWSApiCallTimeoutException), yet the most transient failure of all: it is retried.
        if (e instanceof InterruptedIOException && !(e instanceof SocketTimeoutException)) {
          throw e;
        }
        if (attempt > retryDelaysMillis.length) {
          throw new IOException(
              "Cannot " + what + " " + path + " (" + attempt + " attempts): " + e, e);
        }
        long delay = retryDelaysMillis[attempt - 1];
        LOG.log(
            System.Logger.Level.WARNING,
            "Cannot "
                + what
                + " "
                + path
                + " (attempt "
                + attempt
                + " of "
                + (retryDelaysMillis.length + 1)
                + "), retrying in "
                + delay
                + " ms: "
                + e);
        try {
          Thread.sleep(delay);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          InterruptedIOException interrupted =
              new InterruptedIOException("Interrupted while retrying to " + what + " " + path);
          interrupted.addSuppressed(e);
          throw interrupted;
        }
      }
    }
  }

  /**
   * Checks on the driver that {@code dir} can be created and written: creates it and a probe file,
   * then deletes the probe.
   *
   * @throws IllegalArgumentException naming the option and the path if not
   */
  public static void checkWritable(String option, String dir, Configuration conf) {
    Path d = new Path(dir);
    Path probe = new Path(d, "_write-probe-" + UUID.randomUUID());
    try {
      FileSystem fs = d.getFileSystem(conf);
      if (fs.exists(d) && !fs.getFileStatus(d).isDirectory()) {
        throw new IllegalArgumentException(
            "Invalid " + option + " '" + dir + "': it is a file, expected a directory");
      }
      fs.mkdirs(d);
      try (DataOutputStream out = fs.create(probe, true)) {
        out.writeInt(1);
      }
      fs.delete(probe, false);
    } catch (IOException | UncheckedIOException e) {
      throw new IllegalArgumentException(
          "Invalid " + option + " '" + dir + "': not writable (" + e.getMessage() + ")", e);
    }
  }
}
