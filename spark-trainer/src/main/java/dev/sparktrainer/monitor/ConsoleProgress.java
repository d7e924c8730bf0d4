package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;
import java.io.PrintStream;
import java.util.Locale;

/**
 * Progress on the driver's console: a redrawn progress bar on a terminal, plain log lines (every
 * {@code logEverySeconds}, and one per epoch) otherwise — so logs of a batch job or CI stay
 * readable.
 *
 * <pre>
 * epoch 3/10 [===========>             ] 12/22  loss 0.4213  2,310 samples/s  ETA 0:41   (redrawn; then:)
 * epoch 3 done in 4.2 s: loss 0.3104 accuracy 0.9120 val_loss 0.2811 val_accuracy 0.9305 (2,291 samples/s)  slow: rank 3 on host-b +38 %
 * warning: straggler: epoch 3: slowest rank 3 on host-b (executor 2) of 4, +38 % median ...
 * </pre>
 *
 * <p>The {@code slow: ...} note and the warning appear only for an epoch whose straggler report
 * warns ({@link StragglerReport.Slowest#warning()}: the slowest rank in more than half of the
 * steps, at least 20 % slower, and the others' wait for it a noticeable share of their time).
 */
public final class ConsoleProgress implements ProgressView {
  private static final int BAR = 26;

  private final PrintStream out;
  private final boolean terminal;
  private final long logEveryNanos;
  private long lastDraw;
  private boolean lineOpen;

  /** The slowest rank of the epoch whose end comes next (null: a single worker). */
  private StragglerReport.Slowest slowest;

  /**
   * @param out where to write (the CLI uses stderr, keeping stdout for results)
   * @param terminal draw a bar redrawn in place ({@code \r}); else log lines
   * @param logEverySeconds without a terminal, at most one step line per this many seconds
   */
  public ConsoleProgress(PrintStream out, boolean terminal, double logEverySeconds) {
    this.out = out;
    this.terminal = terminal;
    this.logEveryNanos = (long) (logEverySeconds * 1e9);
  }

  /**
   * A bar if this process has a terminal (and TERM is not dumb), log lines every 10 s otherwise.
   */
  public static ConsoleProgress auto(PrintStream out) {
    return new ConsoleProgress(out, isTerminal(), 10);
  }

  /** Whether stdout/stderr look like an interactive terminal. */
  public static boolean isTerminal() {
    return System.console() != null && !"dumb".equals(System.getenv("TERM"));
  }

  @Override
  public synchronized void onStep(StepProgress p) {
    long now = System.nanoTime();
    boolean last = p.step() == p.stepsPerEpoch();
    if (terminal) {
      if (!last && now - lastDraw < 100_000_000L) {
        return;
      }
      lastDraw = now;
      out.print("\r" + barLine(p) + "\u001b[K");
      out.flush();
      lineOpen = true;
    } else if (lastDraw == 0 || now - lastDraw >= logEveryNanos) {
      lastDraw = now;
      out.println(logLine(p));
    }
  }

  @Override
  public synchronized void onStraggler(StragglerReport.Slowest s) {
    slowest = s;
  }

  @Override
  public synchronized void onEpochEnd(EpochMetrics m) {
    StragglerReport.Slowest s = slowest != null && slowest.epoch() == m.epoch() ? slowest : null;
    slowest = null;
    // Every epoch has a slowest rank; naming it is noise unless it is markedly slower in most steps
    // and cost the others time (the report's warning thresholds, StragglerReport.WARN_*). Every
    // epoch's figures still go to metrics.json and TensorBoard.
    if (s != null && !s.warning()) {
      s = null;
    }
    String line = epochLine(m, -1) + (s == null ? "" : "  " + s.progressText());
    if (lineOpen) {
      // The bar becomes the epoch's summary: one line per epoch stays on the screen.
      out.print("\r" + line + "\u001b[K");
      out.println();
      lineOpen = false;
    } else {
      out.println(line);
    }
    if (s != null) {
      out.println("warning: straggler: " + s.summary());
    }
    out.flush();
  }

  @Override
  public synchronized void onWorkersChanged(int from, int to, String reason) {
    if (lineOpen) {
      out.println();
      lineOpen = false;
    }
    out.println("workers: " + from + " -> " + to + " (" + reason + ")");
    out.flush();
  }

