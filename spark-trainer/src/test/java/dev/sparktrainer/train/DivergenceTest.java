package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A run whose loss becomes NaN stops with an error that says so, before it checkpoints the NaN
 * parameters: a resume on clean data starts from the last good checkpoint and trains finite.
 */
class DivergenceTest {
  @TempDir Path tmp;

  /** 640 digits; with {@code poisoned}, one example's pixel is NaN. */
  private static InMemoryDataset digits(boolean poisoned) {
    InMemoryDataset d = Digits.load().slice(0, 640);
    float[] x = new float[640 * 64];
    long[] y = new long[640];
    for (int i = 0; i < 640; i++) {
      System.arraycopy(d.features(i), 0, x, i * 64, 64);
      y[i] = d.label(i);
    }
    if (poisoned) {
      x[500 * 64 + 10] = Float.NaN;
    }
    return InMemoryDataset.ofClasses(x, d.exampleShape(), y);
  }

  private DistributedTrainer job(InMemoryDataset data, int epochs) {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 16))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setTrainingData(data.trainBatches(16, 5, true))
        .setNumWorkers(2)
        .optEpochs(epochs)
        .optSeed(7)
        .optCheckpointDir(tmp.toString())
        .optCheckpointEverySteps(4)
        .build();
  }

  @Test
  void aNaNLossStopsTheRunBeforeItsCheckpointAndAResumeTrainsFinite() throws Exception {
    Configuration conf = new Configuration();
    assertThatThrownBy(() -> job(digits(true), 2).fitInProcess(0, conf))
        .isInstanceOf(NonRetryableTrainingException.class)
        .hasMessageStartingWith("Training diverged: the training loss of epoch 0 is NaN at step ")
        .hasMessageContaining("stopped before writing a checkpoint of these parameters");
    // Had a checkpoint of the NaN parameters been written, the resume would start from it and
    // fail the same way; it resumes from the last good one (or from scratch) and trains finite.
    TrainedModel resumed = job(digits(false), 2).fitInProcess(0, conf);
    assertThat(resumed.history().epochs()).hasSize(2);
    assertThat(resumed.history().epochs())
        .allSatisfy(e -> assertThat(e.loss()).isFinite().isLessThan(3.0));
    assertThat(new CheckpointStore(tmp.toString(), conf, 3).steps()).isNotEmpty();
  }
}
