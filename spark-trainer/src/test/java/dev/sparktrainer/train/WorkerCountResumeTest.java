package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import dev.sparktrainer.collective.CommOptions;
import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.device.BatchSource;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import dev.sparktrainer.train.elastic.Rescale;
import dev.sparktrainer.train.input.BatchSourceFactory;
import dev.sparktrainer.train.input.DatasetSource;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.loop.InjectedFailure;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.WorkerCountChange;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.StepOptions;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A checkpoint written by N workers resumes on N' != N: the global batch kept (batch and
 * accumulation chosen), the interrupted epoch continued with the records not yet consumed, each run
 * against an uninterrupted one; or the learning rate rescaled; or refused, naming the options.
 */
class WorkerCountResumeTest {
  private static InMemoryDataset train;
  private static InMemoryDataset test;

  @TempDir Path tmp;

  @BeforeAll
  static void load() {
    InMemoryDataset digits = Digits.load().shuffled(11);
    train = digits.slice(0, 1437);
    test = digits.slice(1437, digits.size());
  }

  private static final MlpSpec MODEL = MlpSpec.of(64, 10, 32);
  private static final OptimizerSpec ADAM =
      OptimizerSpec.adamW()
          .optLearningRate(3e-3f)
          .optWarmupSteps(10)
          .optCosineDecay(80, 1e-4f)
          .build();

  private DistributedTrainerBuilder job(int workers, int batch, BatchSourceFactory data) {
    return job(MODEL, workers, batch, data);
  }

  private DistributedTrainerBuilder job(
      ModelSpec model, int workers, int batch, BatchSourceFactory data) {
    return DistributedTrainer.builder()
        .setModel(model)
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(ADAM)
        .setTrainingData(data == null ? train.trainBatches(batch, 5, true) : data)
        .optValidationData(test.evalBatches(50))
        .setNumWorkers(workers)
        .optEpochs(2)
        .optSeed(42);
  }

  private DistributedTrainerBuilder checkpointed(int workers, int batch, BatchSourceFactory data) {
    return job(workers, batch, data)
        .optCheckpointDir(tmp.toString())
        .optCheckpointEverySteps(10)
        .optKeepCheckpoints(2);
  }

  /** Trains on {@code from} workers until a failure after step 25 (checkpoint at 20, mid-epoch). */
  private void interrupted(int from, int batch, BatchSourceFactory data) {
    DistributedTrainer t = checkpointed(from, batch, data).optInjectFailure(0, 25).build();
    assertThatThrownBy(() -> t.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class);
  }

  private static List<float[]> parameters(TrainedModel m) {
    List<float[]> out = new ArrayList<>();
    try (NDManager manager = NDManager.newBaseManager()) {
      Block b = m.newBlock(manager);
      b.getParameters().values().forEach(p -> out.add(p.getArray().toFloatArray()));
    }
    return out;
  }

  private static double maxAbsDiff(List<float[]> a, List<float[]> b) {
    double max = 0;
    for (int i = 0; i < a.size(); i++) {
      for (int j = 0; j < a.get(i).length; j++) {
        max = Math.max(max, Math.abs(a.get(i)[j] - b.get(i)[j]));
      }
    }
    return max;
  }

  @ParameterizedTest(name = "{0} -> {2} workers")
  @CsvSource({"2, 16, 1, 16, 2", "1, 24, 3, 8, 1", "3, 8, 2, 6, 2"})
  void resumedOnAnotherWorkerCountKeepsTheGlobalBatch(
      int from, int batch, int to, int chosenBatch, int chosenK) throws Exception {
    TrainedModel reference = job(from, batch, null).build().fitInProcess(0, new Configuration());
    interrupted(from, batch, null);
    TrainedModel resumed =
        checkpointed(to, batch, null).build().fitInProcess(1, new Configuration());

    Resume r = resumed.history().resumes().get(0);
    assertThat(r.step()).isEqualTo(20);
    assertThat(r.stepInEpoch()).isEqualTo(20);
    assertThat(r.workers())
        .isEqualTo(new WorkerCountChange(from, to, chosenBatch, chosenK, 1.0, false));
    assertThat(r.workers().globalBatch()).isEqualTo((long) from * batch);
    assertThat(r.toJson())
        .contains("\"workers\":{\"from_workers\":" + from + ",\"to_workers\":" + to);
    for (int e = 0; e < 2; e++) {
      EpochMetrics a = resumed.history().epochs().get(e);
      EpochMetrics b = reference.history().epochs().get(e);
      assertThat(a.steps()).as("steps of epoch " + e).isEqualTo(b.steps());
      assertThat(a.samples()).as("samples of epoch " + e).isEqualTo(b.samples());
      assertThat(a.loss()).isCloseTo(b.loss(), Offset.offset(1e-3));
      assertThat(a.validationAccuracy()).isCloseTo(b.validationAccuracy(), Offset.offset(0.01));
    }
    // The same optimizer steps on the same global batches: the same parameters up to float
    // rounding.
    assertThat(maxAbsDiff(parameters(resumed), parameters(reference))).isLessThan(1e-4);
  }

