package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;
import dev.sparktrainer.train.metrics.TrainingCallback;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;

/**
 * {@link TrainingMonitor}'s hook as it travels to rank 0's task: the driver's progress address and
 * token, and the TensorBoard directory.
 */
final class MonitorCallback implements TrainingCallback {
  private static final long serialVersionUID = 1L;
  private static final System.Logger LOG = System.getLogger(MonitorCallback.class.getName());

  private final String host;
  private final int port;
  private final String token;
  private final String logsDir;

  /** The driver's view (not shipped to the tasks): worker-count changes happen on the driver. */
  private transient ProgressView view;

  /** This callback, reporting worker-count changes to {@code view} on the driver. */
  MonitorCallback withView(ProgressView view) {
    this.view = view;
    return this;
  }

  @Override
  public void onWorkersChanged(int from, int to, String reason) {
    ProgressView v = view;
    if (v != null) {
      v.onWorkersChanged(from, to, reason);
    }
  }

  MonitorCallback(String host, int port, String token, String logsDir) {
    this.host = host;
    this.port = port;
    this.token = token;
    this.logsDir = logsDir;
  }

  @Override
  public Listener start(
      int numWorkers,
      int epochs,
      long stepsPerEpoch,
      long globalStep,
      int attempt,
      Configuration conf)
      throws IOException {
    TensorBoardWriter train = null;
    TensorBoardWriter validation = null;
    if (logsDir != null) {
      train = TensorBoardWriter.create(logsDir + "/train", conf);
      validation = TensorBoardWriter.create(logsDir + "/validation", conf);
    }
    Sender sender = null;
    if (host != null) {
      try {
        sender = new Sender(host, port, token);
      } catch (IOException e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "Cannot report progress to the driver at "
                + host
                + ":"
                + port
                + " (training goes on without live progress): "
                + e);
      }
    }
    return new MonitorListener(train, validation, sender, stepsPerEpoch);
  }

  /** Rank 0's side: TensorBoard scalars and progress lines. */
  private static final class MonitorListener implements Listener {
    private final TensorBoardWriter train;
    private final TensorBoardWriter validation;
    private final Sender sender;

    /** About 100 step points per epoch in TensorBoard, every step for short epochs. */
    private final long stepEvery;

    private long lastSend;
    private long lastFlush = System.nanoTime();
    private double learningRate = Double.NaN;

    MonitorListener(
        TensorBoardWriter train, TensorBoardWriter validation, Sender sender, long stepsPerEpoch) {
      this.train = train;
      this.validation = validation;
      this.sender = sender;
      this.stepEvery = Math.max(1, stepsPerEpoch / 100);
    }

    @Override
    public void onStep(StepProgress p) {
      learningRate = p.learningRate();
      long now = System.nanoTime();
      if (train != null && (p.step() % stepEvery == 0 || p.step() == p.stepsPerEpoch())) {
        Map<String, Double> m = new LinkedHashMap<>();
        m.put("batch_loss", p.loss());
        m.put("batch_learning_rate", p.learningRate());
        m.put("batch_samples_per_sec", p.samplesPerSecond());
        if (!Double.isNaN(p.imagesPerSecond())) {
          m.put("batch_images_per_sec", p.imagesPerSecond());
          m.put("batch_decode_ms_per_image", p.decodeMillisPerImage());
        }
        write(train, p.globalStep(), m);
        if (now - lastFlush > 5_000_000_000L) {
          flush();
          lastFlush = now;
        }
      }
      if (sender != null && (now - lastSend >= 200_000_000L || p.step() == p.stepsPerEpoch())) {
        lastSend = now;
        sender.offer(ProgressWire.step(p));
      }
    }

    @Override
    public void onStragglers(StragglerReport r) {
      if (train != null) {
        write(train, r.epoch(), StragglerScalars.of(r));
      }
      if (sender != null) {
        sender.offer(ProgressWire.straggler(r.slowest()));
      }
    }

    @Override
    public void onEpochEnd(EpochMetrics e) {
      if (train != null) {
        Map<String, Double> m = new LinkedHashMap<>();
        m.put("epoch_loss", e.loss());
        m.put("epoch_accuracy", e.accuracy());
        if (e.regression() != null) {
          m.put("epoch_mse", e.mse());
          m.put("epoch_mae", e.mae());
          m.put("epoch_r2", e.r2());
        }
        m.put("epoch_learning_rate", learningRate);
        m.put("epoch_samples_per_sec", e.samplesPerSecond());
        m.put("epoch_seconds", e.seconds());
        if (e.images() != null) {
          m.put("epoch_images_per_sec", e.imagesPerSecond());
          m.put("epoch_decode_ms_per_image", e.decodeMillisPerImage());
        }
        m.put("epoch_time/data_wait_s", e.dataWaitSeconds());
        m.put("epoch_time/compute_s", e.computeSeconds());
        m.put("epoch_time/allreduce_s", e.allReduceSeconds());
        m.put("epoch_time/optimizer_s", e.optimizerSeconds());
        m.put("epoch_time/backward_s", e.backwardSeconds());
        m.put("epoch_time/communication_s", e.communicationSeconds());
        write(train, e.epoch(), m);
        Map<String, Double> v = new LinkedHashMap<>();
        v.put("epoch_loss", e.validationLoss());
        v.put("epoch_accuracy", e.validationAccuracy());
        if (e.regression() != null) {
          v.put("epoch_mse", e.validationMse());
          v.put("epoch_mae", e.validationMae());
          v.put("epoch_r2", e.validationR2());
        }
        if (Double.isFinite(e.validationLoss())) {
          write(validation, e.epoch(), v);
        }
        flush();
      }
      if (sender != null) {
        sender.offer(ProgressWire.epoch(e));
      }
    }

    private static void write(TensorBoardWriter w, long step, Map<String, Double> m) {
      try {
        w.scalars(step, m);
      } catch (IOException ex) {
        throw new UncheckedIOException(
            "Cannot write TensorBoard events to " + w.file() + ": " + ex, ex);
      }
    }

    private void flush() {
      try {
        train.flush();
        validation.flush();
      } catch (IOException ex) {
        throw new UncheckedIOException("Cannot flush TensorBoard events: " + ex, ex);
      }
    }

    @Override
    public void close() {
      for (TensorBoardWriter w : new TensorBoardWriter[] {train, validation}) {
        if (w != null) {
          try {
            w.close();
          } catch (IOException ex) {
            LOG.log(System.Logger.Level.WARNING, "Cannot close " + w.file() + ": " + ex);
          }
        }
      }
      if (sender != null) {
        sender.close();
      }
    }
  }

  /**
   * Sends lines from a daemon thread through a bounded queue: training never waits on the driver
   * (when the queue is full, step lines are dropped).
   */
  private static final class Sender {
    private static final String END = "\u0000end";
    private final Socket socket;
    private final BlockingQueue<String> queue = new ArrayBlockingQueue<>(256);
    private final Thread thread;

    Sender(String host, int port, String token) throws IOException {
      socket = new Socket();
      socket.connect(new InetSocketAddress(host, port), 10_000);
      socket.setSoTimeout(10_000);
      OutputStream raw = socket.getOutputStream();
      Writer out = new OutputStreamWriter(raw, StandardCharsets.UTF_8);
      out.write("HELLO " + token + "\n");
      out.flush();
      thread = new Thread(() -> run(out), "spark-trainer-progress-sender");
      thread.setDaemon(true);
      thread.start();
    }

    void offer(String line) {
      queue.offer(line);
    }

    private void run(Writer out) {
      try {
        while (true) {
          String line = queue.take();
          if (line == END) {
            break;
          }
          out.write(line);
          out.write('\n');
          if (queue.isEmpty()) {
            out.flush();
          }
        }
        out.flush();
      } catch (IOException e) {
        LOG.log(System.Logger.Level.WARNING, "Progress connection to the driver lost: " + e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        try {
          socket.close();
        } catch (IOException e) {
          LOG.log(System.Logger.Level.DEBUG, "Could not close the progress connection: " + e);
        }
      }
    }

    /** Sends what is queued (waiting up to 5 s), then closes. */
    void close() {
      try {
        if (!queue.offer(END, 5, TimeUnit.SECONDS)) {
          thread.interrupt();
        }
        thread.join(5_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (thread.isAlive()) {
        thread.interrupt();
        try {
          socket.close();
        } catch (IOException e) {
          LOG.log(System.Logger.Level.DEBUG, "Could not close the progress connection: " + e);
        }
      }
    }
  }
}
