package dev.sparktrainer.monitor;

import dev.sparktrainer.train.TrainingCallback;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
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
 * <p>Connections must present the monitor's random token first; anything else is dropped. Progress is
 * best effort: if rank 0 cannot connect, training goes on and only the live view is missing.
 */
public final class TrainingMonitor implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(TrainingMonitor.class.getName());

  private final ServerSocket server;
  private final String token;
  private final ProgressView view;
  private final String logsDir;
  private final Thread acceptor;
  private final List<Socket> connections = new CopyOnWriteArrayList<>();
  private volatile boolean closed;

  private TrainingMonitor(ServerSocket server, ProgressView view, String logsDir) {
    this.server = server;
    this.view = view;
    this.logsDir = logsDir;
    byte[] t = new byte[16];
    new SecureRandom().nextBytes(t);
    this.token = HexFormat.of().formatHex(t);
    if (server != null) {
      acceptor = new Thread(this::acceptLoop, "spark-trainer-progress");
      acceptor.setDaemon(true);
      acceptor.start();
    } else {
      acceptor = null;
    }
  }

  /**
   * Starts watching: a progress listener on the driver's address ({@code spark.driver.host}) if
   * {@code view} is not null, TensorBoard files under {@code logsDir} ({@code train/} and {@code
   * validation/}) if it is not null.
   */
  public static TrainingMonitor start(SparkSession spark, ProgressView view, String logsDir) throws IOException {
    String host = spark.sparkContext().getConf().get("spark.driver.host", InetAddress.getLocalHost().getHostAddress());
    return start(host, view, logsDir);
  }

  /** As {@link #start(SparkSession, ProgressView, String)}, listening on {@code host} (reachable from rank 0). */
  public static TrainingMonitor start(String host, ProgressView view, String logsDir) throws IOException {
    ServerSocket server = null;
    if (view != null) {
      server = new ServerSocket();
      server.bind(new InetSocketAddress(host, 0));
      server.setSoTimeout(1000);
    }
    return new TrainingMonitor(server, view, logsDir);
  }

  /** The hook to give the trainer ({@code DistributedTrainer.Builder.optCallback}). */
  public TrainingCallback callback() {
    String host = server == null ? null : server.getInetAddress().getHostAddress();
    int port = server == null ? -1 : server.getLocalPort();
    return new MonitorCallback(host, port, token, logsDir);
  }

  private void acceptLoop() {
    while (!closed) {
      try {
        Socket s = server.accept();
        connections.add(s);
        Thread reader = new Thread(() -> read(s), "spark-trainer-progress-reader");
        reader.setDaemon(true);
        reader.start();
      } catch (SocketTimeoutException e) {
        // poll the closed flag
      } catch (IOException e) {
        if (!closed) {
          LOG.log(System.Logger.Level.WARNING, "Progress listener failed: " + e);
        }
        return;
      }
    }
  }

  private void read(Socket s) {
    try (s; BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8))) {
      s.setSoTimeout(1000);
      String hello = readLine(in, s);
      if (hello == null || !hello.startsWith("HELLO ")
          || !MessageDigest.isEqual(hello.substring(6).getBytes(StandardCharsets.UTF_8),
              token.getBytes(StandardCharsets.UTF_8))) {
        LOG.log(System.Logger.Level.WARNING, "Dropped a progress connection without the job's token from "
            + s.getRemoteSocketAddress());
        return;
      }
      for (String line; (line = readLine(in, s)) != null; ) {
        Object event = ProgressWire.parse(line);
        if (event instanceof dev.sparktrainer.train.StepProgress) {
          view.onStep((dev.sparktrainer.train.StepProgress) event);
        } else if (event instanceof dev.sparktrainer.train.EpochMetrics) {
          view.onEpochEnd((dev.sparktrainer.train.EpochMetrics) event);
        }
      }
    } catch (IOException e) {
      if (!closed) {
        LOG.log(System.Logger.Level.DEBUG, "Progress connection ended: " + e);
      }
    } finally {
      synchronized (connections) {
        connections.remove(s);
        connections.notifyAll();
      }
    }
  }

  /** A line, waiting in 1 s slices until one arrives, the peer closes, or the monitor is closed. */
  private String readLine(BufferedReader in, Socket s) throws IOException {
    while (!closed) {
      try {
        return in.readLine();
      } catch (SocketTimeoutException e) {
        // poll the closed flag
      }
    }
    return null;
  }

  /**
   * Stops listening. Waits up to 5 s for rank 0's connections to end first, so the events it sent
   * just before its task finished are all shown.
   */
  @Override
  public void close() {
    long deadline = System.nanoTime() + 5_000_000_000L;
    synchronized (connections) {
      long left;
      while (!connections.isEmpty() && (left = deadline - System.nanoTime()) > 0) {
        try {
          connections.wait(Math.max(1, left / 1_000_000));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    closed = true;
    if (server != null) {
      try {
        server.close();
      } catch (IOException e) {
        LOG.log(System.Logger.Level.WARNING, "Could not close the progress listener: " + e);
      }
      for (Socket s : connections) {
        try {
          s.close();
        } catch (IOException e) {
          LOG.log(System.Logger.Level.DEBUG, "Could not close a progress connection: " + e);
        }
      }
    }
  }
}
