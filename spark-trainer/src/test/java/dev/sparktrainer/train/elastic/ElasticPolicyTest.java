package dev.sparktrainer.train.elastic;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.train.elastic.ElasticPolicy.Continuation;
import dev.sparktrainer.train.elastic.ElasticPolicy.DataOrder;
import dev.sparktrainer.train.elastic.ElasticPolicy.Decision;
import dev.sparktrainer.train.elastic.ElasticPolicy.SavedLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The elastic policy as a table: a saved layout and this job's configuration on a new worker count
 * give a layout, a learning-rate scale, how the interrupted epoch goes on and an explanation, or a
 * refusal. The rows were derived from the layout choice as it was written in the worker loop
 * ({@code Worker}, now {@code TrainingLoop}) before it moved here (and agree with the full
 * trainings of {@code WorkerCountResumeTest}).
 */
class ElasticPolicyTest {
  private static final String DIR = "/jobs/ckpt";

  /** "16x2": {batch, accumulation} (a layout "4x8x2": workers x batch x accumulation). */
  private static int[] dims(String s) {
    String[] p = s.split("x");
    int[] out = new int[p.length];
    for (int i = 0; i < p.length; i++) {
      out[i] = Integer.parseInt(p[i].trim());
    }
    return out;
  }

  private static DataOrder order(String kind, String key) {
    return switch (kind) {
      case "global" -> new DataOrder(true, false, key);
      case "replay" -> new DataOrder(false, true, key);
      case "none" -> new DataOrder(false, false, key);
      default -> throw new IllegalArgumentException("order " + kind);
    };
  }

  private static ElasticPolicy policy(String job, String rescale, DataOrder data) {
    int[] j = dims(job);
    return new ElasticPolicy(j[0], j[1], 4, 1, rescale.equals("lr"), DIR, data);
  }

