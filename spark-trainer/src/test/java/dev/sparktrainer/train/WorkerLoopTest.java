package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.ParameterStore;
import dev.sparktrainer.collective.RingTls;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.BlockFactory;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.CustomSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.BatchSourceFactory;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.loop.InjectedFailure;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.step.OptimizerPlacement;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The worker loop without Spark: N workers as threads over loopback, as in local mode. */
class WorkerLoopTest {
  private static InMemoryDataset train;
  private static InMemoryDataset test;

  @TempDir Path tmp;

  @BeforeAll
  static void load() {
    InMemoryDataset digits = Digits.load().shuffled(11);
    train = digits.slice(0, 1437);
    test = digits.slice(1437, digits.size());
  }

  private static DistributedTrainerBuilder job(
      int workers, int batch, MlpSpec model, OptimizerSpec opt) {
    return DistributedTrainer.builder()
        .setModel(model)
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(opt)
        .setTrainingData(train.trainBatches(batch, 5, true))
        .setNumWorkers(workers)
        .optEpochs(1)
        .optSeed(42);
  }

  private static TrainedModel fit(DistributedTrainerBuilder b) throws Exception {
    return b.build().fitInProcess(0, new Configuration());
  }

  /** Every parameter, flattened in order. */
  private static List<float[]> parameters(TrainedModel m) {
    List<float[]> out = new ArrayList<>();
    try (NDManager manager = NDManager.newBaseManager()) {
      Block b = m.newBlock(manager);
      b.getParameters().values().forEach(p -> out.add(p.getArray().toFloatArray()));
    }
    return out;
  }

  private static double maxAbsDiff(List<float[]> a, List<float[]> b) {
    assertThat(a).hasSameSizeAs(b);
    double max = 0;
    for (int i = 0; i < a.size(); i++) {
      assertThat(a.get(i)).hasSameSizeAs(b.get(i));
      for (int j = 0; j < a.get(i).length; j++) {
        max = Math.max(max, Math.abs(a.get(i)[j] - b.get(i)[j]));
      }
    }
    return max;
  }

  @Test
  void twoWorkersWithBatchBEqualOneWorkerWithBatch2B() throws Exception {
    MlpSpec model = MlpSpec.of(64, 10, 32);
    OptimizerSpec sgd = OptimizerSpec.sgd().optLearningRate(0.1f).optMomentum(0.9f).build();
    TrainedModel two = fit(job(2, 16, model, sgd));
    TrainedModel one = fit(job(1, 32, model, sgd));
    TrainedModel untrained =
        fit(job(1, 32, model, OptimizerSpec.sgd().optLearningRate(1e-30f).build()));
    // 44 synchronous steps of the same global batches: averaging makes them the same updates.
    assertThat(two.history().last().steps()).isEqualTo(one.history().last().steps()).isEqualTo(44);
    assertThat(maxAbsDiff(parameters(two), parameters(one))).isLessThan(2e-5);
    assertThat(maxAbsDiff(parameters(two), parameters(untrained)))
        .as("training moved the parameters")
        .isGreaterThan(0.05);
    assertThat(two.history().last().loss())
        .isCloseTo(one.history().last().loss(), Offset.offset(1e-4));
  }

  @Test
  void accumulatedStepsEqualOneStepOnTheLargerBatch() throws Exception {
    // AdamW with warmup and cosine decay: the schedule must count optimizer steps, not
    // micro-batches.
    MlpSpec model = MlpSpec.of(64, 10, 32);
    OptimizerSpec adam =
        OptimizerSpec.adamW()
            .optLearningRate(3e-3f)
            .optWarmupSteps(10)
            .optCosineDecay(60, 1e-4f)
            .build();
    TrainedModel big = fit(job(1, 32, model, adam).optEpochs(2));
    // 1 worker x 16 x 2 micro-batches, and 2 workers x 8 x 2 (several buckets, overlap, 2 devices).
    TrainedModel oneAccumulating = fit(job(1, 16, model, adam).optEpochs(2).optAccumulateSteps(2));
    TrainedModel twoAccumulating =
        fit(
            job(2, 8, model, adam)
                .optEpochs(2)
                .optAccumulateSteps(2)
                .optFusionBucketBytes(2048)
                .optCpuDevicesPerWorker(2));
    TrainedModel noAccumulation = fit(job(1, 16, model, adam).optEpochs(2));
    for (TrainedModel m : List.of(oneAccumulating, twoAccumulating)) {
      // 1437 rows: 44 steps of 32 (89 batches of 16: the odd one left out), 1408 samples.
      assertThat(m.history().last().steps()).isEqualTo(big.history().last().steps()).isEqualTo(44);
      assertThat(m.history().last().samples())
          .isEqualTo(big.history().last().samples())
          .isEqualTo(1408);
      assertThat(maxAbsDiff(parameters(m), parameters(big))).isLessThan(2e-5);
      assertThat(m.history().last().loss())
          .isCloseTo(big.history().last().loss(), Offset.offset(1e-4));
    }
    assertThat(noAccumulation.history().last().steps()).isEqualTo(89);
    assertThat(maxAbsDiff(parameters(noAccumulation), parameters(big)))
        .as("accumulation changed the steps")
        .isGreaterThan(1e-3);
    assertThatThrownBy(() -> job(1, 16, model, adam).optAccumulateSteps(0).build())
        .hasMessageContaining("Invalid accumulateSteps 0: expected >= 1");
    assertThatThrownBy(() -> fit(job(1, 16, model, adam).optAccumulateSteps(90)))
        .hasStackTraceContaining(
            "Invalid accumulateSteps 90: an epoch has only 89 batch(es) per worker");
  }

