package dev.sparktrainer.monitor;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import org.junit.jupiter.api.Test;

/**
 * Images/s and decode time per image in the progress line, the epoch line, the JSON metrics and the
 * wire to the driver — only for runs with image columns.
 */
class ImageProgressTest {
  private static EpochMetrics epoch(EpochMetrics.Images images) {
    return new EpochMetrics(
        2, 10, 640, 0.5, 0.8, 0.6, 0.75, 3.0, 213.5, 0.1, 2.0, 0.2, 0.1, 1.2, 0.3, "ab12", null,
        images);
  }

  @Test
  void epochsWithImagesReportThem() {
    EpochMetrics m = epoch(new EpochMetrics.Images(427.0, 3.9));
    assertThat(ConsoleProgress.epochLine(m, 5))
        .endsWith("(214 samples/s, 427 images/s, decode 3.90 ms/image)");
    assertThat(m.toJson()).contains("\"images_per_s\":427.0", "\"decode_ms_per_image\":3.9");
    assertThat(MetricsReport.epochJson(m)).contains("images_per_sec", "decode_ms_per_image");
    assertThat(ProgressWire.parse(ProgressWire.epoch(m))).isEqualTo(m);

    EpochMetrics plain = epoch(null);
    assertThat(ConsoleProgress.epochLine(plain, 5)).endsWith("(214 samples/s)");
    assertThat(plain.toJson()).doesNotContain("images");
    assertThat(MetricsReport.epochJson(plain)).doesNotContain("images");
    assertThat(ProgressWire.parse(ProgressWire.epoch(plain))).isEqualTo(plain);
    assertThat(plain.imagesPerSecond()).isNaN();
  }

  @Test
  void stepsWithImagesReportThem() {
    StepProgress p = new StepProgress(0, 3, 5, 10, 5, 0.7, 0.8, 1000, 1e-3, 2.5, 2, 2000, 4.25);
    assertThat(ConsoleProgress.logLine(p))
        .contains("samples/s 1,000 2,000 images/s decode 4.25 ms/image ETA");
    assertThat(ProgressWire.parse(ProgressWire.step(p))).isEqualTo(p);
    StepProgress plain = new StepProgress(0, 3, 5, 10, 5, 0.7, 0.8, 1000, 1e-3, 2.5, 2);
    assertThat(ConsoleProgress.logLine(plain))
        .doesNotContain("images")
        .contains("samples/s 1,000 ETA");
    assertThat(ProgressWire.parse(ProgressWire.step(plain))).isEqualTo(plain);
  }
}
