package dev.sparktrainer.checkpoint;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Local file systems under their own schemes that misbehave on purpose. Raw (no {@code .crc} side
 * files): what detects a corrupt checkpoint is the checkpoint's own CRCs. Their knobs are static:
 * reset them in each test.
 */
final class TestFileSystems {
  private TestFileSystems() {}

  /** A configuration where {@code scheme:} is {@code impl}, a new instance per use (no cache). */
  static Configuration conf(String scheme, Class<? extends FileSystem> impl) {
    Configuration conf = new Configuration();
    conf.set("fs." + scheme + ".impl", impl.getName());
    conf.setBoolean("fs." + scheme + ".impl.disable.cache", true);
    return conf;
  }

  /** The local {@code dir} as a URI of {@code scheme}. */
  static String uri(String scheme, java.nio.file.Path dir) {
    return scheme + "://" + dir.toAbsolutePath();
  }

  /** The local file system without checksum files: {@code file:} with RawLocalFileSystem. */
  static Configuration rawLocal() {
    Configuration conf = new Configuration();
    conf.set("fs.file.impl", RawLocalFileSystem.class.getName());
    conf.setBoolean("fs.file.impl.disable.cache", true);
    return conf;
  }

  /**
   * {@code flaky:} whose {@code open} fails (like a 503 from an object store) the first {@link
   * #failures} times.
   */
  public static class FlakyOpen extends RawLocalFileSystem {
    static final String SCHEME = "flaky";

    /** Opens that will still fail. */
    static final AtomicInteger failures = new AtomicInteger();

    /** Opens attempted. */
    static final AtomicInteger opens = new AtomicInteger();

    /**
     * Whether the failures are timeouts ({@link java.net.SocketTimeoutException}) rather than 503s.
     */
    static volatile boolean timeouts;

    static void reset(int failing) {
      failures.set(failing);
      opens.set(0);
      timeouts = false;
    }

    @Override
    public URI getUri() {
      return URI.create(SCHEME + ":///");
    }

    @Override
    public String getScheme() {
      return SCHEME;
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
      opens.incrementAndGet();
      if (failures.getAndDecrement() > 0) {
        throw timeouts
            ? new SocketTimeoutException("simulated read timeout")
            : new IOException("simulated 503 Service Unavailable");
      }
      return super.open(f, bufferSize);
    }
  }

  /**
   * {@code slow:} whose output streams take {@link #closeMillis} to close (an object store
   * uploading on close), or, after {@link #hold}, wait in close until {@link #release}: a test that
   * needs a write to be still in flight while it acts holds it there instead of hoping that it acts
   * within a delay (which a loaded machine may exceed). Counts the streams open at once.
   */
  public static class Slow extends RawLocalFileSystem {
    static final String SCHEME = "slow";

    /** How long a held close waits for {@link #release} before it fails: nothing waits forever. */
    static final long HOLD_SECONDS = 60;

    static volatile long closeMillis;
    static volatile CountDownLatch gate;
    static final AtomicInteger openWriters = new AtomicInteger();
    static final AtomicInteger maxOpenWriters = new AtomicInteger();

    static void reset(long closeDelayMillis) {
      closeMillis = closeDelayMillis;
      gate = null;
      openWriters.set(0);
      maxOpenWriters.set(0);
    }

    /** From now on every close waits (after its delay) until {@link #release}. */
    static void hold() {
      gate = new CountDownLatch(1);
    }

    /** Lets the held closes, and every later one, through. */
    static void release() {
      CountDownLatch g = gate;
      if (g != null) {
        g.countDown();
      }
    }

    @Override
    public URI getUri() {
      return URI.create(SCHEME + ":///");
    }

    @Override
    public String getScheme() {
      return SCHEME;
    }

    @Override
    protected OutputStream createOutputStreamWithMode(
        Path f, boolean append, FsPermission permission) throws IOException {
      OutputStream out = super.createOutputStreamWithMode(f, append, permission);
      maxOpenWriters.accumulateAndGet(openWriters.incrementAndGet(), Math::max);
      return new FilterOutputStream(out) {
        private boolean closed;

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
          out.write(b, off, len); // FilterOutputStream would write byte by byte
        }

        @Override
        public void close() throws IOException {
          if (closed) {
            return;
          }
          closed = true;
          try {
            Thread.sleep(closeMillis);
            CountDownLatch g = gate;
            if (g != null && !g.await(HOLD_SECONDS, TimeUnit.SECONDS)) {
              throw new IOException("a held close was not released within " + HOLD_SECONDS + " s");
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted in a slow close");
          } finally {
            openWriters.decrementAndGet();
            super.close();
          }
        }
      };
    }
  }

  /** {@code failing:} whose files cannot be created. */
  public static class FailingCreate extends RawLocalFileSystem {
    static final String SCHEME = "failing";
    static final String MESSAGE = "simulated: the store refuses writes";

    @Override
    public URI getUri() {
      return URI.create(SCHEME + ":///");
    }

    @Override
    public String getScheme() {
      return SCHEME;
    }

    @Override
    protected OutputStream createOutputStreamWithMode(
        Path f, boolean append, FsPermission permission) throws IOException {
      throw new IOException(MESSAGE);
    }
  }
}