  @Test
  void halfPrecisionGradientsStayCloseToFp32AndKeepReplicasIdentical() throws Exception {
    // 50,826 parameters (203 KB): above the 64 KiB below which messages take the small-message
    // path,
    // which always travels at full precision.
    MlpSpec model = MlpSpec.of(64, 10, 256, 128);
    OptimizerSpec sgd = OptimizerSpec.sgd().optLearningRate(0.1f).optMomentum(0.9f).build();
    TrainedModel fp32 = fit(job(2, 16, model, sgd).optValidationData(test.evalBatches(50)));
    assertThatThrownBy(
            () -> job(2, 16, model, sgd).optGradientPrecision(WirePrecision.FP16).build())
        .hasMessageContaining("Invalid gradientPrecision FP16: expected FP32 or BF16");
    for (WirePrecision p : List.of(WirePrecision.BF16)) {
      TrainedModel half =
          fit(
              job(2, 16, model, sgd)
                  .optValidationData(test.evalBatches(50))
                  .optGradientPrecision(p));
      // The replica check at the epoch end passed (fit would have thrown), and the option took
      // effect:
      // rounded gradients give slightly different parameters, and about the same accuracy.
      double diff = maxAbsDiff(parameters(half), parameters(fp32));
      assertThat(diff).as(p + " vs FP32").isGreaterThan(0).isLessThan(0.5);
      assertThat(half.history().last().validationAccuracy())
          .isCloseTo(fp32.history().last().validationAccuracy(), Offset.offset(0.05));
    }
  }

