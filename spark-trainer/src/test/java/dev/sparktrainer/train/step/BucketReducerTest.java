package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The all-reduce thread: every failure it meets reaches the training thread at once. */
class BucketReducerTest {
  @Test
  void anErrorInTheAllReduceFailsAwaitAtOnce() {
    // An operation timeout far beyond the test's own deadline: await must not wait it out.
    try (BucketReducer r =
        new BucketReducer(
            3,
            b -> {
              throw new OutOfMemoryError("Direct buffer memory");
            },
            4,
            Duration.ofMinutes(10))) {
      r.submit(0);
      assertTimeoutPreemptively(
          Duration.ofSeconds(30),
          () ->
              assertThatThrownBy(() -> r.await(1))
                  .isInstanceOf(IllegalStateException.class)
                  .hasMessageContaining("rank 3")
                  .hasMessageContaining("all-reduce failed")
                  .hasCauseInstanceOf(OutOfMemoryError.class));
      // And every later bucket fails the same way.
      r.submit(1);
      assertTimeoutPreemptively(
          Duration.ofSeconds(30),
          () -> assertThatThrownBy(() -> r.await(2)).hasCauseInstanceOf(OutOfMemoryError.class));
    }
  }

  @Test
  void aRuntimeExceptionIsRethrownAsIs() {
    IllegalStateException peerDied = new IllegalStateException("rank 1: peer died");
    try (BucketReducer r =
        new BucketReducer(
            0,
            b -> {
              throw peerDied;
            },
            4,
            Duration.ofMinutes(10))) {
      r.submit(0);
      assertTimeoutPreemptively(
          Duration.ofSeconds(30), () -> assertThatThrownBy(() -> r.await(1)).isSameAs(peerDied));
      assertThat(r.submitted()).isEqualTo(1);
    }
  }
}
