package dev.sparktrainer.train.loop;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.train.step.StepTimings;
import org.junit.jupiter.api.Test;

/** The epoch-end all-reduce keeps its 13-slot layout, so metrics stay bit-identical. */
class EpochSumsTest {

  @Test
  void theAllReduceLayoutIsTheTrainingSumsTheTimesThenTheRegressionSums() {
    double[] acc = {1.25, 2, 3, 4.5, 5.5, 6.5, 7.5};
    StepTimings before = new StepTimings(100, 200, 300, 400, 500);
    StepTimings after =
        new StepTimings(
            1_000_000_100L, 2_000_000_200L, 3_000_000_300L, 4_000_000_400L, 5_000_000_500L);
    EpochSums s = EpochSums.of(acc, 250_000_000L, after.since(before));
    assertThat(s.toArray())
        .containsExactly(1.25, 2, 3, 0.25, 1, 2, 3, 4, 5, 4.5, 5.5, 6.5, 7.5)
        .hasSize(EpochSums.SIZE);
    assertThat(s.samples()).isEqualTo(3);
    assertThat(s.exposedCommunicationSeconds()).isEqualTo(3);
    assertThat(s.optimizerSeconds()).isEqualTo(5);
    assertThat(EpochSums.fromArray(s.toArray()).toArray()).containsExactly(s.toArray());
  }
}
