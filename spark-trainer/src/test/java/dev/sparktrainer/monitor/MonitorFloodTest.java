package dev.sparktrainer.monitor;

import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.Digits;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.stream.Collectors;
import org.apache.spark.sql.SparkSession;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The driver's progress listener under a flood of strangers (idle connections, garbage and
 * oversized hellos; loopback only, bounded in count and time) while a real training run reports to
 * it.
 */
class MonitorFloodTest {
  private static SparkSession spark;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("monitor-flood")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
  }

  @AfterAll
  static void stop() {
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  private static int monitorThreads() {
    int n = 0;
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.isAlive()
          && t.getName().startsWith("spark-trainer-progress")
          && !t.getName().contains("sender")) {
        n++;
      }
    }
    return n;
  }

  @Test
  void aFloodOfStrangersNeitherStarvesTheRunsProgressNorTheDriversThreadsOrHeap() throws Exception {
    List<String> warnings = Collections.synchronizedList(new ArrayList<>());
    Logger jul = Logger.getLogger(TrainingMonitor.class.getName());
    Handler capture =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            if (r.getLevel().intValue() >= Level.WARNING.intValue()) {
              warnings.add(r.getMessage());
            }
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    jul.addHandler(capture);
    InMemoryDataset digits = Digits.load().shuffled(7);
    MonitorTest.Recorder view = new MonitorTest.Recorder();
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    AtomicBoolean running = new AtomicBoolean(true);
    AtomicInteger maxMonitorThreads = new AtomicInteger();
    AtomicInteger peakThreads = new AtomicInteger();
    AtomicInteger opened = new AtomicInteger();
    List<long[]> oversized =
        Collections.synchronizedList(new ArrayList<>()); // {bytes written, 1 if cut off}
    List<Thread> floods = new ArrayList<>();
    int epochs = 2;
    int idleHeld = 150;
    TrainedModel model;
    int baseline;
    try (TrainingMonitor monitor = TrainingMonitor.start("127.0.0.1", view, null)) {
      MonitorCallback cb = (MonitorCallback) monitor.callback();
      Field portField = MonitorCallback.class.getDeclaredField("port");
      portField.setAccessible(true);
      InetSocketAddress target = new InetSocketAddress("127.0.0.1", (int) portField.get(cb));
      baseline = mx.getThreadCount();
      // 1. idle connections: up to 150 held open at a time, at most 600 in all, 40 per second
      floods.add(
          start(
              "flood-idle",
              () -> {
                Deque<Socket> held = new ArrayDeque<>();
                try {
                  for (int i = 0; i < 600 && running.get(); i++) {
                    Socket s = new Socket();
                    try {
                      s.connect(target, 2000);
                    } catch (IOException e) {
                      // A full backlog on a loaded machine: this one did not get in, the flood
                      // goes on (ending it here would leave the 300 strangers to the other flood).
                      closeQuietly(s);
                      Thread.sleep(25);
                      continue;
                    }
                    opened.incrementAndGet();
                    held.add(s);
                    if (held.size() > idleHeld) {
                      held.poll().close();
                    }
                    Thread.sleep(25);
                  }
                } catch (IOException | InterruptedException e) {
                  // the flood ends
                } finally {
                  for (Socket s : held) {
                    closeQuietly(s);
                  }
                }
              }));
      // 2. garbage and wrong hellos, 20 per second
      floods.add(
          start(
              "flood-garbage",
              () -> {
                Random random = new Random(1);
                for (int i = 0; i < 300 && running.get(); i++) {
                  try (Socket s = new Socket()) {
                    s.connect(target, 2000);
                    opened.incrementAndGet();
                    byte[] junk = new byte[random.nextInt(200) + 1];
                    random.nextBytes(junk);
                    OutputStream out = s.getOutputStream();
                    out.write(i % 3 == 0 ? "HELLO 0123\n".getBytes(StandardCharsets.UTF_8) : junk);
                    out.write('\n');
                    out.flush();
                    Thread.sleep(50);
                  } catch (IOException | InterruptedException e) {
                    // dropped
                  }
                }
              }));
      // 3. four oversized hellos: 32 MiB without a newline each
      for (int k = 0; k < 4; k++) {
        floods.add(
            start(
                "flood-oversized-" + k,
                () -> {
                  AtomicLong written = new AtomicLong();
                  boolean cut = false;
                  try (Socket s = new Socket()) {
                    s.connect(target, 2000);
                    opened.incrementAndGet();
                    s.setSoTimeout(1000);
                    OutputStream out = s.getOutputStream();
                    byte[] chunk = "HELLO ".repeat(64 * 1024 / 6).getBytes(StandardCharsets.UTF_8);
                    long deadline = System.nanoTime() + 20_000_000_000L;
                    while (written.get() < (32L << 20) && System.nanoTime() < deadline) {
                      out.write(chunk);
                      written.addAndGet(chunk.length);
                    }
                    cut = written.get() < (32L << 20);
                  } catch (IOException e) {
                    cut = true;
                  }
                  oversized.add(new long[] {written.get(), cut ? 1 : 0});
                }));
      }
      floods.add(
          start(
              "flood-watch",
              () -> {
                while (running.get()) {
                  maxMonitorThreads.accumulateAndGet(monitorThreads(), Math::max);
                  peakThreads.accumulateAndGet(mx.getThreadCount(), Math::max);
                  try {
                    Thread.sleep(20);
                  } catch (InterruptedException e) {
                    return;
                  }
                }
              }));
      // the real run, reporting to the monitor while the flood goes on
      model =
          DistributedTrainer.builder()
              .setModel(MlpSpec.of(64, 10, 64))
              .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
              .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
              .setTrainingData(digits.slice(0, 1437).trainBatches(32, 1, true))
              .setNumWorkers(1)
              .optEpochs(epochs)
              .optSeed(3)
              .optRingHost("127.0.0.1")
              .optCallback(monitor.callback())
              .build()
              .fit(spark);
      // keep the flood on until at least 300 strangers have come
      long until = System.nanoTime() + 30_000_000_000L;
      while (opened.get() < 300 && System.nanoTime() < until) {
        Thread.sleep(50);
      }
    } finally {
      running.set(false);
      for (Thread t : floods) {
        t.join(30_000);
      }
      jul.removeHandler(capture);
    }
    System.out.printf(
        "flood: %d strangers, monitor threads at most %d, JVM threads +%d, oversized hellos cut"
            + " after %s bytes, %d warnings, %d steps and %d epochs received%n",
        opened.get(),
        maxMonitorThreads.get(),
        peakThreads.get() - baseline,
        oversized.stream().map(o -> Long.toString(o[0])).collect(Collectors.joining("/")),
        warnings.size(),
        view.steps.size(),
        view.epochs.size());
    SoftAssertions soft = new SoftAssertions();
    soft.assertThat(model.history().epochs()).hasSize(epochs);
    soft.assertThat(view.epochs).as("every epoch's metrics reached the driver").hasSize(epochs);
    soft.assertThat(view.steps).as("step progress reached the driver").isNotEmpty();
    soft.assertThat(opened.get()).as("strangers that connected").isGreaterThanOrEqualTo(300);
    soft.assertThat(maxMonitorThreads.get())
        .as("the monitor's threads during the flood")
        .isLessThanOrEqualTo(2);
    soft.assertThat(peakThreads.get() - baseline)
        .as("JVM threads added during the flood")
        .isLessThan(idleHeld / 2);
    soft.assertThat(oversized).hasSize(4);
    for (long[] o : oversized) {
      soft.assertThat(o[1])
          .as("an oversized hello is cut off by the driver (%d bytes written)", o[0])
          .isEqualTo(1);
      soft.assertThat(o[0])
          .as("bytes it got to write before that (socket buffers)")
          .isLessThan(16L << 20);
    }
    soft.assertThat(warnings.size())
        .as("warnings logged for %d strangers", opened.get())
        .isLessThanOrEqualTo(10);
    soft.assertAll();
  }

  private static Thread start(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    t.start();
    return t;
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException e) {
      // already closed
    }
  }
}
