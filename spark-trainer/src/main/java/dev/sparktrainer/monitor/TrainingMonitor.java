package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;
import dev.sparktrainer.train.metrics.TrainingCallback;
import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.SparkSession;

/**
 * Watches a training run from the driver: rank 0 reports its progress over a TCP connection to a
 * listener this class opens on the driver (the executors can always reach the driver), and writes
 * TensorBoard event files to {@code logsDir} itself.
 *
 * <pre>{@code
 * try (TrainingMonitor monitor = TrainingMonitor.start(spark, ConsoleProgress.auto(System.err), outDir + "/logs")) {
 *   TrainedModel model = DistributedTrainer.builder()...optCallback(monitor.callback()).build().fit(spark);
 * }
 * }</pre>
 *
 * <p>Connections must present the monitor's random token first; anything else is dropped. Progress
 * is best effort: if rank 0 cannot connect, training goes on and only the live view is missing.
 *
 * <p>Whoever can reach the port can connect, so the listener bounds what a stranger costs: one
 * thread serves every connection (a selector: no thread per connection); a connection must send its
 * hello line, at most {@value #MAX_HELLO_BYTES} bytes, within {@link #HELLO_TIMEOUT_MILLIS} ms of
 * being accepted; at most {@value #MAX_UNAUTHENTICATED} connections wait for their hello at once
 * (the longest waiting is dropped for a new one); lines after the hello are bounded by {@value
 * #MAX_LINE_BYTES} bytes. Dropped connections are logged at most once per {@link
 * #LOG_INTERVAL_MILLIS} ms, with a count of the others.
 */