  /** {@code epoch 3/10 [====> ] 12/22 loss 0.4213 2,310 samples/s ETA 0:41}. */
  static String barLine(StepProgress p) {
    int filled = (int) (BAR * p.step() / Math.max(1, p.stepsPerEpoch()));
    StringBuilder bar = new StringBuilder("[");
    for (int i = 0; i < BAR; i++) {
      bar.append(i < filled ? '=' : i == filled ? '>' : ' ');
    }
    bar.append(']');
    return String.format(
        Locale.ROOT,
        "epoch %d/%d %s %d/%d  loss %.4f  %s samples/s%s  ETA %s",
        p.epoch() + 1,
        p.epochs(),
        bar,
        p.step(),
        p.stepsPerEpoch(),
        p.loss(),
        rate(p.samplesPerSecond()),
        images(p, "  "),
        eta(p));
  }

  /** {@code epoch 3/10 step 12/22 loss 0.4213 samples/s 2310 ETA 0:41}. */
  static String logLine(StepProgress p) {
    return String.format(
        Locale.ROOT,
        "epoch %d/%d step %d/%d loss %.4f samples/s %s%s ETA %s",
        p.epoch() + 1,
        p.epochs(),
        p.step(),
        p.stepsPerEpoch(),
        p.loss(),
        rate(p.samplesPerSecond()),
        images(p, " "),
        eta(p));
  }

  /**
   * With image columns: {@code images/s 4096 decode 3.90 ms/image} (rank 0's decoders), after
   * {@code sep}; else empty.
   */
  static String images(StepProgress p, String sep) {
    if (Double.isNaN(p.imagesPerSecond())) {
      return "";
    }
    return sep
        + rate(p.imagesPerSecond())
        + " images/s"
        + (Double.isFinite(p.decodeMillisPerImage())
            ? String.format(Locale.ROOT, " decode %.2f ms/image", p.decodeMillisPerImage())
            : "");
  }

  /** The summary line of an epoch ({@code epochs} < 0: without the total). */
  public static String epochLine(EpochMetrics m, int epochs) {
    StringBuilder sb = new StringBuilder();
    sb.append(
        String.format(
            Locale.ROOT,
            "epoch %d%s done in %.1f s: loss %.4f",
            m.epoch() + 1,
            epochs > 0 ? "/" + epochs : "",
            m.seconds(),
            m.loss()));
    if (Double.isFinite(m.accuracy())) {
      sb.append(String.format(Locale.ROOT, " accuracy %.4f", m.accuracy()));
    }
    if (Double.isFinite(m.validationLoss())) {
      sb.append(String.format(Locale.ROOT, " val_loss %.4f", m.validationLoss()));
    }
    if (Double.isFinite(m.validationAccuracy())) {
      sb.append(String.format(Locale.ROOT, " val_accuracy %.4f", m.validationAccuracy()));
    }
    if (m.regression() != null) {
      sb.append(String.format(Locale.ROOT, " mse %.4g mae %.4g r2 %.4f", m.mse(), m.mae(), m.r2()));
      if (Double.isFinite(m.validationMse())) {
        sb.append(
            String.format(
                Locale.ROOT,
                " val_mse %.4g val_mae %.4g val_r2 %.4f",
                m.validationMse(),
                m.validationMae(),
                m.validationR2()));
      }
    }
    sb.append(" (").append(rate(m.samplesPerSecond())).append(" samples/s");
    if (m.images() != null) {
      sb.append(", ").append(rate(m.imagesPerSecond())).append(" images/s");
      if (Double.isFinite(m.decodeMillisPerImage())) {
        sb.append(String.format(Locale.ROOT, ", decode %.2f ms/image", m.decodeMillisPerImage()));
      }
    }
    sb.append(')');
    return sb.toString();
  }

  /** Remaining time of the whole job at this epoch's pace. */
  static String eta(StepProgress p) {
    if (p.step() <= 0 || p.epochSeconds() <= 0) {
      return "?";
    }
    double perStep = p.epochSeconds() / p.step();
    long remaining =
        (p.stepsPerEpoch() - p.step()) + (long) (p.epochs() - p.epoch() - 1) * p.stepsPerEpoch();
    return duration(perStep * remaining);
  }

  static String duration(double seconds) {
    long s = Math.round(seconds);
    if (s >= 3600) {
      return String.format(Locale.ROOT, "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
    }
    return String.format(Locale.ROOT, "%d:%02d", s / 60, s % 60);
  }

  private static String rate(double v) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, "%,.0f", v) : "?";
  }
}