  /**
   * A TorchScript module (batch norm and dropout) checkpointed mid-epoch on 2 workers resumes on 1
   * with the same global batch: its weights and batch-norm statistics come back from the checkpoint
   * (elastic shrink and grow relaunch through the same resume).
   */
  @Test
  void aTorchScriptModuleResumesOnAnotherWorkerCount() throws Exception {
    ModelSpec module =
        TorchScriptSpec.of(
            java.nio.file.Path.of("src/test/resources/torchscript/digits_bn.pt").toString());
    TrainedModel reference = job(module, 2, 16, null).build().fitInProcess(0, new Configuration());
    DistributedTrainer broken =
        job(module, 2, 16, null)
            .optCheckpointDir(tmp.toString())
            .optCheckpointEverySteps(10)
            .optKeepCheckpoints(2)
            .optInjectFailure(0, 25)
            .build();
    assertThatThrownBy(() -> broken.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class);
    TrainedModel resumed =
        job(module, 1, 16, null)
            .optCheckpointDir(tmp.toString())
            .optCheckpointEverySteps(10)
            .optKeepCheckpoints(2)
            .build()
            .fitInProcess(1, new Configuration());
    Resume r = resumed.history().resumes().get(0);
    assertThat(r.step()).isEqualTo(20);
    assertThat(r.workers().globalBatch()).isEqualTo(32L);
    for (int e = 0; e < 2; e++) {
      EpochMetrics a = resumed.history().epochs().get(e);
      EpochMetrics b = reference.history().epochs().get(e);
      assertThat(a.steps()).isEqualTo(b.steps());
      assertThat(a.samples()).isEqualTo(b.samples());
      assertThat(a.validationAccuracy()).isCloseTo(b.validationAccuracy(), Offset.offset(0.05));
    }
    assertThat(resumed.history().epochs().get(1).validationAccuracy()).isGreaterThan(0.85);
    try (NDManager manager = NDManager.newBaseManager()) {
      Block b = resumed.newBlock(manager);
      float[] mean = b.getParameters().get("bn.running_mean").getArray().toFloatArray();
      float max = 0;
      for (float v : mean) {
        max = Math.max(max, Math.abs(v));
      }
      assertThat(max).as("the trained batch-norm statistics are in the model").isPositive();
    }
  }

  @Test
  void aGlobalBatchThatDoesNotDivideIsRefusedNamingTheOptions() {
    interrupted(2, 16, null);
    assertThatThrownBy(() -> checkpointed(3, 16, null).build().fitInProcess(1, new Configuration()))
        .isInstanceOf(NonRetryableTrainingException.class)
        .hasMessageContaining("written by 2 workers x batch 16 x 1 accumulated (global batch 32)")
        .hasMessageContaining("32 is not a multiple of 3")
        .hasMessageContaining("a worker count that divides 32 [1, 2, 4, 8, 16, 32]")
        .hasMessageContaining("--rescale lr");
  }

  @Test
  void rescaleLearningRateKeepsTheBatchAndScalesTheRate() throws Exception {
    interrupted(2, 16, null);
    TrainedModel resumed =
        checkpointed(3, 16, null)
            .optRescale(Rescale.LEARNING_RATE)
            .build()
            .fitInProcess(1, new Configuration());
    WorkerCountChange c = resumed.history().resumes().get(0).workers();
    assertThat(c).isEqualTo(new WorkerCountChange(2, 3, 16, 1, 1.5, false));
    // Epoch 0: 20 steps of 32 (640 records), then the other 797 in steps of 48; epoch 1: 1437 / 48.
    assertThat(resumed.history().epochs().get(0).steps()).isEqualTo(20 + 797 / 48);
    assertThat(resumed.history().epochs().get(0).samples()).isEqualTo(640 + 797 / 48 * 48);
    assertThat(resumed.history().epochs().get(1).steps()).isEqualTo(1437 / 48);
    assertThat(resumed.history().last().validationAccuracy()).isGreaterThan(0.8);
    assertThat(Rescale.parse("--rescale", "lr")).isEqualTo(Rescale.LEARNING_RATE);
    assertThatThrownBy(() -> Rescale.parse("--rescale", "epochs"))
        .hasMessage("Invalid --rescale 'epochs': expected batch or lr");
  }

