package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.PipelineOptions.ImageTransfer;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.PipelineSource;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.train.input.DatasetSource;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.step.FlatStepTest;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.StepLedger;
import dev.sparktrainer.train.step.TrainStep;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Training end to end on the digits as PNG images, with the built-in augmentation: image transfer
 * uint8 (bytes to the device, crop and normalization there) learns as float32 does (all on the
 * host).
 */
class ImageTransferTrainingTest {
  @TempDir static Path data;

  @BeforeAll
  static void write() throws IOException {
    InMemoryDataset digits = Digits.load().shuffled(7);
    write(digits, 0, 1437, data.resolve("train"), 2);
    write(digits, 1437, digits.size(), data.resolve("test"), 1);
  }

  private static void write(InMemoryDataset d, int from, int to, Path dir, int files)
      throws IOException {
    Files.createDirectories(dir);
    int per = (to - from + files - 1) / files;
    for (int f = 0; f < files; f++) {
      try (OutputStream os = Files.newOutputStream(dir.resolve("part-" + f + ".tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = from + f * per; i < Math.min(to, from + (f + 1) * per); i++) {
          float[] px = d.features(i);
          BufferedImage img = new BufferedImage(8, 8, BufferedImage.TYPE_BYTE_GRAY);
          for (int p = 0; p < 64; p++) {
            img.getRaster().setSample(p % 8, p / 8, 0, Math.round(px[p] * 255));
          }
          ByteArrayOutputStream png = new ByteArrayOutputStream();
          ImageIO.write(img, "png", png);
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("image", Feature.ofBytes(png.toByteArray()));
          m.put("label", Feature.ofInt64(d.label(i)));
          w.write(Examples.encodeExample(m));
        }
      }
    }
  }

  private static DatasetSpec spec(String dir) {
    return DatasetSpec.builder()
        .addPath(data.resolve(dir).toString())
        .addImageFeature("image", 8, 8, 1)
        .setLabel("label", DatasetSpec.LabelType.INT)
        .build();
  }

  private static EpochMetrics train(ImageTransfer transfer) throws Exception {
    Configuration conf = new Configuration();
    ImageAugment augment = ImageAugment.parse("crop:1,normalize:0.3/0.4", ImageAugment.Layout.HWC);
    PipelineOptions train =
        PipelineOptions.builder()
            .optBatchSize(32)
            .optShuffleBuffer(500)
            .optSeed(5)
            .optImageTransfer(transfer)
            .optTransform(augment.training())
            .build();
    PipelineOptions validation = train.toBuilder().optTransform(augment.inference()).build();
    TrainedModel model =
        DistributedTrainer.builder()
            .setModel(MlpSpec.of(64, 10, 64))
            .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
            .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
            .setNumWorkers(1)
            .optEpochs(8)
            .optSeed(3)
            .optRingHost("127.0.0.1")
            .setTrainingData(
                DatasetSource.training(DatasetPlanner.plan(spec("train"), train, conf), train))
            .optValidationData(
                DatasetSource.evaluation(
                    DatasetPlanner.plan(spec("test"), validation, conf), validation))
            .build()
            .fitInProcess(0, conf);
    return model.history().last();
  }

  @Test
  void uint8LearnsAsFloat32Does() throws Exception {
    EpochMetrics host = train(ImageTransfer.FLOAT32);
    EpochMetrics device = train(ImageTransfer.UINT8);
    System.out.printf(
        "digits as PNG, crop:1,normalize: validation accuracy float32 %.4f, uint8 %.4f%n",
        host.validationAccuracy(), device.validationAccuracy());
    assertThat(host.validationAccuracy()).isGreaterThanOrEqualTo(0.85);
    assertThat(device.validationAccuracy()).isGreaterThanOrEqualTo(0.85);
    // The same tensors reach the model (DeviceImagesTest): only CPU kernels' own
    // nondeterminism could tell the runs apart.
    assertThat(Math.abs(device.validationAccuracy() - host.validationAccuracy()))
        .isLessThanOrEqualTo(
            0.02); // images/s (one image column: the samples/s) and decode time per image, in the
    // metrics
    for (EpochMetrics m : List.of(host, device)) {
      assertThat(m.images()).isNotNull();
      assertThat(m.imagesPerSecond()).isPositive().isEqualTo(m.samplesPerSecond());
      assertThat(m.decodeMillisPerImage()).isPositive().isFinite();
      assertThat(m.toJson()).contains("\"images_per_s\":", "\"decode_ms_per_image\":");
    }
  }

  /** Bytes to the device per step, as the step's ledger counts them, for batches of 32. */
  private static double bytesPerStep(ImageTransfer transfer) throws Exception {
    Configuration conf = new Configuration();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(32)
            .optShuffleBuffer(100)
            .optImageTransfer(transfer)
            .optTransform(
                ImageAugment.parse("crop:1,normalize:0.3/0.4", ImageAugment.Layout.HWC).training())
            .build();
    try (ReplicaSet replicas = new ReplicaSet(MlpSpec.of(64, 10, 16), List.of(Device.cpu()), 7);
        TrainStep step =
            FlatStepTest.newStep(
                replicas,
                null,
                OptimizerSpec.adam().build(),
                OptimizerPlacement.DEVICE,
                1 << 20,
                true,
                true);
        PipelineSource in =
            PipelineSource.create(
                DatasetPlanner.plan(spec("train"), o, conf),
                o,
                null,
                0,
                1,
                replicas.manager(),
                conf)) {
      assertThat(in.images().active()).isEqualTo(transfer == ImageTransfer.UINT8);
      Iterator<Batch> it = in.epoch(0, 0);
      double[] acc = new double[3];
      for (int s = 0; s < 3; s++) {
        try (Batch b = it.next()) {
          step.run(b, 1000 + s, 1e-3f, acc);
        }
      }
      StepLedger.Totals l = step.ledger().snapshot();
      return l.perStep(l.bytesToDevice());
    }
  }

  @Test
  void theLedgerCountsOneBytePerPixel() throws Exception {
    // one worker on the device placement: the batch is all that crosses
    assertThat(bytesPerStep(ImageTransfer.UINT8)).isEqualTo(32 * 64 + 32 * 8.0);
    assertThat(bytesPerStep(ImageTransfer.FLOAT32)).isEqualTo(4 * 32 * 64 + 32 * 8.0);
  }
}
