package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint store slower than the ring's operation timeout does not stall (or fail) training.
 */
class SlowCheckpointStoreTest {
  /** The local file system, but every file written takes {@link #CLOSE_MILLIS} to close. */
  public static final class SleepyFileSystem extends RawLocalFileSystem {
    static final long CLOSE_MILLIS = 7000;
    static final AtomicInteger closes = new AtomicInteger();

    @Override
    public URI getUri() {
      return URI.create("sleepy:///");
    }

    @Override
    public String getScheme() {
      return "sleepy";
    }

    @Override
    public FSDataOutputStream create(
        org.apache.hadoop.fs.Path f,
        FsPermission permission,
        boolean overwrite,
        int bufferSize,
        short replication,
        long blockSize,
        Progressable progress)
        throws IOException {
      return sleepy(
          super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress));
    }

    @Override
    public FSDataOutputStream create(
        org.apache.hadoop.fs.Path f,
        boolean overwrite,
        int bufferSize,
        short replication,
        long blockSize,
        Progressable progress)
        throws IOException {
      return sleepy(super.create(f, overwrite, bufferSize, replication, blockSize, progress));
    }

    private static FSDataOutputStream sleepy(FSDataOutputStream out) throws IOException {
      return new FSDataOutputStream(out, null) {
        @Override
        public void close() throws IOException {
          try {
            Thread.sleep(CLOSE_MILLIS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted");
          }
          out.close();
          closes.incrementAndGet();
        }
      };
    }
  }

  @TempDir Path tmp;

  @Test
  void aStoreSlowerThanTheRingTimeoutNeitherStallsNorFailsTheRing() throws Exception {
    InMemoryDataset digits = Digits.load().shuffled(3).slice(0, 640);
    Configuration conf = new Configuration();
    conf.set("fs.sleepy.impl", SleepyFileSystem.class.getName());
    conf.setBoolean("fs.sleepy.impl.disable.cache", true);
    String dir = "sleepy://" + tmp.resolve("ckpt");
    long start = System.nanoTime();
    // 2 epochs x 20 steps, a checkpoint every 2 steps (19 requested): each takes 7 s to write, the
    // ring's deadline is 5 s. A writer on the training thread would stall rank 0 past the deadline
    // of the next all-reduce and fail the ring; written in the background, the run goes on. The
    // deadline also has to cover what only rank 0 does while rank 1 waits in a collective (the
    // checkpoint directory's first listing, Hadoop's start-up in it, before the initial
    // broadcast): 2 s, as this test had, is within reach of a loaded machine's delays.
    TrainedModel m =
        DistributedTrainer.builder()
            .setModel(MlpSpec.of(64, 10, 32))
            .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
            .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
            .setTrainingData(digits.trainBatches(16, 5, true))
            .setNumWorkers(2)
            .optEpochs(2)
            .optSeed(42)
            .optOperationTimeout(Duration.ofSeconds(5))
            .optCheckpointDir(dir)
            .optCheckpointEverySteps(2)
            .build()
            .fitInProcess(0, conf);
    double seconds = (System.nanoTime() - start) / 1e9;
    assertThat(m.history().epochs()).hasSize(2);
    // The last (epoch-end) checkpoint was written before fit returned; snapshots that waited behind
    // a
    // slow write were replaced by newer ones, so far fewer than 19 writes happened.
    CheckpointStore store = new CheckpointStore(dir, conf, 3);
    assertThat(store.steps()).last().isEqualTo(40L);
    assertThat(SleepyFileSystem.closes.get()).isBetween(1, 12);
    assertThat(seconds)
        .as("wall time with %d ms writes", SleepyFileSystem.CLOSE_MILLIS)
        .isLessThan(19 * SleepyFileSystem.CLOSE_MILLIS / 1e3);
  }
}