  /** A linear layer of 12,000 units, batch norm over them, and a classifier. */
  public static final class WideBatchNorm implements BlockFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public Block newBlock() {
      return new SequentialBlock()
          .add(Linear.builder().setUnits(12000).build())
          .add(BatchNorm.builder().build())
          .add(ai.djl.nn.Activation::relu)
          .add(Linear.builder().setUnits(10).build());
    }
  }

  @Test
  void batchNormStatisticsTravelAtFullPrecisionWhateverTheGradientWire() throws Exception {
    // A learning rate of ~0: the parameters do not move, so every step's forward sees the same
    // weights
    // and the running statistics depend only on the data and on how they are averaged. BF16
    // gradients
    // must not round the statistics: they end bit-identical to the FP32 run's. 12,000 channels: 96
    // KB
    // of statistics, above the size below which messages always travel at full precision.
    ModelSpec model = CustomSpec.of(new WideBatchNorm(), new Shape(64));
    OptimizerSpec still = OptimizerSpec.sgd().optLearningRate(1e-30f).build();
    DistributedTrainerBuilder b =
        DistributedTrainer.builder()
            .setModel(model)
            .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
            .setOptimizer(still)
            .setTrainingData(train.slice(0, 320).trainBatches(16, 5, true))
            .setNumWorkers(2)
            .optEpochs(1)
            .optSeed(42);
    TrainedModel fp32 = fit(b);
    TrainedModel bf16 = fit(b.optGradientPrecision(WirePrecision.BF16));
    // Parameters 4 and 5: the batch norm's running mean and variance (zero-initialized biases still
    // move by 1e-30 x gradient, which differs between the wires; it vanishes in the layer's sums).
    List<float[]> a = parameters(bf16);
    List<float[]> e = parameters(fp32);
    assertThat(a.get(4)).hasSize(12000).containsExactly(e.get(4));
    assertThat(a.get(5)).hasSize(12000).containsExactly(e.get(5));
    float[] ones = new float[12000];
    Arrays.fill(ones, 1f);
    assertThat(e.get(5)).as("the variance moved from its initial ones").isNotEqualTo(ones);
  }

  @Test
  void tlsRingTrainsTheSameParametersAndAMissingKeyStoreIsNamed() throws Exception {
    MlpSpec model =
        MlpSpec.of(64, 10, 256, 128); // above the small-message path: the big frames go through TLS
    OptimizerSpec sgd = OptimizerSpec.sgd().optLearningRate(0.1f).optMomentum(0.9f).build();
    Path keystore = tmp.resolve("ring.p12");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    Process p =
        new ProcessBuilder(
                keytool,
                "-genkeypair",
                "-alias",
                "ring",
                "-keyalg",
                "EC",
                "-groupname",
                "secp256r1",
                "-dname",
                "CN=spark-trainer-ring",
                "-validity",
                "2",
                "-storetype",
                "PKCS12",
                "-keystore",
                keystore.toString(),
                "-storepass",
                "s3cret",
                "-keypass",
                "s3cret")
            .redirectErrorStream(true)
            .start();
    try {
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("keytool finished").isTrue();
      assertThat(p.exitValue()).as(new String(p.getInputStream().readAllBytes())).isZero();
    } finally {
      p.destroyForcibly();
    }
    RingTls tls = RingTls.builder().setKeyStore(keystore.toString(), "s3cret").build();
    TrainedModel plain = fit(job(2, 16, model, sgd));
    TrainedModel encrypted = fit(job(2, 16, model, sgd).optRingTls(tls));
    assertThat(encrypted.parameterBytes()).isEqualTo(plain.parameterBytes());

    RingTls missing =
        RingTls.builder().setKeyStore(tmp.resolve("nowhere.p12").toString(), "s3cret").build();
    assertThatThrownBy(() -> fit(job(2, 16, model, sgd).optRingTls(missing)))
        .hasStackTraceContaining(
            "Ring TLS key store " + tmp.resolve("nowhere.p12") + " does not exist");
    RingTls wrong = RingTls.builder().setKeyStore(keystore.toString(), "guess").build();
    assertThatThrownBy(wrong::sslContext)
        .hasMessageContaining("Ring TLS key store " + keystore)
        .hasMessageContaining("wrong password or type?");
  }

  @Test
  void batchSplitAcrossDevicesEqualsOneDevice() throws Exception {
    MlpSpec model = MlpSpec.of(64, 10, 32);
    OptimizerSpec adam = OptimizerSpec.adam().optLearningRate(1e-3f).build();
    TrainedModel split =
        fit(job(1, 32, model, adam).optCpuDevicesPerWorker(3)); // slices of 11, 11, 10
    TrainedModel whole = fit(job(1, 32, model, adam));
    assertThat(maxAbsDiff(parameters(split), parameters(whole))).isLessThan(1e-4);
  }

  @ParameterizedTest
  @EnumSource(
      value = OptimizerPlacement.class,
      names = {"HOST", "DEVICE"})
  void resumedRunMatchesUninterruptedRunBitForBit(OptimizerPlacement placement) throws Exception {
    // Dropout: the per-step random streams must be restored too. Small buckets: several per step.
    MlpSpec model = MlpSpec.of(64, 10, 32).with(Activation.RELU, 0.2f);
    OptimizerSpec adam =
        OptimizerSpec.adamW()
            .optLearningRate(3e-3f)
            .optWarmupSteps(10)
            .optCosineDecay(100, 1e-4f)
            .build();
    TrainedModel reference =
        fit(
            job(2, 16, model, adam)
                .optEpochs(3)
                .optValidationData(test.evalBatches(50))
                .optOptimizerPlacement(placement)
                .optFusionBucketBytes(2048));

    DistributedTrainerBuilder failing =
        job(2, 16, model, adam)
            .optOptimizerPlacement(placement)
            .optFusionBucketBytes(2048)
            .optEpochs(3)
            .optValidationData(test.evalBatches(50))
            .optCheckpointDir(tmp.toString())
            .optCheckpointEverySteps(20)
            .optKeepCheckpoints(2)
            .optInjectFailure(0, 70); // epoch 1, step 26 of 44; latest checkpoint at step 60
    DistributedTrainer trainer = failing.build();
    assertThatThrownBy(() -> trainer.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class)
        .hasMessageContaining("after global step 70");
    TrainedModel resumed = trainer.fitInProcess(1, new Configuration());

    assertThat(resumed.parameterBytes()).isEqualTo(reference.parameterBytes());
    assertThat(resumed.history().epochs()).hasSize(3);
    for (int e = 0; e < 3; e++) {
      EpochMetrics a = resumed.history().epochs().get(e);
      EpochMetrics b = reference.history().epochs().get(e);
      assertThat(a.parameterHash()).isEqualTo(b.parameterHash());
      assertThat(a.loss()).isCloseTo(b.loss(), Offset.offset(1e-9));
      assertThat(a.validationAccuracy()).isEqualTo(b.validationAccuracy());
    }
    // Re-running the finished job (a scheduler retrying the command) trains nothing more.
    TrainedModel again = trainer.fitInProcess(2, new Configuration());
    assertThat(again.parameterBytes()).isEqualTo(reference.parameterBytes());
  }

  @Test
  void overlapOnAndOffGiveEqualParametersAndReportTheirTimes() throws Exception {
    // A CNN with dropout: backward in segments, 4 KiB buckets (about a dozen a step), two workers.
    CnnSpec cnn = new CnnSpec(new long[] {1, 8, 8}, new int[] {4, 8}, 16, 10, 0.25f);
    OptimizerSpec adam = OptimizerSpec.adam().optLearningRate(1e-3f).build();
    for (OptimizerPlacement placement :
        List.of(OptimizerPlacement.HOST, OptimizerPlacement.DEVICE)) {
      DistributedTrainerBuilder base =
          DistributedTrainer.builder()
              .setModel(cnn)
              .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
              .setOptimizer(adam)
              .setTrainingData(train.slice(0, 640).trainBatches(16, 5, true))
              .setNumWorkers(2)
              .optEpochs(2)
              .optSeed(42)
              .optFusionBucketBytes(4096)
              .optOptimizerPlacement(placement);
      TrainedModel on = fit(base.optOverlap(true));
      TrainedModel off = fit(base.optOverlap(false));
      // The same bucket layout and reduction order: backward in segments gives the same gradients.
      assertThat(maxAbsDiff(parameters(on), parameters(off)))
          .as(placement.toString())
          .isLessThan(1e-6);
      EpochMetrics m = on.history().last();
      assertThat(m.backwardSeconds()).isGreaterThan(0).isLessThanOrEqualTo(m.computeSeconds());
      assertThat(m.communicationSeconds()).isGreaterThan(0);
      // Exposed time is the training thread's wait: the all-reduces it did not hide plus the
      // hand-offs.
      assertThat(m.allReduceSeconds())
          .as("exposed")
          .isGreaterThan(0)
          .isLessThanOrEqualTo(m.communicationSeconds() * 1.5 + 0.05);
      EpochMetrics o = off.history().last();
      assertThat(o.allReduceSeconds())
          .as("without overlap all communication is exposed")
          .isEqualTo(o.communicationSeconds());
    }
  }

  @Test
  void savedModelRebuildsWithoutTheSpecObject() throws Exception {
    TrainedModel m =
        fit(
            job(
                2,
                32,
                MlpSpec.of(64, 10, 32),
                OptimizerSpec.adam().optLearningRate(1e-2f).build()));
    m.save(tmp.resolve("out").toString(), new Configuration());
    TrainedModel loaded = TrainedModel.load(tmp.resolve("out").toString(), new Configuration());
    assertThat(loaded.spec().toProperties()).isEqualTo(m.spec().toProperties());
    try (NDManager manager = NDManager.newBaseManager()) {
      NDArray x = manager.create(new float[64 * 3], new Shape(3, 64)).add(0.5f);
      float[] a = predict(m.newBlock(manager), manager, x);
      float[] b = predict(loaded.newBlock(manager), manager, x);
      assertThat(b).containsExactly(a);
    }
  }

  private static float[] predict(Block block, NDManager manager, NDArray x) {
    return block
        .forward(new ParameterStore(manager, false), new NDList(x), false)
        .head()
        .toFloatArray();
  }

  @Test
  void unequalStepsPerEpochFailClearly() {
    BatchSourceFactory uneven =
        (rank, n, manager) ->
            train.slice(0, rank == 0 ? 320 : 640).trainBatches(16, 1, false).create(0, 1, manager);
    assertThatThrownBy(
            () ->
                fit(
                    job(2, 16, MlpSpec.of(64, 10, 8), OptimizerSpec.sgd().build())
                        .setTrainingData(uneven)))
        .hasMessageContaining("workers have different stepsPerEpoch (from 20 to 40)");
  }

  static DataInputStream in(byte[] b) {
    return new DataInputStream(new ByteArrayInputStream(b));
  }
}
