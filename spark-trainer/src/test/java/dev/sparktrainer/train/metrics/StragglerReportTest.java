package dev.sparktrainer.train.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntToDoubleFunction;
import org.junit.jupiter.api.Test;

/** The step-time record of each rank and rank 0's analysis of them, on known times. */
class StragglerReportTest {

  /**
   * A rank's record of {@code steps} steps whose work (data wait + compute) is {@code
   * millis(step)}.
   */
  private static StepTimes.Sample ranked(
      int rank, long seed, int epoch, int steps, IntToDoubleFunction millis) {
    StepTimes t = new StepTimes(seed, "host-" + rank, "exec-" + rank);
    t.begin(epoch);
    for (int i = 0; i < steps; i++) {
      long work = Math.round(millis.applyAsDouble(i) * 1e6);
      // a third of the work waiting for data, the rest compute; 1 ms waiting for the all-reduce
      t.record(work / 3, work - work / 3 + 1_000_000, 1_000_000);
    }
    return StepTimes.decode(rank, t.encode());
  }

  @Test
  void everyRankKeepsTheSameStepsAndTheSums() {
    // More steps than the reservoir: a sample, the same steps on every rank (the value is the
    // step).
    StepTimes.Sample a = ranked(0, 7, 3, 5000, i -> i);
    StepTimes.Sample b = ranked(1, 7, 3, 5000, i -> i);
    assertThat(a.work()).hasSize(StepTimes.CAPACITY).containsExactly(b.work());
    float[] sorted = a.work().clone();
    Arrays.sort(sorted);
    assertThat(sorted[0]).as("uniform over the epoch").isLessThan(0.1f);
    assertThat(sorted[sorted.length - 1]).isGreaterThan(4.9f);
    assertThat(StragglerReport.quantile(sorted, 0.5)).isCloseTo(2.5, within(0.4));
    // Another epoch keeps other steps.
    assertThat(ranked(0, 7, 4, 5000, i -> i).work()).isNotEqualTo(a.work());
    assertThat(a.steps()).isEqualTo(5000);
    assertThat(a.host()).isEqualTo("host-0");
    assertThat(a.executorId()).isEqualTo("exec-0");
    double total = 5000 * 4999 / 2 / 1e3; // seconds
    assertThat(a.dataWaitSeconds() + a.computeSeconds()).isCloseTo(total, within(1e-3));
    assertThat(a.commWaitSeconds()).isCloseTo(5.0, within(1e-9));
    // Fewer steps than the reservoir: all of them, in order.
    assertThat(ranked(0, 7, 0, 3, i -> 2 * i + 1).work()).containsExactly(0.001f, 0.003f, 0.005f);
  }

  @Test
  void namesTheRankWithTheMostWorkAndWhatItCostTheOthers() {
    // Ranks 0, 1, 3 take 10 ms (+ a hair each, so that no step ties); rank 2 takes 13 ms in 3 of 5
    // steps and 9 ms in the others.
    List<StepTimes.Sample> samples = new ArrayList<>();
    for (int r = 0; r < 4; r++) {
      int rank = r;
      samples.add(ranked(r, 1, 0, 200, i -> rank == 2 ? (i % 5 < 3 ? 13 : 9) : 10 + rank * 0.01));
    }
    StragglerReport report = StragglerReport.analyze(0, samples);
    StragglerReport.Slowest s = report.slowest();
    assertThat(s.rank()).isEqualTo(2);
    assertThat(s.host()).isEqualTo("host-2");
    assertThat(s.executorId()).isEqualTo("exec-2");
    assertThat(s.workers()).isEqualTo(4);
    assertThat(report.keptSteps()).isEqualTo(200);
    assertThat(s.medianSlowdown()).isCloseTo(13 / 10.01 - 1, within(1e-4));
    assertThat(s.p95Slowdown()).isCloseTo(13 / 10.01 - 1, within(1e-4));
    assertThat(s.slowestStepShare()).isEqualTo(0.6);
    // In 120 steps it was 3, 2.99 and 2.97 ms later than the others; in the 80 others it was first.
    assertThat(s.othersWaitSeconds()).isCloseTo(120 * (3 + 2.99 + 2.97) / 1e3, within(1e-4));
    assertThat(s.warning()).isTrue();
    assertThat(s.progressText()).isEqualTo("slow: rank 2 on host-2 +30 %");
    assertThat(s.summary())
        .isEqualTo(
            "epoch 1: slowest rank 2 on host-2 (executor exec-2) of 4, +30 % median and"
                + " +30 % p95 step work against the others, the slowest in 60 % of the steps; the others waited 1.08 s for it");
    assertThat(report.ranks())
        .extracting(StragglerReport.Rank::slowestStepShare)
        .containsExactly(0.0, 0.0, 0.6, 0.4);
    assertThat(report.ranks().get(1).medianWorkSeconds()).isCloseTo(0.01001, within(1e-7));
    assertThat(report.ranks().get(2).commWaitSeconds()).isCloseTo(0.2, within(1e-9));
  }

  @Test
  void warnsFromTwentyPercentSlowerInMostSteps() {
    for (double slower : new double[] {1.19, 1.21}) {
      List<StepTimes.Sample> samples = new ArrayList<>();
      for (int r = 0; r < 3; r++) {
        int rank = r;
        samples.add(ranked(r, 1, 0, 500, i -> (rank == 1 ? slower : 1) * (10 + (i % 7))));
      }
      StragglerReport.Slowest s = StragglerReport.analyze(0, samples).slowest();
      assertThat(s.rank()).isEqualTo(1);
      assertThat(s.slowestStepShare()).isEqualTo(1.0);
      assertThat(s.medianSlowdown()).isCloseTo(slower - 1, within(1e-3));
      assertThat(s.warning()).as("%s times slower", slower).isEqualTo(slower > 1.2);
    }
  }

  @Test
  void noWarningWhenTheOthersHardlyWaited() {
    // 50 % slower at steps of 10-16 µs, each step 1 ms in the all-reduce: the others lose
    // microseconds.
    List<StepTimes.Sample> samples = new ArrayList<>();
    for (int r = 0; r < 3; r++) {
      int rank = r;
      samples.add(ranked(r, 1, 0, 50, i -> (rank == 1 ? 1.5 : 1) * (0.010 + 0.001 * (i % 7))));
    }
    StragglerReport.Slowest s = StragglerReport.analyze(0, samples).slowest();
    assertThat(s.rank()).isEqualTo(1);
    assertThat(s.slowestStepShare()).isEqualTo(1.0);
    assertThat(s.medianSlowdown()).isCloseTo(0.5, within(1e-2));
    assertThat(s.othersWaitSeconds()).isLessThan(0.001);
    assertThat(s.warning()).isFalse();
  }

  @Test
  void ranksThatKeptDifferentStepsAreNotComparedStepByStep() {
    StragglerReport r =
        StragglerReport.analyze(
            0, List.of(ranked(0, 1, 0, 10, i -> 10), ranked(1, 1, 0, 12, i -> 20)));
    assertThat(r.slowest().rank()).isEqualTo(1);
    assertThat(r.keptSteps()).isZero();
    assertThat(r.slowest().slowestStepShare()).isNaN();
    assertThat(r.slowest().othersWaitSeconds()).isNaN();
    assertThat(r.slowest().warning()).isFalse();
    assertThat(r.slowest().medianSlowdown()).isCloseTo(1.0, within(1e-6));
  }
}
