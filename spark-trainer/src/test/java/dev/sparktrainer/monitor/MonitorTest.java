package dev.sparktrainer.monitor;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.History;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;
import dev.sparktrainer.train.metrics.TrainingCallback;
import dev.sparktrainer.train.metrics.WorkerCountChange;
import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Rank 0 to driver progress, TensorBoard files from the callback, console lines, metrics.json, the
 * plot.
 */
class MonitorTest {
  @TempDir Path tmp;

  private static EpochMetrics epoch(int e, double loss, double acc, double valLoss, double valAcc) {
    return new EpochMetrics(
        e,
        23,
        1472,
        loss,
        acc,
        valLoss,
        valAcc,
        0.5,
        2944,
        0.1,
        0.2,
        0.15,
        0.05,
        0.1,
        0.2,
        "ab".repeat(32));
  }

  /** Records what the driver receives. */
  static final class Recorder implements ProgressView {
    final List<StepProgress> steps = new CopyOnWriteArrayList<>();
    final List<EpochMetrics> epochs = new CopyOnWriteArrayList<>();

    @Override
    public void onStep(StepProgress step) {
      steps.add(step);
    }

    @Override
    public void onEpochEnd(EpochMetrics metrics) {
      epochs.add(metrics);
    }
  }

  @Test
  void rankZeroReportsToTheDriverAndWritesTensorBoardFiles() throws Exception {
    Recorder view = new Recorder();
    Path logs = tmp.resolve("logs");
    EpochMetrics e0 = epoch(0, 1.5, 0.6, 0.7, 0.8);
    EpochMetrics e1 = epoch(1, 0.4, 0.9, Double.NaN, Double.NaN);
    try (TrainingMonitor monitor = TrainingMonitor.start("127.0.0.1", view, logs.toString())) {
      TrainingCallback cb = roundTrip(monitor.callback()); // it travels to the task serialized
      try (TrainingCallback.Listener l = cb.start(2, 2, 4, 0, 0, new Configuration())) {
        for (int e = 0; e < 2; e++) {
          for (int s = 1; s <= 4; s++) {
            l.onStep(new StepProgress(e, 2, s, 4, e * 4L + s, 1.0 / s, 1.0, 100, 1e-3, s * 0.1, 2));
          }
          l.onEpochEnd(e == 0 ? e0 : e1);
        }
      }
    } // close() waits for the connection to drain
    assertThat(view.epochs).containsExactly(e0, e1);
    // Steps are throttled, but the last step of each epoch always arrives.
    assertThat(view.steps).isNotEmpty();
    assertThat(view.steps).filteredOn(s -> s.step() == 4).hasSize(2);
    assertThat(view.steps.get(view.steps.size() - 1))
        .isEqualTo(new StepProgress(1, 2, 4, 4, 8, 0.25, 1.0, 100, 1e-3, 0.4, 2));

    List<EventFiles.Event> train = EventFiles.read(only(logs.resolve("train")));
    assertThat(train.get(0).fileVersion()).isEqualTo("brain.Event:2");
    List<EventFiles.Event> epochEvents =
        train.stream().filter(ev -> ev.scalars().containsKey("epoch_loss")).toList();
    assertThat(epochEvents).extracting(EventFiles.Event::step).containsExactly(0L, 1L);
    assertThat(epochEvents.get(0).scalars())
        .containsEntry("epoch_loss", 1.5f)
        .containsEntry("epoch_accuracy", 0.6f)
        .containsEntry("epoch_samples_per_sec", 2944f)
        .containsEntry("epoch_learning_rate", 1e-3f)
        .containsKeys(
            "epoch_time/data_wait_s",
            "epoch_time/compute_s",
            "epoch_time/allreduce_s",
            "epoch_time/optimizer_s");
    assertThat(train.stream().filter(ev -> ev.scalars().containsKey("batch_loss")).count())
        .isEqualTo(8);
    List<EventFiles.Event> validation = EventFiles.read(only(logs.resolve("validation")));
    assertThat(validation).hasSize(2); // file_version + epoch 0 (epoch 1 had no validation)
    assertThat(validation.get(1).scalars())
        .containsEntry("epoch_loss", 0.7f)
        .containsEntry("epoch_accuracy", 0.8f);
  }

