package dev.sparktrainer.train.metrics;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Which worker held the others back in one epoch, as rank 0 found it from every rank's step times
 * (see {@code StepTimes}): per rank, its data wait, compute and communication wait over the epoch
 * and the median and 95th percentile of its per-step <em>work</em> (data wait + compute: the time
 * before it is ready for the gradient all-reduce, which the others wait for); and the {@link
 * Slowest} rank, the one with the highest median step work.
 *
 * <p>Quantiles and per-step comparisons use the same {@code keptSteps} steps on every rank: every
 * step of the epoch when it has at most 512, a uniform sample of 512 otherwise.
 *
 * @param epoch 0-based epoch
 * @param steps steps every rank took in the epoch (this attempt's)
 * @param keptSteps steps compared (all of them, or the sample)
 * @param ranks one entry per rank, by rank
 * @param slowest the rank with the highest median step work, and how much it cost the others
 */
public record StragglerReport(
    int epoch, long steps, int keptSteps, List<Rank> ranks, Slowest slowest)
    implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The warning needs the slowest rank at least this much slower (median step work) ... */
  public static final double WARN_SLOWDOWN = 0.20;

  /** ... and the slowest rank in more than this share of the steps. */
  public static final double WARN_STEP_SHARE = 0.5;

  /**
   * ... and the others spent at least this share of their epoch's step time waiting for it: a rank
   * that is relatively slower at steps of microseconds (workers taking turns on one machine in
   * local mode) costs nothing worth a warning.
   */
  public static final double WARN_WAIT_SHARE = 0.05;

  /**
   * ... and at least this many seconds, summed over the others: a short epoch (the quickstart's
   * take a tenth of a second) has nothing worth a warning to lose.
   */
  public static final double WARN_MIN_WAIT_SECONDS = 1.0;

  /** Copies the list. */
  public StragglerReport {
    ranks = List.copyOf(ranks);
  }

  /**
   * One rank's epoch.
   *
   * @param rank the rank
   * @param host its host
   * @param executorId its Spark executor id
   * @param dataWaitSeconds waiting for the input pipeline, summed over the epoch
   * @param computeSeconds forward, backward and optimizer, summed over the epoch
   * @param commWaitSeconds waiting for the gradient all-reduce, summed over the epoch
   * @param medianWorkSeconds median of its per-step work (data wait + compute)
   * @param p95WorkSeconds 95th percentile of its per-step work
   * @param slowestStepShare share of the kept steps in which it had the most work of all ranks
   */
  public record Rank(
      int rank,
      String host,
      String executorId,
      double dataWaitSeconds,
      double computeSeconds,
      double commWaitSeconds,
      double medianWorkSeconds,
      double p95WorkSeconds,
      double slowestStepShare)
      implements Serializable {
    private static final long serialVersionUID = 1L;
  }

  /**
   * The slowest rank of an epoch: the one with the highest median step work (data wait + compute).
   *
   * @param epoch 0-based epoch
   * @param rank its rank
   * @param host its host
   * @param executorId its Spark executor id
   * @param workers N
   * @param medianSlowdown its median step work over the median of the other ranks' medians, minus 1
   *     (0.38: 38 % slower)
   * @param p95Slowdown the same for the 95th percentiles
   * @param slowestStepShare share of the steps in which it had the most work
   * @param othersWaitSeconds time the other ranks waited for it, summed over them: per step and
   *     other rank, how much later it was ready for the all-reduce (0 when it was ready first)
   * @param warning it was the slowest in most steps ({@value #WARN_STEP_SHARE}), at least {@value
   *     #WARN_SLOWDOWN} slower, and the others waited for it at least {@value #WARN_WAIT_SHARE} of
   *     their step time and at least {@value #WARN_MIN_WAIT_SECONDS} s
   */
  public record Slowest(
      int epoch,
      int rank,
      String host,
      String executorId,
      int workers,
      double medianSlowdown,
      double p95Slowdown,
      double slowestStepShare,
      double othersWaitSeconds,
      boolean warning)
      implements Serializable {
    private static final long serialVersionUID = 1L;

    /** {@code slow: rank 3 on host-b +38 %}: for the progress line. */
    public String progressText() {
      return "slow: rank " + rank + " on " + host + " " + percent(medianSlowdown);
    }

    /**
     * {@code epoch 3: slowest rank 3 on host-b (executor 2) of 4, +38 % median and +52 % p95 step
     * work against the others, the slowest in 87 % of the steps; the others waited 1.23 s for it}.
     */
    public String summary() {
      return String.format(
          Locale.ROOT,
          "epoch %d: slowest rank %d on %s (executor %s) of %d, %s median and %s p95 step work against the"
              + " others, the slowest in %s of the steps; the others waited %s for it",
          epoch + 1,
          rank,
          host,
          executorId,
          workers,
          percent(medianSlowdown),
          percent(p95Slowdown),
          Double.isFinite(slowestStepShare)
              ? String.format(Locale.ROOT, "%.0f %%", slowestStepShare * 100)
              : "?",
          Double.isFinite(othersWaitSeconds)
              ? String.format(Locale.ROOT, "%.2f s", othersWaitSeconds)
              : "?");
    }

    private static String percent(double slowdown) {
      return Double.isFinite(slowdown)
          ? String.format(Locale.ROOT, "%+.0f %%", slowdown * 100)
          : "+? %";
    }
  }

  /** The report of {@code epoch} from every rank's record (by rank, at least two). */
  static StragglerReport analyze(int epoch, List<StepTimes.Sample> samples) {
    int n = samples.size();
    long steps = samples.get(0).steps();
    int kept = samples.get(0).work().length;
    // Every rank takes the same steps and keeps the same ones; anything else is not comparable step
    // by step (then shares and waits are unknown, not guessed).
    boolean aligned = true;
    for (StepTimes.Sample s : samples) {
      aligned &= s.steps() == steps && s.work().length == kept;
    }
    int[] slowestIn = new int[n];
    if (aligned) {
      for (int i = 0; i < kept; i++) {
        int worst = 0;
        for (int r = 1; r < n; r++) {
          if (samples.get(r).work()[i] > samples.get(worst).work()[i]) {
            worst = r;
          }
        }
        slowestIn[worst]++;
      }
    }
    double[] medians = new double[n];
    double[] p95s = new double[n];
    List<Rank> ranks = new ArrayList<>(n);
    for (int r = 0; r < n; r++) {
      StepTimes.Sample s = samples.get(r);
      float[] sorted = s.work().clone();
      Arrays.sort(sorted);
      medians[r] = quantile(sorted, 0.5);
      p95s[r] = quantile(sorted, 0.95);
      ranks.add(
          new Rank(
              r,
              s.host(),
              s.executorId(),
              s.dataWaitSeconds(),
              s.computeSeconds(),
              s.commWaitSeconds(),
              medians[r],
              p95s[r],
              share(aligned, slowestIn[r], kept)));
    }
    // The slowest: the highest median step work (what its slowdown is measured by), ties broken by
    // the
    // epoch's total work. (The most total work alone could name a rank whose typical step is fast.)
    int x = 0;
    for (int r = 1; r < n; r++) {
      if (medians[r] > medians[x]
          || medians[r] == medians[x] && work(samples.get(r)) > work(samples.get(x))) {
        x = r;
      }
    }
    double othersWait = Double.NaN;
    if (aligned && kept > 0) {
      double sum = 0;
      float[] mine = samples.get(x).work();
      for (int r = 0; r < n; r++) {
        if (r != x) {
          float[] theirs = samples.get(r).work();
          for (int i = 0; i < kept; i++) {
            sum += Math.max(0, mine[i] - theirs[i]);
          }
        }
      }
      othersWait = sum * steps / kept;
    }
    double medianSlowdown = slowdown(medians, x);
    double p95Slowdown = slowdown(p95s, x);
    double share = share(aligned, slowestIn[x], kept);
    double othersTime = 0;
    for (int r = 0; r < n; r++) {
      if (r != x) {
        StepTimes.Sample o = samples.get(r);
        othersTime += o.dataWaitSeconds() + o.computeSeconds() + o.commWaitSeconds();
      }
    }
    boolean costly =
        !(othersWait < WARN_WAIT_SHARE * othersTime
            || othersWait < WARN_MIN_WAIT_SECONDS); // NaN: not excused
    boolean warning = share > WARN_STEP_SHARE && medianSlowdown >= WARN_SLOWDOWN && costly;
    StepTimes.Sample s = samples.get(x);
    Slowest slowest =
        new Slowest(
            epoch,
            x,
            s.host(),
            s.executorId(),
            n,
            medianSlowdown,
            p95Slowdown,
            share,
            othersWait,
            warning);
    return new StragglerReport(epoch, steps, aligned ? kept : 0, ranks, slowest);
  }

  private static double work(StepTimes.Sample s) {
    return s.dataWaitSeconds() + s.computeSeconds();
  }

  private static double share(boolean aligned, int count, int kept) {
    return aligned && kept > 0 ? count / (double) kept : Double.NaN;
  }

  /**
   * {@code values[x]} over the median of the other values, minus 1; NaN when that median is not
   * positive.
   */
  private static double slowdown(double[] values, int x) {
    double[] others = new double[values.length - 1];
    for (int r = 0, k = 0; r < values.length; r++) {
      if (r != x) {
        others[k++] = values[r];
      }
    }
    Arrays.sort(others);
    double base =
        others.length % 2 == 1
            ? others[others.length / 2]
            : (others[others.length / 2 - 1] + others[others.length / 2]) / 2;
    return base > 0 ? values[x] / base - 1 : Double.NaN;
  }

  /** The {@code q} quantile of sorted values, linearly interpolated; NaN for none. */
  static double quantile(float[] sorted, double q) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    double pos = q * (sorted.length - 1);
    int lo = (int) Math.floor(pos);
    int hi = Math.min(sorted.length - 1, lo + 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
  }
}
