package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.loop.InjectedFailure;
import dev.sparktrainer.train.metrics.EpochMetrics;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The throughput of an epoch resumed mid-way counts only what this attempt trained in the time it
 * timed: the samples restored from the checkpoint were trained (and timed) by the attempt that
 * failed.
 */
class ResumeThroughputTest {
  @TempDir Path tmp;

  private static DistributedTrainerBuilder job() {
    InMemoryDataset train = Digits.load().shuffled(11).slice(0, 1437);
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 256))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.sgd().optLearningRate(0.05f).build())
        .setTrainingData(train.trainBatches(16, 5, true))
        .setNumWorkers(2)
        .optEpochs(2)
        .optSeed(42);
  }

  @Test
  void aResumedEpochReportsTheThroughputOfItsOwnSteps() throws Exception {
    TrainedModel reference = job().build().fitInProcess(0, new Configuration());
    // 44 steps per epoch (global batch 32): a checkpoint at global step 80 is 36 steps into epoch
    // 1;
    // the first attempt fails after step 84, the second resumes at 80 and trains the last 8 steps.
    DistributedTrainer trainer =
        job()
            .optCheckpointDir(tmp.toString())
            .optCheckpointEverySteps(80)
            .optInjectFailure(0, 84)
            .build();
    assertThatThrownBy(() -> trainer.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class);
    TrainedModel resumed = trainer.fitInProcess(1, new Configuration());

    EpochMetrics whole = reference.history().epochs().get(1);
    EpochMetrics part = resumed.history().epochs().get(1);
    assertThat(resumed.history().resumes())
        .singleElement()
        .satisfies(r -> assertThat(r.step()).isEqualTo(80));
    assertThat(part.samples())
        .as("the epoch's samples, before and after the resume")
        .isEqualTo(whole.samples())
        .isEqualTo(44 * 32);
    // Without validation the epoch's wall time is its training time plus one small all-reduce, so
    // samples/s x seconds is the number of samples the timed steps trained: 8 x 32 after the resume
    // (the whole epoch's 1,408 samples over 8 steps' time overstates the throughput 5.5 times).
    assertThat(whole.samplesPerSecond() * whole.seconds())
        .as("uninterrupted")
        .isBetween(1408 * 0.99, 1408 * 2.0);
    assertThat(part.samplesPerSecond() * part.seconds())
        .as("resumed")
        .isBetween(256 * 0.99, 256 * 2.0);
    // (No comparison of the two rates: they are timings of a shared machine; seen 3.6x apart on a
    // loaded one.)
  }
}