public final class TrainingMonitor implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(TrainingMonitor.class.getName());

  /** "HELLO " and a 32-digit token and a newline need 39. */
  static final int MAX_HELLO_BYTES = 64;

  static final long HELLO_TIMEOUT_MILLIS = 2_000;
  static final int MAX_UNAUTHENTICATED = 32;

  /** Rank 0's connection, and a few older ones from earlier attempts whose end was not seen. */
  static final int MAX_AUTHENTICATED = 4;

  /** A progress line is a few hundred bytes. */
  static final int MAX_LINE_BYTES = 64 * 1024;

  static final long LOG_INTERVAL_MILLIS = 10_000;

  private final ServerSocketChannel server;
  private final Selector selector;
  private final byte[] hello;
  private final String token;
  private final ProgressView view;
  private final String logsDir;
  private final Thread loop;

  /** Connections waiting for their hello, oldest first (the loop thread's only). */
  private final ArrayDeque<Conn> unauthenticated = new ArrayDeque<>();

  /** Authenticated connections, oldest first (the loop thread's only). */
  private final ArrayDeque<Conn> authenticated = new ArrayDeque<>();

  private final Object lock = new Object();

  /** Guarded by lock: authenticated connections open, and loop iterations done (for close). */
  private int open;

  private long passes;
  private volatile boolean closed;
  // rate-limited logging of dropped connections (the loop thread's only)
  private long lastLogNanos;
  private boolean loggedOnce;
  private long unlogged;

  /** One connection and what it has sent that is not yet a whole line. */
  private static final class Conn {
    final SocketChannel ch;
    final Object remote;
    final long helloDeadline;
    SelectionKey key;
    ByteBuffer buf = ByteBuffer.allocate(MAX_HELLO_BYTES);
    boolean authenticated;

    Conn(SocketChannel ch, Object remote, long helloDeadline) {
      this.ch = ch;
      this.remote = remote;
      this.helloDeadline = helloDeadline;
    }
  }

  private TrainingMonitor(
      ServerSocketChannel server, Selector selector, ProgressView view, String logsDir) {
    this.server = server;
    this.selector = selector;
    this.view = view;
    this.logsDir = logsDir;
    byte[] t = new byte[16];
    new SecureRandom().nextBytes(t);
    this.token = HexFormat.of().formatHex(t);
    this.hello = ("HELLO " + token).getBytes(StandardCharsets.US_ASCII);
    if (server != null) {
      loop = new Thread(this::run, "spark-trainer-progress");
      loop.setDaemon(true);
      loop.start();
    } else {
      loop = null;
    }
  }

  /**
   * Starts watching: a progress listener on the driver's address ({@code spark.driver.host}) if
   * {@code view} is not null, TensorBoard files under {@code logsDir} ({@code train/} and {@code
   * validation/}) if it is not null.
   */
  public static TrainingMonitor start(SparkSession spark, ProgressView view, String logsDir)
      throws IOException {
    String host =
        spark
            .sparkContext()
            .getConf()
            .get("spark.driver.host", InetAddress.getLocalHost().getHostAddress());
    return start(host, view, logsDir);
  }

  /**
   * As {@link #start(SparkSession, ProgressView, String)}, listening on {@code host} (reachable
   * from rank 0).
   */
  public static TrainingMonitor start(String host, ProgressView view, String logsDir)
      throws IOException {
    if (view == null) {
      return new TrainingMonitor(null, null, null, logsDir);
    }
    ServerSocketChannel server = ServerSocketChannel.open();
    Selector selector = null;
    try {
      server.bind(new InetSocketAddress(host, 0), 128);
      server.configureBlocking(false);
      selector = Selector.open();
      server.register(selector, SelectionKey.OP_ACCEPT);
      return new TrainingMonitor(server, selector, view, logsDir);
    } catch (IOException | RuntimeException e) {
      for (Closeable c : new Closeable[] {selector, server}) {
        if (c != null) {
          try {
            c.close();
          } catch (IOException suppressed) {
            e.addSuppressed(suppressed);
          }
        }
      }
      throw e;
    }
  }

  /** The hook to give the trainer ({@code DistributedTrainerBuilder.optCallback}). */
  public TrainingCallback callback() {
    if (server == null) {
      return new MonitorCallback(null, -1, token, logsDir).withView(view);
    }
    InetSocketAddress local;
    try {
      local = (InetSocketAddress) server.getLocalAddress();
    } catch (IOException e) {
      throw new UncheckedIOException("The progress listener is closed", e);
    }
    return new MonitorCallback(local.getAddress().getHostAddress(), local.getPort(), token, logsDir)
        .withView(view);
  }

  /** The listener's port (-1 without a view); for tests. */
  int port() {
    try {
      return server == null ? -1 : ((InetSocketAddress) server.getLocalAddress()).getPort();
    } catch (IOException e) {
      return -1;
    }
  }

  private void run() {
    try {
      while (!closed) {
        long now = System.nanoTime();
        while (!unauthenticated.isEmpty() && now - unauthenticated.peekFirst().helloDeadline >= 0) {
          drop(unauthenticated.pollFirst(), "no hello within " + HELLO_TIMEOUT_MILLIS + " ms");
        }
        long waitMillis = 1000;
        if (!unauthenticated.isEmpty()) {
          long left = unauthenticated.peekFirst().helloDeadline - now;
          waitMillis = Math.max(1, Math.min(waitMillis, (left + 999_999) / 1_000_000));
        }
        selector.select(waitMillis);
        boolean accept = false;
        for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
          SelectionKey k = it.next();
          it.remove();
          if (!k.isValid()) {
            continue;
          }
          if (k.isAcceptable()) {
            accept = true;
          } else if (k.isReadable()) {
            read((Conn) k.attachment());
          }
        }
        if (accept) {
          acceptSome();
        }
        synchronized (lock) {
          passes++;
          lock.notifyAll();
        }
      }
    } catch (IOException | RuntimeException e) {
      if (!closed) {
        LOG.log(System.Logger.Level.WARNING, "Progress listener failed: " + e);
      }
    } finally {
      for (ArrayDeque<Conn> q : List.of(unauthenticated, authenticated)) {
        for (Conn c : q) {
          closeQuietly(c.ch);
        }
        q.clear();
      }
      closeQuietly(server);
      closeQuietly(selector);
      if (unlogged > 0) {
        LOG.log(
            System.Logger.Level.WARNING,
            unlogged
                + " more progress connection(s) without the job's token"
                + " were dropped or refused (not logged one by one)");
      }
      synchronized (lock) {
        open = 0;
        passes++;
        lock.notifyAll();
      }
    }
  }

  /** Accepts what is pending (a bounded number per pass, so that reads go on during a flood). */
  private void acceptSome() throws IOException {
    for (int i = 0; i < MAX_UNAUTHENTICATED; i++) {
      SocketChannel ch;
      try {
        ch = server.accept();
      } catch (ClosedChannelException e) {
        throw e;
      } catch (IOException e) {
        // e.g. out of file descriptors during a flood: back off a little, then go on
        warn("The progress listener could not accept a connection: " + e);
        try {
          Thread.sleep(10);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
        }
        return;
      }
      if (ch == null) {
        return;
      }
      Conn c =
          new Conn(
              ch,
              ch.socket().getRemoteSocketAddress(),
              System.nanoTime() + HELLO_TIMEOUT_MILLIS * 1_000_000);
      if (unauthenticated.size() >= MAX_UNAUTHENTICATED) {
        drop(
            unauthenticated.pollFirst(),
            "more than "
                + MAX_UNAUTHENTICATED
                + " connections waiting for their hello (it was the longest waiting)");
      }
      try {
        ch.configureBlocking(false);
        c.key = ch.register(selector, SelectionKey.OP_READ, c);
      } catch (IOException e) {
        closeQuietly(ch);
        continue;
      }
      unauthenticated.addLast(c);
      read(c); // rank 0 sends its hello as soon as it has connected
    }
  }

  /** Reads what {@code c} has sent and acts on each whole line. */
  private void read(Conn c) {
    int n;
    try {
      n = c.ch.read(c.buf);
    } catch (IOException e) {
      end(c, "it failed: " + e);
      return;
    }
    if (!lines(c)) {
      return; // dropped
    }
    if (n < 0) {
      if (c.authenticated && c.buf.position() > 0) {
        onLine(c, c.buf.array(), 0, c.buf.position()); // a last line without its newline
      }
      end(c, "it closed the connection before its hello");
    } else if (!c.buf.hasRemaining()) {
      end(
          c,
          c.authenticated
              ? "a line of more than " + MAX_LINE_BYTES + " bytes"
              : "a hello of more than " + MAX_HELLO_BYTES + " bytes");
    }
  }

  /** Handles the whole lines in {@code c.buf}; false if the connection was dropped. */
  private boolean lines(Conn c) {
    ByteBuffer b = c.buf;
    byte[] a = b.array();
    int limit = b.position();
    int start = 0;
    for (int i = 0; i < limit; i++) {
      if (a[i] != '\n') {
        continue;
      }
      int end = i > start && a[i - 1] == '\r' ? i - 1 : i;
      if (c.authenticated) {
        onLine(c, a, start, end);
      } else if (MessageDigest.isEqual(Arrays.copyOfRange(a, start, end), hello)) {
        authenticate(c); // c.buf is now a line buffer: what followed the hello goes on there
        c.buf.put(a, i + 1, limit - i - 1);
        return lines(c);
      } else {
        unauthenticated.remove(c);
        drop(c, "wrong hello");
        return false;
      }
      start = i + 1;
    }
    System.arraycopy(a, start, a, 0, limit - start); // keep the partial line
    b.position(limit - start);
    return true;
  }

  private void authenticate(Conn c) {
    unauthenticated.remove(c);
    if (authenticated.size() >= MAX_AUTHENTICATED) {
      Conn oldest = authenticated.pollFirst();
      closeQuietly(oldest.ch);
      oldest.key.cancel();
      synchronized (lock) {
        open--;
      }
      LOG.log(
          System.Logger.Level.WARNING,
          "Dropped the oldest of "
              + MAX_AUTHENTICATED
              + " progress connections from rank 0 ("
              + oldest.remote
              + ") for a new one from "
              + c.remote);
    }
    c.authenticated = true;
    c.buf = ByteBuffer.allocate(MAX_LINE_BYTES);
    authenticated.addLast(c);
    synchronized (lock) {
      open++;
    }
  }

  private void onLine(Conn c, byte[] a, int from, int to) {
    Object event = ProgressWire.parse(new String(a, from, to - from, StandardCharsets.UTF_8));
    try {
      if (event instanceof StepProgress) {
        view.onStep((StepProgress) event);
      } else if (event instanceof EpochMetrics) {
        view.onEpochEnd((EpochMetrics) event);
      } else if (event instanceof StragglerReport.Slowest s) {
        view.onStraggler(s);
      }
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.WARNING, "The progress view failed on a line from rank 0: " + e);
    }
  }

  /**
   * The connection ended or broke the protocol: an authenticated one quietly, a stranger as a drop.
   */
  private void end(Conn c, String why) {
    if (c.authenticated) {
      c.key.cancel();
      closeQuietly(c.ch);
      if (authenticated.remove(c)) {
        synchronized (lock) {
          open--;
          lock.notifyAll();
        }
      }
      boolean ended = why.startsWith("it closed") || why.startsWith("it failed");
      LOG.log(
          ended ? System.Logger.Level.DEBUG : System.Logger.Level.WARNING,
          "Progress connection from " + c.remote + (ended ? " ended: " : " dropped: ") + why);
    } else {
      unauthenticated.remove(c);
      drop(c, why);
    }
  }

  /** Closes a connection without the job's token; logs at most one line per interval. */
  private void drop(Conn c, String why) {
    if (c.key != null) {
      c.key.cancel();
    }
    closeQuietly(c.ch);
    warn("Dropped a progress connection without the job's token from " + c.remote + ": " + why);
  }

  /** Logs a warning about strangers, at most one line per interval, with a count of the others. */
  private void warn(String message) {
    long now = System.nanoTime();
    if (!loggedOnce || now - lastLogNanos >= LOG_INTERVAL_MILLIS * 1_000_000) {
      LOG.log(
          System.Logger.Level.WARNING,
          message
              + (unlogged > 0
                  ? " (and " + unlogged + " more such events since the last such line)"
                  : ""));
      loggedOnce = true;
      lastLogNanos = now;
      unlogged = 0;
    } else {
      unlogged++;
    }
  }

  private static void closeQuietly(Closeable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (IOException e) {
      LOG.log(System.Logger.Level.DEBUG, "Could not close a progress connection: " + e);
    }
  }

  /**
   * Stops listening. Waits up to 5 s for rank 0's connections to end first (connections already
   * waiting to be accepted included), so the events it sent just before its task finished are all
   * shown.
   */
  @Override
  public void close() {
    if (server == null) {
      return;
    }
    long deadline = System.nanoTime() + 5_000_000_000L;
    synchronized (lock) {
      long target = passes + 2; // one pass accepts what is queued, the next reads it
      selector.wakeup();
      long left;
      while ((open > 0 || passes < target)
          && loop.isAlive()
          && (left = deadline - System.nanoTime()) > 0) {
        try {
          lock.wait(Math.max(1, left / 1_000_000));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    closed = true;
    selector.wakeup();
    try {
      loop.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (loop.isAlive()) {
      LOG.log(System.Logger.Level.WARNING, "The progress listener's thread did not end within 5 s");
    }
  }
}
