package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.metrics.Resume;
import java.io.RandomAccessFile;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Checkpoints skipped on resume are recorded in the history: a resume from an older checkpoint
 * lists the newer, corrupt ones; when every checkpoint is corrupt the start from scratch is
 * recorded too.
 */
class SkippedCheckpointsTest {
  private static final InMemoryDataset DIGITS = Digits.load().shuffled(3).slice(0, 640);

  @TempDir Path tmp;

  /** 2 workers x 16 = 20 steps per epoch, a checkpoint every 10 steps, the newest 3 kept. */
  private DistributedTrainer job(int epochs) {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 32))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setTrainingData(DIGITS.trainBatches(16, 5, true))
        .setNumWorkers(2)
        .optEpochs(epochs)
        .optSeed(42)
        .optCheckpointDir(tmp.toString())
        .optCheckpointEverySteps(10)
        .optKeepCheckpoints(3)
        .build();
  }

  private Path file(long step) {
    return tmp.resolve(String.format("ckpt-%019d.bin", step));
  }

  /** How many bytes were flipped so far: each flip takes the next byte. */
  private int flips;

  /**
   * Flips a byte of an array's data: the checkpoint's CRC (or the local FS's .crc) no longer
   * verifies. Each call flips another byte: a file corrupted earlier may still be there (the
   * background writer may drop the snapshot that would have replaced it), and flipping the same
   * byte twice would repair it.
   */
  private void corrupt(long step) throws Exception {
    try (RandomAccessFile f = new RandomAccessFile(file(step).toFile(), "rw")) {
      long at = f.length() / 2 + flips++;
      f.seek(at);
      int b = f.read();
      f.seek(at);
      f.write(b ^ 0x5a);
    }
  }

  @Test
  void skippedCheckpointsAndAStartFromScratchAreRecorded() throws Exception {
    Configuration conf = new Configuration();
    CheckpointStore store = new CheckpointStore(tmp.toString(), conf, 3);
    TrainedModel first = job(2).fitInProcess(0, conf);
    assertThat(first.history().resumes()).isEmpty();
    // The background writer may drop a snapshot that waited behind a slow write: which steps are
    // there varies, the last (step 40, the end of epoch 1) is always written before fit returns.
    List<Long> steps = store.steps();
    assertThat(steps).hasSizeGreaterThan(1).last().isEqualTo(40L);
    long previous = steps.get(steps.size() - 2);

    // The newest is corrupt: resumed from the one before, and the history says why.
    corrupt(40);
    TrainedModel second = job(3).fitInProcess(0, conf);
    assertThat(second.history().resumes())
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.step()).isEqualTo(previous);
              assertThat(r.epoch()).isEqualTo((int) (previous / 20));
              assertThat(r.stepInEpoch()).isEqualTo(previous % 20);
              assertThat(r.fromScratch()).isFalse();
              assertThat(r.skipped())
                  .singleElement()
                  .satisfies(
                      k -> {
                        assertThat(name(k)).isEqualTo(file(40).getFileName().toString());
                        assertThat(k.reason()).startsWith("corrupt");
                      });
            });
    assertThat(second.history().epochs()).hasSize(3);
    List<Long> bad = store.steps();
    assertThat(bad).last().isEqualTo(60L);

    // Every one corrupt: training starts from scratch, and the history records that and why.
    for (long step : bad) {
      corrupt(step);
    }
    TrainedModel third = job(1).fitInProcess(0, conf);
    assertThat(third.history().epochs()).hasSize(1);
    assertThat(third.history().epochs().get(0).parameterHash())
        .as("epoch 0 trained again from the start")
        .isEqualTo(first.history().epochs().get(0).parameterHash());
    assertThat(third.history().resumes()).hasSize(1);
    Resume scratch = third.history().resumes().get(0);
    assertThat(scratch.fromScratch()).isTrue();
    assertThat(scratch.step()).isZero();
    assertThat(scratch.checkpoint()).isEqualTo(tmp.toString());
    List<String> newestFirst = new ArrayList<>();
    for (int i = bad.size() - 1; i >= 0; i--) {
      newestFirst.add(file(bad.get(i)).getFileName().toString());
    }
    assertThat(scratch.skipped())
        .extracting(SkippedCheckpointsTest::name)
        .containsExactlyElementsOf(newestFirst);
    assertThat(scratch.skipped()).allSatisfy(k -> assertThat(k.reason()).startsWith("corrupt"));
    // Its own checkpoints are kept, though the corrupt ones have later steps.
    assertThat(store.steps()).contains(20L).containsAll(bad);

    // The next run resumes from the restarted run's checkpoint; the start from scratch travelled in
    // it.
    TrainedModel fourth = job(1).fitInProcess(0, conf);
    assertThat(fourth.history().resumes()).hasSize(2);
    assertThat(fourth.history().resumes().get(0)).isEqualTo(scratch);
    Resume resumed = fourth.history().resumes().get(1);
    assertThat(resumed.step()).isEqualTo(20);
    assertThat(resumed.fromScratch()).isFalse();
    assertThat(resumed.skipped()).hasSameSizeAs(bad);
    assertThat(fourth.parameterBytes()).isEqualTo(third.parameterBytes());
  }

  private static String name(SkippedCheckpoint k) {
    return k.file().substring(k.file().lastIndexOf('/') + 1);
  }
}
