package dev.sparktrainer.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.FeatureStatistics;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.TestData;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Iterator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The input pipeline's host batches as device batches. */
class PipelineSourceTest {
  @TempDir Path dir;

  private static PipelineOptions.Builder opts() {
    return PipelineOptions.builder()
        .optBatchSize(8)
        .optShuffleBuffer(50)
        .optCycleLength(3)
        .optMemoryBudgetBytes(8 << 20);
  }

  @Test
  void batchesBecomeNdArraysOfTheSpecsShapes() throws IOException {
    TestData.writeTFRecords(dir.resolve("d"), 6, 0, TFRecordCompression.GZIP, 20);
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(dir.resolve("d").toString())
            .addFeature("x", 2, 3)
            .setLabel("label", DatasetSpec.LabelType.FLOAT)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(spec, opts().build(), TestData.CONF);
    try (NDManager m = NDManager.newBaseManager();
        PipelineSource p =
            PipelineSource.create(
                plan, opts().optBatchSize(5).build(), null, 0, 1, m, TestData.CONF)) {
      Iterator<Batch> it = p.epoch(0, 0);
      int n = 0;
      while (it.hasNext()) {
        try (Batch b = it.next()) {
          assertThat(b.features().get(0).getShape().getShape()).containsExactly(5, 2, 3);
          assertThat(b.features().get(0).getDataType()).isEqualTo(DataType.FLOAT32);
          assertThat(b.labels().getDataType()).isEqualTo(DataType.FLOAT32);
          float id = b.features().get(0).get(0, 0, 0).getFloat();
          assertThat(b.labels().getFloat(0)).isEqualTo(id % 10);
          n++;
        }
      }
      assertThat(n).isEqualTo(4);
      assertThat(p.stats().batches()).isEqualTo(4);
    }
  }

  @Test
  void aNormalizationOfOtherFeaturesIsAClearError() throws IOException {
    TestData.writeTFRecords(dir.resolve("d"), 4, 0, TFRecordCompression.NONE, 20);
    DatasetSpec spec = TestData.spec(dir.resolve("d"), 4);
    DatasetPlan plan = DatasetPlanner.plan(spec, opts().build(), TestData.CONF);
    FeatureStatistics three = new FeatureStatistics(java.util.List.of("x"), new int[] {3});
    three.add(new float[] {1, 2, 3}, 0);
    Normalization n = Normalization.of(Normalization.Mode.STANDARD, three);
    try (NDManager m = NDManager.newBaseManager()) {
      assertThatThrownBy(
              () -> PipelineSource.create(plan, opts().build(), n, 0, 1, m, TestData.CONF))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith(
              "The normalization was fitted on 3 feature values per example, the data has 4");
    }
  }
}