  @Test
  void elasticRelaunchesOnTheLargestCountThatKeepsTheGlobalBatch() {
    BatchSourceFactory data = train.trainBatches(8, 5, true);
    // global batch 32: 4 planned workers of 8
    assertThat(elastic(data, 2, Rescale.GLOBAL_BATCH).workersFor(4)).isEqualTo(4);
    assertThat(elastic(data, 2, Rescale.GLOBAL_BATCH).workersFor(3))
        .as("3 does not divide 32")
        .isEqualTo(2);
    assertThat(elastic(data, 3, Rescale.GLOBAL_BATCH).workersFor(3))
        .as("none from 3 down to 3")
        .isZero();
    assertThat(elastic(data, 3, Rescale.LEARNING_RATE).workersFor(3)).isEqualTo(3);
    assertThatThrownBy(() -> job(2, 16, null).optMinWorkers(3).build())
        .hasMessageContaining("Invalid minWorkers 3: expected 1 to numWorkers (2)");
  }

  /** The elastic policy of a job planned on 4 workers over {@code data}. */
  private static ElasticPolicy elastic(BatchSourceFactory data, int minWorkers, Rescale rescale) {
    return new TrainingConfig(
            new TrainingConfig.Model(
                MlpSpec.of(64, 10, 16), LossSpec.SOFTMAX_CROSS_ENTROPY, null, Precision.FP32, 0),
            new TrainingConfig.Devices(false, 1, OptimizerPlacement.AUTO),
            new TrainingConfig.Data(data, null, 1, 1),
            new CommOptions(
                Duration.ofMinutes(1), Duration.ofMinutes(1), WirePrecision.FP32, null, false),
            new StepOptions(DistributedTrainer.DEFAULT_BUCKET_BYTES, true),
            new TrainingConfig.Checkpoints(null, 0, 1),
            new TrainingConfig.Elastic(4, minWorkers, 4, false, rescale))
        .elasticPolicy();
  }

  /**
   * The file pipeline with {@code options} over the training digits as 4 TFRecord files (written by
   * the first call of a test).
   */
  private DatasetSource onFiles(PipelineOptions options) throws IOException {
    Path dir = tmp.resolve("digits");
    if (!Files.isDirectory(dir)) {
      writeTFRecords(dir);
    }
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(dir.toString())
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    return DatasetSource.training(DatasetPlanner.plan(spec, options, new Configuration()), options);
  }

