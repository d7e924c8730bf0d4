package dev.sparktrainer.train.loop;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import dev.sparktrainer.collective.CommOptions;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.collective.Rings;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.Digits;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.Rescale;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.StepOptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every rank ends every epoch with the same steps in the same order — the order of {@link
 * EpochEndStep} — on a real two-rank ring, with validation and checkpoints on; and a hook sees each
 * step after the earlier ones have run (the history step after the replica check, the checkpoint
 * after the history). Each step's collective work runs on every rank: the ring's operation count
 * ({@link Communicator#operations()}) is the same on both ranks before every step, the steps that
 * communicate moved it and those that do not (the history, rank 0's checkpoint) did not.
 */
class EpochEndOrderTest {
  @TempDir Path tmp;

  /** What one rank's hook saw: the step, the epoch, and whether the metrics existed yet. */
  private record Seen(EpochEndStep step, int epoch, boolean metricsRecorded) {}

  /**
   * The steps with no collective operation here: the history is local, the checkpoint rank 0's, and
   * the grow check asks the ring only when growing is on (off in this job).
   */
  private static final java.util.Set<EpochEndStep> LOCAL =
      java.util.EnumSet.of(EpochEndStep.HISTORY, EpochEndStep.CHECKPOINT, EpochEndStep.GROW_CHECK);

  @Test
  void everyRankRunsTheEpochEndStepsInTheirOrder() throws Exception {
    InMemoryDataset digits = Digits.load().shuffled(3);
    InMemoryDataset train = digits.slice(0, 256);
    TrainingConfig cfg =
        new TrainingConfig(
            new TrainingConfig.Model(
                MlpSpec.of(64, 10, 16),
                LossSpec.SOFTMAX_CROSS_ENTROPY,
                OptimizerSpec.adam().optLearningRate(1e-2f).build(),
                Precision.FP32,
                5),
            new TrainingConfig.Devices(false, 1, OptimizerPlacement.AUTO),
            new TrainingConfig.Data(
                train.trainBatches(16, 5, true), digits.slice(256, 320).evalBatches(16), 2, 1),
            new CommOptions(
                Duration.ofMinutes(1), Duration.ofMinutes(1), WirePrecision.FP32, null, false),
            new StepOptions(1 << 20, true),
            new TrainingConfig.Checkpoints(tmp.resolve("ckpt").toString(), 0, 2),
            new TrainingConfig.Elastic(2, 2, 2, false, Rescale.GLOBAL_BATCH));
    TrainingRuntime runtime = new TrainingRuntime(JobSecret.generate(), null, FaultInjection.NONE);
    List<Communicator> ring = Rings.form(2, b -> {});
    ExecutorService pool = Executors.newFixedThreadPool(2);
    List<List<Seen>> seen = new ArrayList<>();
    List<List<Long>> operations = new ArrayList<>();
    try {
      List<Future<WorkerResult>> results = new ArrayList<>();
      for (int r = 0; r < 2; r++) {
        List<Seen> mine = Collections.synchronizedList(new ArrayList<>());
        seen.add(mine);
        List<Long> ops = Collections.synchronizedList(new ArrayList<>());
        operations.add(ops);
        Communicator comm = ring.get(r);
        results.add(
            pool.submit(
                () ->
                    new TrainingLoop(
                            cfg, runtime, comm, List.of(Device.cpu()), 0, new Configuration(), 1)
                        .observe(
                            new LoopHook() {
                              @Override
                              public void beforeEpochEnd(
                                  int rank, EpochEndStep step, EpochEnd end) {
                                mine.add(new Seen(step, end.epoch(), end.metrics() != null));
                                ops.add(comm.operations());
                              }
                            })
                        .run()));
      }
      for (int r = 0; r < 2; r++) {
        assertThat(results.get(r).get(120, TimeUnit.SECONDS).history()).hasSize(2);
        operations.get(r).add(ring.get(r).operations()); // after the last epoch's last step
      }
    } finally {
      pool.shutdownNow();
      ring.forEach(Communicator::close);
    }
    List<Seen> expected = new ArrayList<>();
    for (int epoch = 0; epoch < 2; epoch++) {
      for (EpochEndStep s : EpochEndStep.values()) {
        // The metrics exist once the history step has run: for the checkpoint and the grow check.
        expected.add(new Seen(s, epoch, s.compareTo(EpochEndStep.HISTORY) > 0));
      }
    }
    assertThat(seen.get(0)).as("rank 0").containsExactlyElementsOf(expected);
    assertThat(seen.get(1)).as("rank 1").containsExactlyElementsOf(expected);
    assertThat(operations.get(1))
        .as("the ring's operation count before each step (and at the end), rank 1 as rank 0")
        .containsExactlyElementsOf(operations.get(0));
    int steps = EpochEndStep.values().length;
    for (int i = 0; i < expected.size(); i++) {
      Seen at = expected.get(i);
      boolean lastOfEpoch = at.step() == EpochEndStep.GROW_CHECK;
      if (lastOfEpoch && i + 1 < expected.size()) {
        continue; // the next count also holds the next epoch's training steps
      }
      long ran = operations.get(0).get(i + 1) - operations.get(0).get(i);
      String what = at.step() + " of epoch " + at.epoch() + ": collective operations";
      if (LOCAL.contains(at.step())) {
        assertThat(ran).as(what).isZero();
      } else {
        assertThat(ran).as(what).isPositive();
      }
    }
    assertThat(operations.get(0)).hasSize(2 * steps + 1);
    assertThat(Arrays.asList(EpochEndStep.values()))
        .as("the documented order")
        .containsExactly(
            EpochEndStep.METRICS,
            EpochEndStep.STRAGGLERS,
            EpochEndStep.VALIDATION,
            EpochEndStep.EPOCH_TIME,
            EpochEndStep.REPLICA_CHECK,
            EpochEndStep.HISTORY,
            EpochEndStep.CHECKPOINT,
            EpochEndStep.GROW_CHECK);
  }
}