  @Test
  void connectionsWithoutTheTokenAreDropped() throws Exception {
    Recorder view = new Recorder();
    try (TrainingMonitor monitor = TrainingMonitor.start("127.0.0.1", view, null)) {
      MonitorCallback cb = (MonitorCallback) monitor.callback();
      Field port = MonitorCallback.class.getDeclaredField("port");
      port.setAccessible(true);
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress("127.0.0.1", (int) port.get(cb)), 5000);
        OutputStreamWriter w = new OutputStreamWriter(s.getOutputStream(), StandardCharsets.UTF_8);
        w.write(
            "HELLO 00000000000000000000000000000000\n"
                + ProgressWire.epoch(epoch(0, 1, 1, 1, 1))
                + "\n");
        w.flush();
        s.setSoTimeout(5000);
        assertThat(s.getInputStream().read()).as("the monitor closes the connection").isEqualTo(-1);
      }
    }
    assertThat(view.epochs).isEmpty();
  }

  @Test
  void consoleShowsABarOnATerminalAndLogLinesOtherwise() {
    StepProgress p = new StepProgress(2, 10, 12, 22, 56, 0.42131, 0.5, 2310.4, 1e-3, 6.0, 2);
    assertThat(ConsoleProgress.barLine(p))
        .isEqualTo(
            "epoch 3/10 [==============>           ] 12/22  loss 0.4213  2,310 samples/s  ETA 1:22");
    // ETA: 0.5 s per step, 10 steps left in this epoch + 7 epochs x 22 steps = 164 steps.
    assertThat(ConsoleProgress.logLine(p))
        .isEqualTo("epoch 3/10 step 12/22 loss 0.4213 samples/s 2,310 ETA 1:22");

    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    ConsoleProgress log =
        new ConsoleProgress(new PrintStream(bytes, true, StandardCharsets.UTF_8), false, 3600);
    log.onStep(p);
    log.onStep(p); // within the interval: not printed
    log.onEpochEnd(epoch(2, 0.31, 0.912, 0.28, 0.9305));
    assertThat(bytes.toString(StandardCharsets.UTF_8))
        .isEqualTo(
            ConsoleProgress.logLine(p)
                + System.lineSeparator()
                + "epoch 3 done in 0.5 s: loss 0.3100 accuracy 0.9120 val_loss 0.2800 val_accuracy 0.9305"
                + " (2,944 samples/s)"
                + System.lineSeparator());
    assertThat(bytes.toString(StandardCharsets.UTF_8)).doesNotContain("\r");

    bytes.reset();
    ConsoleProgress bar =
        new ConsoleProgress(new PrintStream(bytes, true, StandardCharsets.UTF_8), true, 10);
    bar.onStep(new StepProgress(0, 1, 22, 22, 22, 0.1, 0.1, 10, 1e-3, 1, 2));
    bar.onEpochEnd(epoch(0, 0.1, 0.9, Double.NaN, Double.NaN));
    assertThat(bytes.toString(StandardCharsets.UTF_8))
        .startsWith("\repoch 1/1 [==========================] 22/22")
        .contains("\u001b[K\repoch 1 done in")
        .endsWith("\u001b[K" + System.lineSeparator());
  }

  /**
   * The epoch line names a straggler only when the report's warning fired (markedly and repeatedly
   * slower, {@code StragglerReport.WARN_*}): local mode's few-percent noise stays off the console.
   */
  @Test
  void theEpochLineNamesAStragglerOnlyWhenItWarrantsAWarning() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    ConsoleProgress log =
        new ConsoleProgress(new PrintStream(bytes, true, StandardCharsets.UTF_8), false, 3600);
    // The quickstart's figure: rank 0 3 % slower, the slowest in most steps, nobody waited long.
    log.onStraggler(
        new StragglerReport.Slowest(0, 0, "127.0.0.1", "driver", 2, 0.03, 0.05, 0.6, 0.01, false));
    log.onEpochEnd(epoch(0, 0.31, 0.912, 0.28, 0.9305));
    assertThat(bytes.toString(StandardCharsets.UTF_8))
        .isEqualTo(
            "epoch 1 done in 0.5 s: loss 0.3100 accuracy 0.9120 val_loss 0.2800 val_accuracy 0.9305"
                + " (2,944 samples/s)"
                + System.lineSeparator());

    bytes.reset();
    StragglerReport.Slowest slow =
        new StragglerReport.Slowest(1, 3, "host-b", "7", 4, 0.38, 0.52, 0.91, 27.4, true);
    log.onStraggler(slow);
    log.onEpochEnd(epoch(1, 0.31, 0.912, 0.28, 0.9305));
    assertThat(bytes.toString(StandardCharsets.UTF_8))
        .isEqualTo(
            "epoch 2 done in 0.5 s: loss 0.3100 accuracy 0.9120 val_loss 0.2800 val_accuracy 0.9305"
                + " (2,944 samples/s)  slow: rank 3 on host-b +38 %"
                + System.lineSeparator()
                + "warning: straggler: "
                + slow.summary()
                + System.lineSeparator());
  }

  @Test
  void metricsJsonAndPlot() throws IOException {
    History h = new History(List.of(epoch(0, 1.5, 0.6, 0.7, 0.8), epoch(1, 0.4, 0.9, 0.3, 0.95)));
    String json = MetricsReport.toJson(h, 12.5, new LinkedHashMap<>(Map.of("workers", 2)));
    JsonNode root = new ObjectMapper().readTree(json);
    assertThat(root.get("workers").asInt()).isEqualTo(2);
    assertThat(root.get("epochs")).hasSize(2);
    JsonNode e1 = root.get("epochs").get(1);
    for (String key :
        List.of(
            "loss", "accuracy", "val_loss", "val_accuracy", "samples_per_sec", "seconds", "time")) {
      assertThat(e1.has(key)).as(key).isTrue();
    }
    assertThat(e1.get("val_accuracy").asDouble()).isEqualTo(0.95);
    assertThat(e1.get("time").get("allreduce_s").asDouble()).isEqualTo(0.15);
    assertThat(root.get("final").get("val_accuracy").asDouble()).isEqualTo(0.95);
    assertThat(root.get("final").get("wall_seconds").asDouble()).isEqualTo(12.5);
    JsonNode noValidation =
        new ObjectMapper()
            .readTree(
                MetricsReport.toJson(
                    new History(List.of(epoch(0, 1, Double.NaN, Double.NaN, Double.NaN))),
                    1,
                    Map.of()));
    assertThat(noValidation.get("final").get("val_loss").isNull()).isTrue();

    ByteArrayOutputStream png = new ByteArrayOutputStream();
    TrainingPlot.write(h, "mlp(hidden=128)", png, 900, 720);
    BufferedImage img = ImageIO.read(new ByteArrayInputStream(png.toByteArray()));
    assertThat(img.getWidth()).isEqualTo(900);
    assertThat(img.getHeight()).isEqualTo(720);
    // Both series colours are drawn (training blue, validation orange).
    assertThat(colours(img)).contains(0x1f77b4, 0xff7f0e);
  }

  @Test
  void aChangeOfWorkersIsMarkedInThePlotAndMetricsJson() throws IOException {
    List<EpochMetrics> epochs =
        List.of(epoch(0, 1.5, 0.6, 0.7, 0.8), epoch(1, 0.4, 0.9, 0.3, 0.95));
    Resume shrink =
        new Resume(3, 1, 0, 0, "/ckpt", List.of(), new WorkerCountChange(3, 2, 24, 2, 1, false));
    int[] red = new int[2];
    for (History h : List.of(new History(epochs), new History(epochs, List.of(shrink)))) {
      ByteArrayOutputStream png = new ByteArrayOutputStream();
      TrainingPlot.write(h, "mlp", png, 900, 720);
      BufferedImage img = ImageIO.read(new ByteArrayInputStream(png.toByteArray()));
      int n = 0;
      for (int y = 0; y < img.getHeight(); y++) {
        for (int x = 0; x < img.getWidth(); x++) {
          int c = img.getRGB(x, y);
          n += ((c >> 16) & 0xff) > 200 && ((c >> 8) & 0xff) < 90 && (c & 0xff) < 90 ? 1 : 0;
        }
      }
      red[h.resumes().isEmpty() ? 0 : 1] = n;
    }
    assertThat(red[0]).as("red pixels without a change").isZero();
    assertThat(red[1]).as("red pixels of the marker (3 panels tall)").isGreaterThan(300);
    JsonNode root =
        new ObjectMapper()
            .readTree(MetricsReport.toJson(new History(epochs, List.of(shrink)), 1, Map.of()));
    assertThat(root.get("resumes").get(0).get("workers").get("to_workers").asInt()).isEqualTo(2);
  }

  private static Set<Integer> colours(BufferedImage img) {
    Set<Integer> out = new HashSet<>();
    for (int y = 0; y < img.getHeight(); y += 1) {
      for (int x = 0; x < img.getWidth(); x += 1) {
        out.add(img.getRGB(x, y) & 0xffffff);
      }
    }
    return out;
  }

  private static Path only(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      List<Path> files = new ArrayList<>(s.toList());
      assertThat(files).hasSize(1);
      return files.get(0);
    }
  }

  @SuppressWarnings("unchecked")
  private static <T> T roundTrip(T o) throws Exception {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(b)) {
      out.writeObject(o);
    }
    try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(b.toByteArray()))) {
      return (T) in.readObject();
    }
  }
}
