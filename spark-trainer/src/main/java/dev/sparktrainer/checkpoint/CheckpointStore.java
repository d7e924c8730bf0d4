package dev.sparktrainer.checkpoint;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A directory of checkpoints on a Hadoop FileSystem.
 *
 * <p>Each checkpoint is one file {@code ckpt-<step>.bin} (step zero-padded, so names sort by step)
 * holding a header (magic, version, step, length, CRC-32 of the payload) and the payload. It is
 * written as {@code _tmp-<step>-<uuid>} (hidden from Hadoop listings by the underscore) and renamed
 * into place: readers never see a partial checkpoint, and one that does not verify (a truncated copy
 * on an object store, say) is skipped with a warning in favour of the previous one. After a write,
 * all but the newest {@code keep} checkpoints are deleted, and so are temporary files of this or
 * earlier steps that a writer killed before its rename left behind.
 *
 * <p>Test hook: the system property {@value #WRITE_DELAY_PROPERTY}{@code =STEP:MILLIS} makes the
 * writer of step {@code STEP} sleep that long between writing the temporary file and renaming it,
 * so that tests can kill a process while a checkpoint is being written. Not for production use.
 */
public final class CheckpointStore {
  private static final System.Logger LOG = System.getLogger(CheckpointStore.class.getName());
  private static final int MAGIC = 0x53544b31; // "STK1"
  private static final Pattern NAME = Pattern.compile("ckpt-(\\d{19})\\.bin");
  private static final Pattern TEMP = Pattern.compile("_tmp-(\\d+)-.*");
  /**
   * Test hook: {@code STEP:MILLIS}, a pause before the rename of that step's checkpoint. (Not named
   * {@code sparktrainer.*}: Spark refuses {@code -Dspark...} in {@code spark.executor.extraJavaOptions}.)
   */
  public static final String WRITE_DELAY_PROPERTY = "dev.sparktrainer.test.checkpointWriteDelay";

  private final Path dir;
  private final Configuration conf;
  private final int keep;

  /**
   * A store in {@code dir} (any Hadoop FileSystem URI) keeping the newest {@code keep} (>= 1)
   * checkpoints.
   */
  public CheckpointStore(String dir, Configuration conf, int keep) {
    if (keep < 1) {
      throw new IllegalArgumentException("Invalid keepCheckpoints " + keep + ": expected >= 1");
    }
    this.dir = new Path(dir);
    this.conf = conf;
    this.keep = keep;
  }

  /** The directory. */
  public String directory() {
    return dir.toString();
  }

  /** Name of the checkpoint file for {@code step}. */
  static String fileName(long step) {
    return String.format("ckpt-%019d.bin", step);
  }

  /** Writes the checkpoint of {@code step} atomically, then deletes the old ones beyond {@code keep}. */
  public void write(long step, byte[] payload) throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    fs.mkdirs(dir);
    Path tmp = new Path(dir, "_tmp-" + step + "-" + UUID.randomUUID());
    Path target = new Path(dir, fileName(step));
    CRC32 crc = new CRC32();
    crc.update(payload);
    boolean renamed = false;
    try {
      try (FSDataOutputStream out = fs.create(tmp, true)) {
        out.writeInt(MAGIC);
        out.writeInt(1);
        out.writeLong(step);
        out.writeLong(payload.length);
        out.writeLong(crc.getValue());
        out.write(payload);
        out.hsync();
      }
      testHookDelay(step, tmp);
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
          LOG.log(System.Logger.Level.WARNING, "Cannot delete temporary checkpoint " + tmp + ": " + e);
        }
      }
    }
    prune(fs, step);
  }

  /** The {@value #WRITE_DELAY_PROPERTY} test hook. */
  private static void testHookDelay(long step, Path tmp) throws IOException {
    String hook = System.getProperty(WRITE_DELAY_PROPERTY);
    if (hook == null || hook.isBlank()) {
      return;
    }
    String[] parts = hook.trim().split(":");
    long hookStep;
    long millis;
    try {
      hookStep = Long.parseLong(parts[0]);
      millis = Long.parseLong(parts[1]);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          "Invalid " + WRITE_DELAY_PROPERTY + " '" + hook + "': expected STEP:MILLIS", e);
    }
    if (hookStep != step) {
      return;
    }
    LOG.log(System.Logger.Level.WARNING, "Test hook " + WRITE_DELAY_PROPERTY + ": pausing " + millis
        + " ms before renaming " + tmp);
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.io.InterruptedIOException("Interrupted while writing checkpoint " + tmp);
    }
  }

  /**
   * Deletes the checkpoints beyond {@code keep}, and temporary files of steps up to {@code written}:
   * what a writer killed before its rename left (a complete checkpoint of that step or a later one
   * now exists, so they are never needed). The live writer is rank 0 of the current attempt; a
   * straggler of an earlier attempt whose file goes away only fails its own rename.
   */
  private void prune(FileSystem fs, long written) {
    try {
      List<Long> steps = steps(fs);
      for (int i = 0; i < steps.size() - keep; i++) {
        Path old = new Path(dir, fileName(steps.get(i)));
        if (!fs.delete(old, false)) {
          LOG.log(System.Logger.Level.WARNING, "Cannot delete old checkpoint " + old);
        }
      }
      for (FileStatus st : fs.listStatus(dir)) {
        Matcher m = TEMP.matcher(st.getPath().getName());
        if (st.isFile() && m.matches() && Long.parseLong(m.group(1)) <= written) {
          LOG.log(System.Logger.Level.INFO, "Deleting " + st.getPath()
              + ": an incomplete checkpoint left by a writer that stopped before its rename");
          fs.delete(st.getPath(), false);
        }
      }
    } catch (IOException | NumberFormatException e) {
      // Keeping too many checkpoints is not worth failing a training job for.
      LOG.log(System.Logger.Level.WARNING, "Cannot prune checkpoints in " + dir + ": " + e);
    }
  }

  /** Steps of the complete checkpoints in the directory, ascending. */
  public List<Long> steps() throws IOException {
    return steps(dir.getFileSystem(conf));
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

  /** The newest checkpoint that verifies, as (step, payload); empty if there is none. */
  public Optional<Checkpoint> latest() throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    List<Long> steps = steps(fs);
    for (int i = steps.size() - 1; i >= 0; i--) {
      Path p = new Path(dir, fileName(steps.get(i)));
      try {
        return Optional.of(read(fs, p));
      } catch (IOException e) {
        LOG.log(System.Logger.Level.WARNING, "Skipping unreadable checkpoint " + p + ": " + e.getMessage());
      }
    }
    return Optional.empty();
  }

  private static Checkpoint read(FileSystem fs, Path p) throws IOException {
    try (FSDataInputStream raw = fs.open(p);
        DataInputStream in = new DataInputStream(raw)) {
      if (in.readInt() != MAGIC) {
        throw new IOException("not a checkpoint (bad magic number)");
      }
      int version = in.readInt();
      if (version != 1) {
        throw new IOException("unsupported checkpoint version " + version);
      }
      long step = in.readLong();
      long length = in.readLong();
      long expected = in.readLong();
      if (length < 0 || length > Integer.MAX_VALUE - 8) {
        throw new IOException("payload length " + length + " is out of range");
      }
      byte[] payload = new byte[(int) length];
      in.readFully(payload);
      CRC32 crc = new CRC32();
      crc.update(payload);
      if (crc.getValue() != expected) {
        throw new IOException("payload CRC-32 mismatch");
      }
      return new Checkpoint(step, payload);
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
        throw new IllegalArgumentException("Invalid " + option + " '" + dir + "': it is a file, expected a directory");
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

  /**
   * One checkpoint read back.
   *
   * @param step the global step it was taken after
   * @param payload the bytes given to {@link CheckpointStore#write}
   */
  public record Checkpoint(long step, byte[] payload) {}
}
