package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import dev.sparktrainer.data.FeatureStatistics;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.History;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model's normalization saved and loaded with it (and models without one still load); the
 * regression metrics' formulas, and their round trip through a checkpoint's metadata.
 */
class RegressionAndNormalizedModelTest {
  @TempDir Path tmp;

  private static Normalization normalization() {
    FeatureStatistics st = new FeatureStatistics(List.of("x"), new int[] {8});
    float[] row = new float[8];
    for (int i = 0; i < 50; i++) {
      for (int j = 0; j < 8; j++) {
        row[j] = j == 7 ? 3 : (float) ((i % 7) * Math.pow(10, j - 3));
      }
      st.add(row, 0);
    }
    return Normalization.of(Normalization.Mode.MINMAX, st);
  }

  @Test
  void theNormalizationIsSavedWithTheModelAndOlderModelsStillLoad() throws IOException {
    Configuration conf = new Configuration();
    TrainedModel plain = TestModels.random(MlpSpec.of(8, 3, 4), LossSpec.SOFTMAX_CROSS_ENTROPY, 1);
    TrainedModel normalized =
        new TrainedModel(
            plain.spec(),
            plain.loss(),
            plain.parameterBytes(),
            new History(List.of()),
            normalization());
    String dir = tmp.resolve("model").toString();
    normalized.save(dir, conf);
    TrainedModel back = TrainedModel.load(dir, conf);
    assertThat(back.normalization().mode()).isEqualTo(Normalization.Mode.MINMAX);
    for (int j = 0; j < 8; j++) {
      assertThat(back.normalization().apply(j, 0.5f))
          .isEqualTo(normalized.normalization().apply(j, 0.5f));
    }
    assertThat(back.normalization().apply(7, 3f)).isZero(); // the constant feature

    // A model saved without normalization (as every model before it) loads without one, and
    // re-saving over the normalized one leaves no stale normalization.csv behind.
    plain.save(dir, conf);
    assertThat(tmp.resolve("model/normalization.csv")).doesNotExist();
    assertThat(TrainedModel.load(dir, conf).normalization()).isNull();

    // The properties say normalized but the table is not listed: an incomplete model, named.
    String other = tmp.resolve("other").toString();
    plain.save(other, conf, Map.of());
    Path props = tmp.resolve("other/model.properties");
    Files.writeString(props, Files.readString(props) + "normalize=standard\n");
    Map<String, byte[]> files = new LinkedHashMap<>();
    for (String f : List.of("model.properties", "model.params", "history.json")) {
      files.put(f, Files.readAllBytes(tmp.resolve("other/" + f)));
    }
    Files.write(tmp.resolve("other/" + TrainedModel.MARKER), ModelMarker.encode(files));
    try (var crcs =
        Files.list(tmp.resolve("other"))) { // Hadoop's side checksums of the files edited here
      for (Path c : crcs.filter(f -> f.getFileName().toString().endsWith(".crc")).toList()) {
        Files.delete(c);
      }
    }
    assertThatThrownBy(() -> TrainedModel.load(other, conf))
        .isInstanceOf(IOException.class)
        .hasMessageContaining(
            "trained with standard normalization but its _COMPLETE does not list normalization.csv");
  }

  @Test
  void mseMaeAndR2FromTheSums() {
    float[] y = {1, 2, 3, 4};
    float[] p = {1.5f, 2, 2, 4};
    double[] sums = new double[3 + EpochMetrics.Regression.SUMS];
    EpochMetrics.Regression.addSums(y, p, sums, 3);
    double[] m = EpochMetrics.Regression.of(sums, 3, 4);
    assertThat(m[0]).isCloseTo((0.25 + 1) / 4, within(1e-12));
    assertThat(m[1]).isCloseTo(1.5 / 4, within(1e-12));
    assertThat(m[2]).isCloseTo(1 - 1.25 / 5.0, within(1e-12)); // SST of 1..4 is 5
    assertThat(EpochMetrics.Regression.of(sums, 3, 0)).containsOnly(Double.NaN);
    double[] constant = new double[7];
    EpochMetrics.Regression.addSums(new float[] {2, 2}, new float[] {1, 3}, constant, 3);
    assertThat(EpochMetrics.Regression.of(constant, 3, 2)[2])
        .isNaN(); // R² undefined: every label the same
  }
}