  @ParameterizedTest(name = "[{index}] {0} @{1} step {2} ({3}) on {9}: {10}")
  @CsvSource(
      delimiter = '|',
      nullValues = "-",
      textBlock =
          """
      # saved w x b x k | lr scale | step in epoch | key | from checkpoint | job b x k | rescale | data | data key | size | batch x k | lr scale | continuation | changed | refused | explanation contains | order warning contains
      # the same layout: nothing changes; a changed order still restarts the interrupted epoch
      2x16x1 | 1.0 | 0  | A | true  | 16x1 | batch | global | A | 2 | 16x1 | 1.0 | AS_IS            | false | false | -                                                                  | -
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | global | A | 2 | 16x1 | 1.0 | AS_IS            | false | false | -                                                                  | -
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | global | B | 2 | 16x1 | 1.0 | RESTART          | false | false | -                                                                  | the interrupted epoch 3 restarts: its earlier part was read in an order this data no longer gives (A then, B now)
      2x16x1 | 1.5 | 20 | A | true  | 16x1 | lr    | none   | A | 2 | 16x1 | 1.5 | AS_IS            | false | false | -                                                                  | -
      # a checkpoint without a layout (workers 0) is adopted as this job's
      0x0x0  | 0.0 | 20 | A | true  | 16x1 | batch | global | B | 2 | 16x1 | 1.0 | OLDER_CHECKPOINT | false | false | -                                                                  | -
      # the global batch kept: the largest batch up to the configured one that divides the share
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | global | A | 1 | 16x2 | 1.0 | BY_RECORDS       | true  | false | resuming on 1 workers with batch 16 x 2 accumulated (global batch 32); the interrupted epoch 3 continues with the records not yet consumed, dealt to 1 workers | -
      1x24x1 | 1.0 | 20 | A | true  | 24x1 | batch | global | A | 3 | 8x1  | 1.0 | BY_RECORDS       | true  | false | (global batch 24); resuming on 3 workers with batch 8 x 1 accumulated (global batch 24); | -
      3x8x1  | 1.0 | 20 | A | true  | 8x1  | batch | global | A | 2 | 6x2  | 1.0 | BY_RECORDS       | true  | false | resuming on 2 workers with batch 6 x 2 accumulated (global batch 24) | -
      1x64x1 | 1.0 | 0  | A | true  | 16x1 | batch | global | A | 2 | 16x2 | 1.0 | AS_IS            | true  | false | resuming on 2 workers with batch 16 x 2 accumulated (global batch 64) | -
      4x8x2  | 1.0 | 0  | A | true  | 8x2  | batch | global | A | 2 | 8x4  | 1.0 | AS_IS            | true  | false | 4 workers x batch 8 x 2 accumulated (global batch 64); resuming on 2 workers with batch 8 x 4 | -
      2x16x1 | 1.0 | 0  | A | true  | 16x1 | batch | global | A | 4 | 8x1  | 1.0 | AS_IS            | true  | false | resuming on 4 workers with batch 8 x 1 accumulated (global batch 32) | -
      # the same worker count with another configured accumulation or batch: the configured ones
      2x16x1 | 1.0 | 0  | A | true  | 16x2 | batch | global | A | 2 | 16x2 | 1.0 | AS_IS            | true  | false | resuming on 2 workers with batch 16 x 2 accumulated (global batch 64) | -
      2x16x1 | 1.0 | 20 | A | true  | 8x1  | batch | global | A | 2 | 8x1  | 1.0 | BY_RECORDS       | true  | false | batch 8 x 1 accumulated (global batch 16); the interrupted epoch 3 continues | -
      # how the interrupted epoch goes on: by records, by segments, or over
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | replay | A | 1 | 16x2 | 1.0 | BY_SEGMENTS      | true  | false | the interrupted epoch 3 continues with the records not yet consumed, dealt to 1 workers | -
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | replay | B | 1 | 16x2 | 1.0 | RESTART          | true  | false | ; the interrupted epoch 3 restarts: it was read in an order this data no longer gives (A then, B now) | its earlier part was read in an order this data no longer gives (A then, B now)
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | global | B | 1 | 16x2 | 1.0 | RESTART          | true  | false | ; the interrupted epoch 3 restarts: it was read in an order this data no longer gives (A then, B now) | the interrupted epoch 3 restarts
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | none   | A | 1 | 16x2 | 1.0 | RESTART          | true  | false | ; the interrupted epoch 3 restarts: this data has no reproducible order (deterministic=false without a shuffle buffer) to continue it from on another layout | -
      2x16x1 | 1.0 | 0  | A | true  | 16x1 | batch | none   | A | 1 | 16x2 | 1.0 | AS_IS            | true  | false | resuming on 1 workers with batch 16 x 2 accumulated (global batch 32) | -
      # the learning rate scaled instead (linear scaling rule), from the scale already applied
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | lr    | global | A | 3 | 16x1 | 1.5 | BY_RECORDS       | true  | false | with batch 16 x 1 accumulated (global batch 48), the learning rate scaled by 1.5 (linear scaling rule) | -
      4x8x1  | 1.0 | 0  | A | true  | 8x1  | lr    | global | A | 2 | 8x1  | 0.5 | AS_IS            | true  | false | the learning rate scaled by 0.5 (linear scaling rule) | -
      3x16x1 | 1.5 | 0  | A | true  | 16x1 | lr    | global | A | 2 | 16x1 | 1.0 | AS_IS            | true  | false | (global batch 32), the learning rate scaled by 1.0 (linear scaling rule) | -
      2x16x1 | 1.0 | 0  | A | true  | 16x2 | lr    | global | A | 1 | 16x2 | 1.0 | AS_IS            | true  | false | with batch 16 x 2 accumulated (global batch 32) | -
      # a fresh start on fewer workers than planned
      4x8x1  | 1.0 | 0  | A | false | 8x1  | batch | global | A | 2 | 8x2  | 1.0 | AS_IS            | true  | false | The job is planned for 4 workers x batch 8 x 1 accumulated (global batch 32); resuming on 2 workers with batch 8 x 2 accumulated (global batch 32) | -
      # refused: a global batch the new count does not divide, or no batch size to work with
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | global | A | 3 | 0x0  | 0.0 | AS_IS            | false | true  | 32 is not a multiple of 3). Options: resume on a worker count that divides 32 [1, 2, 4, 8, 16, 32], | -
      4x8x2  | 1.0 | 0  | A | true  | 8x2  | batch | global | A | 3 | 0x0  | 0.0 | AS_IS            | false | true  | it cannot be kept on 3 workers (64 is not a multiple of 3) | -
      2x16x1 | 1.0 | 20 | A | true  | 16x1 | batch | global | B | 3 | 0x0  | 0.0 | AS_IS            | false | true  | 32 is not a multiple of 3 | its earlier part was read in an order this data no longer gives (A then, B now)
      2x16x1 | 1.0 | 20 | A | true  | 0x1  | batch | global | A | 1 | 0x0  | 0.0 | AS_IS            | false | true  | needs the training data's batch size | -
      2x16x1 | 1.0 | 20 | A | true  | 0x1  | lr    | global | A | 1 | 0x0  | 0.0 | AS_IS            | false | true  | needs the training data's batch size | -
      """)
  void decides(
      String saved,
      double savedScale,
      long stepInEpoch,
      String savedKey,
      boolean fromCheckpoint,
      String job,
      String rescale,
      String dataKind,
      String dataKey,
      int size,
      String layout,
      double scale,
      Continuation continuation,
      boolean changed,
      boolean refused,
      String explanation,
      String orderWarning) {
    int[] s = dims(saved);
    int[] l = dims(layout);
    Decision d =
        policy(job, rescale, order(dataKind, dataKey))
            .decide(
                new SavedLayout(
                    s[0], s[1], s[2], savedScale, 3, stepInEpoch, savedKey, fromCheckpoint),
                size);
    assertThat(d.refused()).as("refused").isEqualTo(refused);
    if (!refused) {
      assertThat(d.batchSize()).as("batch").isEqualTo(l[0]);
      assertThat(d.accumulateSteps()).as("accumulation").isEqualTo(l[1]);
      assertThat(d.learningRateScale()).as("lr scale").isEqualTo(scale);
      assertThat(d.continuation()).as("continuation").isEqualTo(continuation);
    }
    assertThat(d.changed()).as("changed").isEqualTo(changed);
    if (explanation == null) {
      assertThat(d.explanation()).as("explanation").isNull();
    } else {
      assertThat(d.explanation()).as("explanation").contains(explanation);
    }
    if (orderWarning == null) {
      assertThat(d.orderWarning()).as("order warning").isNull();
    } else {
      assertThat(d.orderWarning()).as("order warning").contains(orderWarning);
    }
  }

