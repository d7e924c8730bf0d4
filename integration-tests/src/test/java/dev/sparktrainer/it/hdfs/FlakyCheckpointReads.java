package dev.sparktrainer.it.hdfs;

import java.io.IOException;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;

/**
 * Transient read errors on checkpoints, injected without a wrapper scheme: while installed, a
 * subclass of the storage's real FileSystem class ({@link FlakyDistributedFileSystem}, {@code
 * s3.FlakyS3AFileSystem}) serves the scheme, uncached, and its {@code open} of a {@code ckpt-*.bin}
 * file throws the first {@code failures} times — as a DataNode read timeout or an object store's
 * 503 would. Everything else (data, checkpoint writes, listings) goes to the real implementation.
 *
 * <p>Installed on the SparkContext's Hadoop configuration, which the trainer broadcasts to its
 * tasks: in local mode they run in this JVM, so the classes and their static counters are shared.
 * {@link #close()} restores the configuration and closes every instance made meanwhile (uncached
 * instances are nobody else's to close).
 */
public final class FlakyCheckpointReads implements AutoCloseable {
  private static final Pattern CHECKPOINT = Pattern.compile("ckpt-\\d+\\.bin");
  private static final AtomicInteger failuresLeft = new AtomicInteger();
  private static final AtomicInteger failed = new AtomicInteger();
  private static final AtomicInteger opens = new AtomicInteger();
  private static final Queue<FileSystem> instances = new ConcurrentLinkedQueue<>();
  private static final Set<String> opened = ConcurrentHashMap.newKeySet();

  private final Configuration conf;
  private final String implKey;
  private final String cacheKey;
  private final String oldImpl;
  private final String oldCache;

  private FlakyCheckpointReads(
      Configuration conf, String scheme, Class<? extends FileSystem> impl, int failures) {
    this.conf = conf;
    this.implKey = "fs." + scheme + ".impl";
    this.cacheKey = "fs." + scheme + ".impl.disable.cache";
    this.oldImpl = conf.get(implKey);
    this.oldCache = conf.get(cacheKey);
    failuresLeft.set(failures);
    failed.set(0);
    opens.set(0);
    opened.clear();
    instances.clear();
    conf.set(implKey, impl.getName());
    // Uncached: a cached instance of the real class, made earlier, would otherwise be reused.
    conf.setBoolean(cacheKey, true);
  }

  /**
   * Serves {@code scheme} with {@code impl} for the jobs of {@code spark} until closed; the first
   * {@code failures} opens of a checkpoint fail ({@code Integer.MAX_VALUE}: all of them).
   */
  public static FlakyCheckpointReads install(
      SparkSession spark, String scheme, Class<? extends FileSystem> impl, int failures) {
    return new FlakyCheckpointReads(
        spark.sparkContext().hadoopConfiguration(), scheme, impl, failures);
  }

  /** Opens of a checkpoint that failed so far. */
  public int failed() {
    return failed.get();
  }

  /** Opens of a checkpoint so far, failed or not. */
  public int opens() {
    return opens.get();
  }

  /** Names of the checkpoint files opened (or tried) so far. */
  public Set<String> openedFiles() {
    return Set.copyOf(opened);
  }

  /**
   * For the flaky classes: each instance made while installed, to be closed by {@link #close()}.
   */
  public static void created(FileSystem fs) {
    instances.add(fs);
  }

  /**
   * For the flaky classes, first thing in {@code open(f)}: throws {@code error} if this open is to
   * fail.
   */
  public static void beforeOpen(Path f, Function<Path, IOException> error) throws IOException {
    if (!CHECKPOINT.matcher(f.getName()).matches()) {
      return;
    }
    opens.incrementAndGet();
    opened.add(f.getName());
    if (failuresLeft.getAndUpdate(n -> n == Integer.MAX_VALUE ? n : Math.max(0, n - 1)) > 0) {
      failed.incrementAndGet();
      throw error.apply(f);
    }
  }

  @Override
  public void close() {
    failuresLeft.set(0);
    restore(implKey, oldImpl);
    restore(cacheKey, oldCache);
    for (FileSystem fs; (fs = instances.poll()) != null; ) {
      try {
        fs.close();
      } catch (IOException | RuntimeException e) {
        System.getLogger(FlakyCheckpointReads.class.getName())
            .log(
                System.Logger.Level.WARNING,
                "Cannot close " + fs.getClass().getSimpleName() + " " + fs.getUri() + ": " + e);
      }
    }
  }

  private void restore(String key, String old) {
    if (old == null) {
      conf.unset(key);
    } else {
      conf.set(key, old);
    }
  }
}
