package dev.sparktrainer.it.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.InProcessTraining;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.step.OptimizerPlacement;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A model whose training state is larger than 2 GiB checkpoints and resumes bit for bit: an MLP of
 * 186,650,610 float parameters trained with Adam, so parameters and the two moment slots are 3 x
 * 746.6 MB = 2.24 GB, in one worker (workers as threads, {@code fitInProcess}, no Spark).
 *
 * <p>Per optimizer placement: an uninterrupted run of 3 steps (one epoch, 6 rows, batch 2); the
 * same job with a checkpoint every 2 steps and a failure injected right after the checkpoint at
 * step 2 (mid-epoch); then the next attempt, which must resume from that checkpoint (larger than 2
 * GiB on disk), train step 3 and write the epoch-end checkpoint (larger than 2 GiB too), and end
 * with parameters bit-identical to the uninterrupted run's (compared by SHA-256: the two never sit
 * in memory together). DEVICE keeps the optimizer state in tensors, HOST in Java arrays.
 *
 * <p>About 5 minutes on 2 cores, a heap larger than the tests' -Xmx4g and about 13 GB of RSS
 * (measured: see the integration tests' README): it runs only in the profile {@code
 * large-model-it}, whose Failsafe execution {@code large-model-checkpoint} gives it a JVM of its
 * own with -Xmx8g and sets {@value #ENABLED}; anywhere else it is skipped (the default execution
 * excludes it, and skips it under {@code -Dit.test=LargeModelCheckpointIT}). Needs about 4.5 GB
 * free in {@code java.io.tmpdir} (two checkpoints while the second is written); everything is
 * deleted at the end.
 */
class LargeModelCheckpointIT {
  /** Set by the Failsafe execution that gives this test its heap. */
  static final String ENABLED = "sparktrainer.it.largeModelCheckpoint";

  /** The heap the runs were measured to need, with margin (see the pom's execution). */
  private static final long HEAP_NEEDED = 8L << 30;

  private static final int INPUTS = 64;
  private static final int CLASSES = 10;
  private static final MlpSpec MODEL = MlpSpec.of(INPUTS, CLASSES, 40_000, 4_600);

  /** Weights and biases of 64 -> 40000 -> 4600 -> 10. */
  private static final long PARAMETERS =
      64L * 40_000 + 40_000 + 40_000L * 4_600 + 4_600 + 4_600L * 10 + 10;

  /** Parameters and Adam's m and v, 4 bytes each. */
  private static final long STATE_BYTES = 3 * 4 * PARAMETERS;

  private static final long TWO_GIB = 1L << 31;

  @TempDir Path tmp;

