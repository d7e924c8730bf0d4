package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.History;
import dev.sparktrainer.train.metrics.Resume;
import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.io.OutputStream;
import java.util.function.ToDoubleFunction;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.CombinedDomainXYPlot;
import org.jfree.chart.plot.ValueMarker;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.chart.ui.RectangleAnchor;
import org.jfree.chart.ui.TextAnchor;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * A PNG of the training curves (JFreeChart, headless): loss and accuracy per epoch, training and
 * validation, and the training throughput.
 */
public final class TrainingPlot {
  private static final Color TRAIN = new Color(0x1f, 0x77, 0xb4);
  private static final Color VALIDATION = new Color(0xff, 0x7f, 0x0e);

  private TrainingPlot() {}

  /** Writes the chart of {@code history} as a PNG of {@code width x height} pixels. */
  public static void write(History history, String title, OutputStream out, int width, int height)
      throws IOException {
    if (System.getProperty("java.awt.headless") == null) {
      System.setProperty("java.awt.headless", "true"); // servers and CI have no display
    }
    NumberAxis epochAxis = new NumberAxis("epoch");
    epochAxis.setStandardTickUnits(NumberAxis.createIntegerTickUnits());
    epochAxis.setAutoRangeIncludesZero(false);
    CombinedDomainXYPlot plot = new CombinedDomainXYPlot(epochAxis);
    plot.setGap(12);
    plot.add(panel(history, "loss", EpochMetrics::loss, EpochMetrics::validationLoss), 3);
    boolean accuracy = history.epochs().stream().anyMatch(e -> Double.isFinite(e.accuracy()));
    if (accuracy) {
      plot.add(
          panel(history, "accuracy", EpochMetrics::accuracy, EpochMetrics::validationAccuracy), 3);
    }
    if (history.epochs().stream()
        .anyMatch(e -> e.regression() != null)) { // regression: instead of accuracy
      plot.add(panel(history, "MSE", EpochMetrics::mse, EpochMetrics::validationMse), 2);
      plot.add(panel(history, "MAE", EpochMetrics::mae, EpochMetrics::validationMae), 2);
      plot.add(panel(history, "R²", EpochMetrics::r2, EpochMetrics::validationR2), 2);
    }
    plot.add(panel(history, "samples/s", EpochMetrics::samplesPerSecond, null), 2);
    for (Object sub : plot.getSubplots()) {
      markWorkerChanges(history, (XYPlot) sub);
    }
    JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, plot, true);
    chart.setBackgroundPaint(Color.WHITE);
    ChartUtils.writeChartAsPNG(out, chart, width, height);
  }

  private static XYPlot panel(
      History h,
      String name,
      ToDoubleFunction<EpochMetrics> train,
      ToDoubleFunction<EpochMetrics> validation) {
    XYSeriesCollection data = new XYSeriesCollection();
    data.addSeries(series(h, "training " + name, train));
    if (validation != null
        && h.epochs().stream().anyMatch(e -> Double.isFinite(validation.applyAsDouble(e)))) {
      data.addSeries(series(h, "validation " + name, validation));
    }
    NumberAxis axis = new NumberAxis(name);
    axis.setAutoRangeIncludesZero(false);
    XYLineAndShapeRenderer r = new XYLineAndShapeRenderer(true, true);
    for (int i = 0; i < data.getSeriesCount(); i++) {
      r.setSeriesPaint(i, i == 0 ? TRAIN : VALIDATION);
      r.setSeriesStroke(i, new BasicStroke(2f));
    }
    XYPlot p = new XYPlot(data, null, axis, r);
    p.setBackgroundPaint(Color.WHITE);
    p.setDomainGridlinePaint(Color.LIGHT_GRAY);
    p.setRangeGridlinePaint(Color.LIGHT_GRAY);
    return p;
  }

  /**
   * A vertical marker where the number of workers changed (a resume on another count), at its
   * position in the epoch axis (epoch e spans e to e + 1), labelled {@code 3→2 workers}.
   */
  private static void markWorkerChanges(History h, XYPlot p) {
    for (Resume r : h.resumes()) {
      if (r.workers() == null) {
        continue;
      }
      long steps = r.epoch() < h.epochs().size() ? h.epochs().get(r.epoch()).steps() : 0;
      double x = r.epoch() + (steps > 0 ? Math.min(1, (double) r.stepInEpoch() / steps) : 0);
      ValueMarker m =
          new ValueMarker(
              x,
              Color.RED,
              new BasicStroke(
                  1.5f,
                  BasicStroke.CAP_BUTT,
                  BasicStroke.JOIN_MITER,
                  10f,
                  new float[] {6f, 4f},
                  0f));
      m.setLabel(r.workers().fromWorkers() + "\u2192" + r.workers().toWorkers() + " workers");
      m.setLabelAnchor(RectangleAnchor.TOP_RIGHT);
      m.setLabelTextAnchor(TextAnchor.TOP_LEFT);
      p.addDomainMarker(m);
    }
  }

  private static XYSeries series(History h, String key, ToDoubleFunction<EpochMetrics> f) {
    XYSeries s = new XYSeries(key);
    for (EpochMetrics e : h.epochs()) {
      double v = f.applyAsDouble(e);
      if (Double.isFinite(v)) {
        s.add(e.epoch() + 1, v);
      }
    }
    return s;
  }
}