  private static void writeTFRecords(Path dir) throws IOException {
    Files.createDirectories(dir);
    int per = (train.size() + 3) / 4;
    for (int f = 0; f < 4; f++) {
      try (OutputStream os = Files.newOutputStream(dir.resolve("part-" + f + ".tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = f * per; i < Math.min(train.size(), (f + 1) * per); i++) {
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("pixels", Feature.ofFloats(train.features(i)));
          m.put("label", Feature.ofInt64(train.label(i)));
          w.write(Examples.encodeExample(m));
        }
      }
    }
  }

  /**
   * The file pipeline (its order per worker, not one global order) continues the interrupted epoch
   * too: the records the checkpoint's layout consumed are worked out again and the rest dealt to
   * the new workers, so the run takes as many optimizer steps on as many samples as an
   * uninterrupted one, and learns as well.
   */
  @ParameterizedTest(name = "{0} -> {2} workers, {4} sharding")
  @CsvSource({
    "2, 16, 1, 2, DATA",
    "1, 24, 3, 1, DATA",
    "3, 8, 2, 2, DATA",
    "2, 16, 1, 2, FILE",
    "3, 8, 2, 2, FILE"
  })
  void theFilePipelineContinuesTheEpochWithTheRecordsNotYetConsumed(
      int from, int batch, int to, int chosenK, String sharding) throws Exception {
    PipelineOptions options =
        PipelineOptions.builder()
            .optBatchSize(batch)
            .optShuffleBuffer(300)
            .optSharding(PipelineOptions.ShardingPolicy.valueOf(sharding))
            .optSeed(5)
            .build();
    BatchSourceFactory data = onFiles(options);
    TrainedModel reference = job(from, batch, data).build().fitInProcess(0, new Configuration());
    interrupted(from, batch, data);
    TrainedModel resumed =
        checkpointed(to, batch, data).build().fitInProcess(1, new Configuration());

    WorkerCountChange c = resumed.history().resumes().get(0).workers();
    assertThat(c.epochRestarted()).as("epoch restarted").isFalse();
    assertThat(c.accumulateSteps()).isEqualTo(chosenK);
    assertThat(c.globalBatch()).isEqualTo((long) from * batch);
    EpochMetrics a = resumed.history().epochs().get(0);
    EpochMetrics b = reference.history().epochs().get(0);
    if (sharding.equals("DATA")) {
      assertThat(a.steps()).as("steps of the resumed epoch").isEqualTo(b.steps());
      assertThat(a.loss()).as("loss of the resumed epoch").isCloseTo(b.loss(), Offset.offset(0.1));
      assertThat(a.samples()).as("samples of the resumed epoch").isEqualTo(b.samples());
      assertThat(resumed.history().last().samples())
          .as("samples of the next epoch")
          .isEqualTo(reference.history().last().samples());
    } else {
      // FILE: whole files' remainders per worker, so the padding (PAD repeats a worker's records
      // up to the most any worker has) differs from the uninterrupted layout's; every record is
      // still trained on, but for less than a global batch dropped.
      assertThat(a.samples()).as("samples of the resumed epoch").isGreaterThan(1437 - from * batch);
    }
    EpochMetrics last = resumed.history().last();
    assertThat(last.validationAccuracy())
        .isCloseTo(reference.history().last().validationAccuracy(), Offset.offset(0.05));
  }

  /**
   * Two resumes on other worker counts within one epoch (3 -> 2 -> 1): the second works out what
   * both earlier layouts consumed; the run still takes the uninterrupted run's steps and samples.
   */
  @Test
  void twoLayoutChangesWithinOneEpoch() throws Exception {
    PipelineOptions options =
        PipelineOptions.builder()
            .optBatchSize(8)
            .optShuffleBuffer(200)
            .optSharding(PipelineOptions.ShardingPolicy.DATA)
            .optSeed(9)
            .build();
    BatchSourceFactory data = onFiles(options);
    TrainedModel reference = job(3, 8, data).build().fitInProcess(0, new Configuration());
    interrupted(3, 8, data); // checkpoint at step 20
    DistributedTrainer second = checkpointed(2, 8, data).optInjectFailure(0, 35).build();
    assertThatThrownBy(() -> second.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class); // checkpoint at step 30, epoch 0 still
    TrainedModel resumed = checkpointed(1, 8, data).build().fitInProcess(1, new Configuration());
    assertThat(resumed.history().resumes()).hasSize(2);
    assertThat(resumed.history().resumes().get(1).stepInEpoch()).isEqualTo(30);
    assertThat(resumed.history().resumes().get(1).workers())
        .isEqualTo(new WorkerCountChange(2, 1, 8, 3, 1.0, false));
    for (int e = 0; e < 2; e++) {
      EpochMetrics a = resumed.history().epochs().get(e);
      EpochMetrics b = reference.history().epochs().get(e);
      assertThat(a.steps()).as("steps of epoch " + e).isEqualTo(b.steps());
      assertThat(a.samples()).as("samples of epoch " + e).isEqualTo(b.samples());
    }
  }

  /**
   * Options that shape the order changed between the checkpoint and the resume: the consumed
   * records cannot be worked out again, so the epoch restarts, naming both.
   */
  @Test
  void aChangedOrderRestartsTheEpochInsteadOfGuessing() throws Exception {
    PipelineOptions before =
        PipelineOptions.builder().optBatchSize(16).optShuffleBuffer(300).build();
    PipelineOptions after = before.toBuilder().optShuffleBuffer(100).build();
    interrupted(2, 16, onFiles(before));
    DatasetSource changed = onFiles(after);
    assertThat(changed.orderKey()).contains("shuffle 100").contains("AUTO sharding");
    // A file rewritten in place (same records, a new modification time) changes the key too.
    String key = changed.orderKey();
    Path first = tmp.resolve("digits").resolve("part-0.tfrecord");
    Files.setLastModifiedTime(
        first, FileTime.fromMillis(Files.getLastModifiedTime(first).toMillis() + 5000));
    assertThat(onFiles(after).orderKey()).isNotEqualTo(key);
    TrainedModel resumed =
        checkpointed(1, 16, changed).build().fitInProcess(1, new Configuration());
    assertThat(resumed.history().resumes().get(0).workers().epochRestarted()).isTrue();
    assertThat(resumed.history().epochs()).hasSize(2);
  }

  /**
   * The same worker count, but the order changed (here the shuffle buffer; added or rewritten
   * files, a re-staged DataFrame, other cycle or sharding options alike): the epoch restarts rather
   * than skip the new order's first batches (which would train some records twice and others never)
   * and record the new key for a plan it did not follow. Seen from the next resume: the checkpoint
   * it finds is 10 steps into the restarted epoch, not 30 into the old one.
   */
  @Test
  void aChangedOrderOnTheSameWorkerCountRestartsTheEpoch() throws Exception {
    PipelineOptions before =
        PipelineOptions.builder().optBatchSize(16).optShuffleBuffer(300).build();
    PipelineOptions after = before.toBuilder().optShuffleBuffer(100).build();
    interrupted(2, 16, onFiles(before)); // checkpoint at step 20, epoch 0
    DistributedTrainer second = checkpointed(2, 16, onFiles(after)).optInjectFailure(0, 35).build();
    assertThatThrownBy(() -> second.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class); // checkpoint at step 30
    TrainedModel resumed =
        checkpointed(2, 16, onFiles(after)).build().fitInProcess(1, new Configuration());
    assertThat(resumed.history().resumes()).hasSize(2);
    Resume first = resumed.history().resumes().get(0);
    assertThat(first.stepInEpoch()).isEqualTo(20);
    assertThat(first.workers()).isNull(); // the layout did not change
    Resume next = resumed.history().resumes().get(1);
    assertThat(next.step()).isEqualTo(30);
    assertThat(next.epoch()).isEqualTo(0);
    assertThat(next.stepInEpoch()).as("steps into the restarted epoch").isEqualTo(10);
    assertThat(resumed.history().epochs()).hasSize(2);
  }

  /** The same worker count and the same order: the epoch continues where it stopped. */
  @Test
  void anUnchangedOrderOnTheSameWorkerCountContinuesTheEpoch() throws Exception {
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(16).optShuffleBuffer(300).build();
    interrupted(2, 16, onFiles(options));
    DistributedTrainer second =
        checkpointed(2, 16, onFiles(options)).optInjectFailure(0, 35).build();
    assertThatThrownBy(() -> second.fitInProcess(0, new Configuration()))
        .isInstanceOf(InjectedFailure.class);
    TrainedModel resumed =
        checkpointed(2, 16, onFiles(options)).build().fitInProcess(1, new Configuration());
    assertThat(resumed.history().resumes().get(1).stepInEpoch()).isEqualTo(30);
  }

  /** The in-memory batches without their global order: as the file pipeline. */
  private static BatchSourceFactory withoutGlobalOrder(BatchSourceFactory f) {
    return new BatchSourceFactory() {
      private static final long serialVersionUID = 1L;

      @Override
      public BatchSource create(int rank, int numWorkers, NDManager manager) {
        return f.create(rank, numWorkers, manager);
      }

      @Override
      public int batchSize() {
        return f.batchSize();
      }

      @Override
      public BatchSourceFactory withBatchSize(int b) {
        return withoutGlobalOrder(f.withBatchSize(b));
      }
    };
  }

  /** Data with neither a global order nor a replayable one (as deterministic=false readers). */
  @Test
  void dataWithoutAGlobalOrderRestartsTheEpoch() throws Exception {
    BatchSourceFactory data = withoutGlobalOrder(train.trainBatches(16, 5, true));
    interrupted(2, 16, data);
    TrainedModel resumed = checkpointed(1, 16, data).build().fitInProcess(1, new Configuration());
    assertThat(resumed.history().resumes().get(0).workers())
        .isEqualTo(new WorkerCountChange(2, 1, 16, 2, 1.0, true));
    // The epoch ran whole again after the 20 steps kept: 44 more; its sums count the restarted
    // pass.
    assertThat(resumed.history().epochs().get(0).steps()).isEqualTo(44);
    assertThat(resumed.history().epochs().get(0).samples()).isEqualTo(44 * 32);
    assertThat(resumed.history().epochs()).hasSize(2);
  }
}
