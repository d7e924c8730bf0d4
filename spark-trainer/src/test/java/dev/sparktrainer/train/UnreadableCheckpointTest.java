package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint that cannot be read for a while (a timeout) is retried and the run resumes from it;
 * one that cannot be read at all fails the run naming it: neither falls back to an older checkpoint
 * or to a start from scratch. (On HDFS and S3 through Spark: {@code HadoopFsContract}.)
 */
class UnreadableCheckpointTest {
  /**
   * The local file system, whose opens of checkpoints time out while {@link #failures} is positive.
   */
  public static final class TimingOut extends RawLocalFileSystem {
    static final AtomicInteger failures = new AtomicInteger();
    static final AtomicInteger opens = new AtomicInteger();

    @Override
    public URI getUri() {
      return URI.create("timingout:///");
    }

    @Override
    public String getScheme() {
      return "timingout";
    }

    @Override
    public FSDataInputStream open(org.apache.hadoop.fs.Path f, int bufferSize) throws IOException {
      if (f.getName().startsWith("ckpt-")) {
        opens.incrementAndGet();
        if (failures.getAndDecrement() > 0) {
          throw new SocketTimeoutException("simulated: read timed out");
        }
      }
      return super.open(f, bufferSize);
    }
  }

  private static final InMemoryDataset DIGITS = Digits.load().shuffled(3).slice(0, 640);

  @TempDir Path tmp;

  private DistributedTrainer job(String dir, int epochs) {
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 32))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setTrainingData(DIGITS.trainBatches(16, 5, true))
        .setNumWorkers(2)
        .optEpochs(epochs)
        .optSeed(42)
        .optCheckpointDir(dir)
        .optCheckpointEverySteps(10)
        .build();
  }

  @Test
  void aTimeoutIsRetriedAndAPersistentErrorFailsTheRunNamingTheCheckpoint() throws Exception {
    Configuration conf = new Configuration();
    conf.set("fs.timingout.impl", TimingOut.class.getName());
    conf.setBoolean("fs.timingout.impl.disable.cache", true);
    String dir = "timingout://" + tmp.toAbsolutePath();
    TimingOut.failures.set(0);
    job(dir, 1).fitInProcess(0, conf);
    CheckpointStore store = new CheckpointStore(dir, conf, 3);
    List<Long> steps = store.steps();
    assertThat(steps).last().isEqualTo(20L);

    // Always failing: 4 attempts on the newest (3.5 s of waits), then the run fails naming it.
    TimingOut.failures.set(Integer.MAX_VALUE);
    TimingOut.opens.set(0);
    assertThatThrownBy(() -> job(dir, 2).fitInProcess(0, conf))
        .isInstanceOf(IOException.class)
        .hasMessageContaining(
            "Cannot read checkpoint "
                + store.directory()
                + "/ckpt-0000000000000000020.bin (4 attempts)")
        .hasMessageContaining("simulated: read timed out");
    assertThat(TimingOut.opens).hasValue(4);
    assertThat(store.steps()).as("nothing written: no start from scratch").isEqualTo(steps);

    // Two timeouts: the third attempt reads it, and the run resumes from the newest.
    TimingOut.failures.set(2);
    TimingOut.opens.set(0);
    TrainedModel resumed = job(dir, 2).fitInProcess(0, conf);
    assertThat(TimingOut.opens).hasValue(3);
    assertThat(resumed.history().resumes())
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.step()).isEqualTo(20);
              assertThat(r.skipped()).isEmpty();
            });
  }
}