  @ParameterizedTest(name = "batch {0} x {1} x {2} planned, min {3}, lr {4}: cap {5} -> {6}")
  @CsvSource({
    // batch, accumulation, planned, min, scale lr, cap -> workers
    "8, 1, 4, 2, false, 4, 4", // the planned count
    "8, 1, 4, 2, false, 3, 2", // 3 does not divide 32
    "8, 1, 4, 3, false, 3, 0", // none from 3 down to 3
    "8, 1, 4, 3, true, 3, 3", // the learning rate scaled: any count
    "6, 1, 4, 1, false, 3, 3", // 24
    "5, 1, 4, 1, false, 3, 2", // 20
    "7, 1, 4, 0, false, 3, 2", // min 0 counts as 1
    "4, 2, 4, 1, false, 3, 2", // accumulation counts: 32
    "8, 1, 4, 1, false, 6, 4", // above the planned count: the first that divides
    "0, 1, 4, 1, false, 3, 0", // an unknown batch keeps no global batch
    "0, 1, 4, 1, false, 4, 4", // ... but the planned count is always fine
  })
  void workerCounts(int batch, int k, int planned, int min, boolean lr, int cap, int expected) {
    ElasticPolicy p = new ElasticPolicy(batch, k, planned, min, lr, DIR, order("global", ""));
    assertThat(p.workersFor(cap)).isEqualTo(expected);
  }

  @Test
  void theDivisibilityRule() {
    assertThat(ElasticPolicy.keepsGlobalBatch(32, 4)).isTrue();
    assertThat(ElasticPolicy.keepsGlobalBatch(32, 3)).isFalse();
    assertThat(ElasticPolicy.keepsGlobalBatch(0, 1)).as("no global batch").isFalse();
  }

  /** The refusal as the user reads it, whole: the layout, why, and the counts that would work. */
  @Test
  void aRefusalNamesTheOptions() {
    Decision d =
        policy("16x1", "batch", order("global", "A"))
            .decide(new SavedLayout(2, 16, 1, 1, 0, 20, "A", true), 3);
    assertThat(d.explanation())
        .isEqualTo(
            "The checkpoint in /jobs/ckpt was written by 2 workers x batch 16 x 1 accumulated"
                + " (global batch 32): it cannot be kept on 3 workers (32 is not a multiple of 3)."
                + " Options: resume on a worker count that divides 32 [1, 2, 4, 8, 16, 32], or keep"
                + " the per-worker batch and scale the learning rate instead (--rescale lr,"
                + " optRescale(Rescale.LEARNING_RATE): batch 16 x 1 on 3 workers, global 48)");
    // 720 has 30 divisors: the first 16 are listed
    Decision many =
        policy("240x1", "batch", order("global", "A"))
            .decide(new SavedLayout(3, 240, 1, 1, 0, 0, "A", true), 7);
    assertThat(many.explanation())
        .contains(
            "divides 720 [1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20, 24, 30]..., or keep");
    Decision unknown =
        policy("0x1", "batch", order("global", "A"))
            .decide(new SavedLayout(2, 16, 1, 1, 0, 20, "A", true), 1);
    assertThat(unknown.explanation())
        .isEqualTo(
            "The checkpoint in /jobs/ckpt was written by 2 workers x batch 16 x 1 accumulated"
                + " (global batch 32); resuming it on 1 workers needs the training data's batch"
                + " size, which its BatchSourceFactory does not tell (batchSize(), withBatchSize())");
  }

  /** A change as rank 0 logs it, whole. */
  @Test
  void aChangeExplainsItself() {
    Decision d =
        policy("16x1", "lr", order("none", "A"))
            .decide(new SavedLayout(2, 16, 1, 1, 5, 20, "A", true), 3);
    assertThat(d.explanation())
        .isEqualTo(
            "The checkpoint in /jobs/ckpt was written by 2 workers x batch 16 x 1 accumulated"
                + " (global batch 32); resuming on 3 workers with batch 16 x 1 accumulated (global"
                + " batch 48), the learning rate scaled by 1.5 (linear scaling rule); the"
                + " interrupted epoch 5 restarts: this data has no reproducible order"
                + " (deterministic=false without a shuffle buffer) to continue it from on another"
                + " layout");
    assertThat(d.continuation()).isEqualTo(Continuation.RESTART);
  }
}