  @ParameterizedTest
  @EnumSource(
      value = OptimizerPlacement.class,
      names = {"DEVICE", "HOST"})
  void aModelWithMoreThan2GiBOfTrainingStateResumesBitForBit(OptimizerPlacement placement)
      throws Exception {
    assumeTrue(
        Boolean.getBoolean(ENABLED),
        "LargeModelCheckpointIT runs only with -Plarge-model-it (its own Failsafe execution, with a larger heap)");
    assertThat(PARAMETERS).isEqualTo(186_650_610L);
    assertThat(STATE_BYTES).as("the state must not fit in 2 GiB").isGreaterThan(TWO_GIB);
    assertThat(Runtime.getRuntime().maxMemory())
        .as(
            "max heap: the Failsafe execution large-model-checkpoint must give this test -Xmx of at least %d GiB",
            HEAP_NEEDED >> 30)
        .isGreaterThanOrEqualTo(HEAP_NEEDED - (256L << 20));
    Configuration conf = new Configuration();
    String tag = "LargeModelCheckpointIT " + placement;

    // 1. Uninterrupted: 3 steps, no checkpoint. Only its hashes and metrics are kept.
    Phase p = Phase.start(tag + " uninterrupted run");
    TrainedModel model = fit(job(placement).build(), 0, conf);
    String referenceHash = sha256(model.parameterBytes());
    EpochMetrics reference = model.history().last();
    assertThat(model.history().resumes()).isEmpty();
    assertThat(reference.steps()).isEqualTo(3);
    model = null;
    p.end();

    // 2. Checkpoint every 2 steps; rank 0 fails right after submitting the checkpoint of step 2.
    Path dir = tmp.resolve("ckpt");
    DistributedTrainer trainer =
        InProcessTraining.injectFailure(
                job(placement)
                    .optCheckpointDir(dir.toUri().toString())
                    .optCheckpointEverySteps(2)
                    .optKeepCheckpoints(1),
                0,
                2)
            .build();
    p = Phase.start(tag + " attempt 0 (fails after step 2)");
    Throwable failure = null;
    try {
      fit(trainer, 0, conf);
    } catch (Throwable t) {
      failure = t;
    }
    assertThat(failure).as("attempt 0 must fail with the injected failure").isNotNull();
    if (!InProcessTraining.isInjectedFailure(failure)) {
      throw new AssertionError(
          tag + ": attempt 0 failed, but not with the injected failure", failure);
    }
    assertThat(failure).hasMessageContaining("after global step 2");
    p.end();
    // The writer finished the checkpoint before the worker gave up (closing it waits for the
    // write).
    assertThat(checkpoints(dir)).containsExactly("ckpt-0000000000000000002.bin");
    long size2 = Files.size(dir.resolve("ckpt-0000000000000000002.bin"));
    assertCheckpointSize(size2);

    // 3. The next attempt resumes from it and ends where the uninterrupted run ended, bit for bit.
    p = Phase.start(tag + " attempt 1 (resumes at step 2)");
    TrainedModel resumed = fit(trainer, 1, conf);
    String resumedHash = sha256(resumed.parameterBytes());
    p.end();
    List<Resume> resumes = resumed.history().resumes();
    assertThat(resumes).as("the run resumed from the checkpoint at step 2").hasSize(1);
    assertThat(resumes.get(0).step()).isEqualTo(2);
    assertThat(resumes.get(0).epoch()).isZero();
    assertThat(resumes.get(0).stepInEpoch()).isEqualTo(2);
    assertThat(resumes.get(0).stageAttempt()).isEqualTo(1);
    assertThat(resumedHash)
        .as("SHA-256 of the final parameters, resumed vs uninterrupted")
        .isEqualTo(referenceHash);
    EpochMetrics last = resumed.history().last();
    assertThat(last.parameterHash()).isEqualTo(reference.parameterHash());
    assertThat(last.steps()).isEqualTo(reference.steps());
    assertThat(last.samples()).isEqualTo(reference.samples()).isEqualTo(6);
    assertThat(last.loss()).isCloseTo(reference.loss(), Offset.offset(1e-9));
    // The epoch-end checkpoint of the resumed attempt replaced the one it resumed from (keep 1).
    assertThat(checkpoints(dir)).containsExactly("ckpt-0000000000000000003.bin");
    long size3 = Files.size(dir.resolve("ckpt-0000000000000000003.bin"));
    assertCheckpointSize(size3);
    System.out.printf(
        "%s: checkpoints of %,d and %,d bytes (> 2 GiB = %,d); final parameters %s%n",
        tag, size2, size3, TWO_GIB, resumedHash);
    deleteTree(dir); // 2.24 GB: not left for the end of the run
  }

