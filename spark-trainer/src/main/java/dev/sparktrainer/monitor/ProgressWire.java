package dev.sparktrainer.monitor;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.StepProgress;
import dev.sparktrainer.train.metrics.StragglerReport;

/**
 * The line protocol from rank 0 to the driver: {@code HELLO <token>}, then {@code S ...} (a step) ,
 * {@code L ...} (an epoch's slowest rank) and {@code E ...} (an epoch's metrics) lines of
 * space-separated fields. Plain text, parsed field by field: nothing from the connection is
 * deserialized as objects.
 */
final class ProgressWire {
  private ProgressWire() {}

  static String step(StepProgress p) {
    return "S "
        + p.epoch()
        + " "
        + p.epochs()
        + " "
        + p.step()
        + " "
        + p.stepsPerEpoch()
        + " "
        + p.globalStep()
        + " "
        + p.loss()
        + " "
        + p.epochLoss()
        + " "
        + p.samplesPerSecond()
        + " "
        + p.learningRate()
        + " "
        + p.epochSeconds()
        + " "
        + p.numWorkers()
        + (Double.isNaN(p.imagesPerSecond())
            ? ""
            : " " + p.imagesPerSecond() + " " + p.decodeMillisPerImage());
  }

  static String epoch(EpochMetrics m) {
    return "E "
        + m.epoch()
        + " "
        + m.steps()
        + " "
        + m.samples()
        + " "
        + m.loss()
        + " "
        + m.accuracy()
        + " "
        + m.validationLoss()
        + " "
        + m.validationAccuracy()
        + " "
        + m.seconds()
        + " "
        + m.samplesPerSecond()
        + " "
        + m.dataWaitSeconds()
        + " "
        + m.computeSeconds()
        + " "
        + m.allReduceSeconds()
        + " "
        + m.optimizerSeconds()
        + " "
        + m.backwardSeconds()
        + " "
        + m.communicationSeconds()
        + " "
        + m.parameterHash()
        + (m.regression() == null
            ? ""
            : " "
                + m.mse()
                + " "
                + m.mae()
                + " "
                + m.r2()
                + " "
                + m.validationMse()
                + " "
                + m.validationMae()
                + " "
                + m.validationR2())
        + (m.images() == null ? "" : " I " + m.imagesPerSecond() + " " + m.decodeMillisPerImage());
  }

  static String straggler(StragglerReport.Slowest s) {
    return "L "
        + s.epoch()
        + " "
        + s.rank()
        + " "
        + token(s.host())
        + " "
        + token(s.executorId())
        + " "
        + s.workers()
        + " "
        + s.medianSlowdown()
        + " "
        + s.p95Slowdown()
        + " "
        + s.slowestStepShare()
        + " "
        + s.othersWaitSeconds()
        + " "
        + s.warning();
  }

  /** A name as one field: spaces (never in host names or executor ids) become underscores. */
  private static String token(String s) {
    return s == null || s.isEmpty() ? "?" : s.replaceAll("\\s", "_");
  }

  /**
   * Parses a line into a {@link StepProgress}, an {@link EpochMetrics} or a {@link
   * StragglerReport.Slowest}; null if it is none of them.
   */
  static Object parse(String line) {
    String[] f = line.split(" ");
    try {
      if (f[0].equals("S") && (f.length == 12 || f.length == 14)) { // 14: with images
        return new StepProgress(
            Integer.parseInt(f[1]),
            Integer.parseInt(f[2]),
            Long.parseLong(f[3]),
            Long.parseLong(f[4]),
            Long.parseLong(f[5]),
            d(f[6]),
            d(f[7]),
            d(f[8]),
            d(f[9]),
            d(f[10]),
            Integer.parseInt(f[11]),
            f.length == 14 ? d(f[12]) : Double.NaN,
            f.length == 14 ? d(f[13]) : Double.NaN);
      }
      if (f[0].equals("L") && f.length == 11) {
        return new StragglerReport.Slowest(
            Integer.parseInt(f[1]),
            Integer.parseInt(f[2]),
            f[3],
            f[4],
            Integer.parseInt(f[5]),
            d(f[6]),
            d(f[7]),
            d(f[8]),
            d(f[9]),
            Boolean.parseBoolean(f[10]));
      }
      EpochMetrics.Images images = null;
      if (f[0].equals("E") && f.length >= 3 && f[f.length - 3].equals("I")) { // with images
        images = new EpochMetrics.Images(d(f[f.length - 2]), d(f[f.length - 1]));
        f = java.util.Arrays.copyOf(f, f.length - 3);
      }
      if (f[0].equals("E")
          && (f.length == 17 || f.length == 23)) { // 23: with the regression metrics
        EpochMetrics.Regression r =
            f.length == 17
                ? null
                : new EpochMetrics.Regression(
                    d(f[17]), d(f[18]), d(f[19]), d(f[20]), d(f[21]), d(f[22]));
        return new EpochMetrics(
            Integer.parseInt(f[1]),
            Long.parseLong(f[2]),
            Long.parseLong(f[3]),
            d(f[4]),
            d(f[5]),
            d(f[6]),
            d(f[7]),
            d(f[8]),
            d(f[9]),
            d(f[10]),
            d(f[11]),
            d(f[12]),
            d(f[13]),
            d(f[14]),
            d(f[15]),
            f[16],
            r,
            images);
      }
    } catch (NumberFormatException e) {
      return null;
    }
    return null;
  }

  private static double d(String s) {
    return Double.parseDouble(s);
  }
}