  /** 6 rows of synthetic data, batch 2: 3 steps an epoch; Adam; one worker. */
  private static DistributedTrainerBuilder job(OptimizerPlacement placement) {
    SplittableRandom r = new SplittableRandom(7);
    int rows = 6;
    float[] x = new float[rows * INPUTS];
    for (int i = 0; i < x.length; i++) {
      x[i] = (float) r.nextGaussian();
    }
    long[] y = new long[rows];
    for (int i = 0; i < rows; i++) {
      y[i] = i % CLASSES;
    }
    InMemoryDataset data = InMemoryDataset.ofClasses(x, new Shape(INPUTS), y);
    return DistributedTrainer.builder()
        .setModel(MODEL)
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-3f).build())
        .setTrainingData(data.trainBatches(2, 5, true))
        .setNumWorkers(1)
        .optEpochs(1)
        .optSeed(42)
        .optOptimizerPlacement(placement);
  }

  /** Parameters plus two slots, plus names, metadata and framing (well under a MiB). */
  private static void assertCheckpointSize(long size) {
    assertThat(size)
        .as("checkpoint size in bytes")
        .isGreaterThan(TWO_GIB)
        .isGreaterThan(STATE_BYTES)
        .isLessThan(STATE_BYTES + (1 << 20));
  }

  /**
   * Runs one attempt. A failure that looks like the old 2 GiB limit (an array or buffer sized past
   * Integer.MAX_VALUE) or like too small a heap is turned into an assertion that says so; the
   * injected failure and anything else are rethrown as they are.
   */
  private static TrainedModel fit(DistributedTrainer trainer, int attempt, Configuration conf)
      throws Exception {
    try {
      return InProcessTraining.fit(trainer, attempt, conf);
    } catch (Exception | Error e) {
      if (InProcessTraining.isInjectedFailure(e)) {
        throw e;
      }
      for (Throwable c = e; c != null; c = c.getCause()) {
        String m = String.valueOf(c.getMessage());
        if (c instanceof NegativeArraySizeException
            || m.contains("exceeds VM limit")
            || m.contains("2 GiB")
            || m.contains("Integer.MAX_VALUE")) {
          throw new AssertionError("Attempt " + attempt + " hit a 2 GiB limit: " + c, e);
        }
        if (c instanceof OutOfMemoryError) {
          throw new AssertionError(
              "Attempt "
                  + attempt
                  + " ran out of memory ("
                  + c.getMessage()
                  + ") with -Xmx "
                  + (Runtime.getRuntime().maxMemory() >> 20)
                  + " MiB: "
                  + Phase.memory(),
              e);
        }
      }
      throw e;
    }
  }

  private static List<String> checkpoints(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      // Hadoop's local file system adds a hidden .crc side file per file.
      return s.map(p -> p.getFileName().toString())
          .filter(n -> !n.startsWith("."))
          .sorted()
          .toList();
    }
  }

  private static void deleteTree(Path dir) throws IOException {
    try (Stream<Path> s = Files.walk(dir)) {
      for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }

  private static String sha256(byte[] b) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
  }

  /** Wall time and memory of one phase, printed (the numbers the pom's heap is based on). */
  private record Phase(String name, long startNanos) {
    static Phase start(String name) {
      for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
        pool.resetPeakUsage();
      }
      resetPeakRss();
      return new Phase(name, System.nanoTime());
    }

    void end() {
      System.out.printf("%s: %.1f s, %s%n", name, (System.nanoTime() - startNanos) / 1e9, memory());
    }

    /**
     * Peak heap (sum of the heap pools' peaks since the phase began: an upper bound) and peak RSS.
     */
    static String memory() {
      long heapPeak = 0;
      for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
        if (pool.getType() == MemoryType.HEAP) {
          heapPeak += pool.getPeakUsage().getUsed();
        }
      }
      return String.format(
          "heap peak <= %.2f GB, RSS peak %s, RSS now %s",
          heapPeak / 1e9, status("VmHWM"), status("VmRSS"));
    }

    /** Linux: writing 5 to clear_refs resets VmHWM to the current RSS. Best effort. */
    private static void resetPeakRss() {
      try {
        Files.writeString(Path.of("/proc/self/clear_refs"), "5");
      } catch (IOException | RuntimeException e) {
        // not Linux, or not allowed: the peak is then the process's
      }
    }

    private static String status(String key) {
      try {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
          if (line.startsWith(key + ":")) {
            long kb = Long.parseLong(line.substring(key.length() + 1).trim().split("\\s+")[0]);
            return String.format("%.2f GB", kb * 1024 / 1e9);
          }
        }
      } catch (IOException | RuntimeException e) {
        // not Linux
      }
      return "n/a";
    }
  }
}
