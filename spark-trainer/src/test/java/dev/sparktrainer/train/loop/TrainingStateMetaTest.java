package dev.sparktrainer.train.loop;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.Resume;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The training state's metadata as checkpoints carry it: resumes and metrics round-trip. */
class TrainingStateMetaTest {
  @Test
  void resumesWithTheirSkippedCheckpointsRoundTripThroughTheMetadataAndJson() throws Exception {
    TrainingState st = new TrainingState();
    st.names.add("w");
    st.values.add(new float[3]);
    List<SkippedCheckpoint> skipped =
        List.of(
            new SkippedCheckpoint("hdfs://nn/ckpt/ckpt-2.bin", "corrupt: \"x\"\n"),
            new SkippedCheckpoint(
                "hdfs://nn/ckpt/ckpt-1.bin", "deleted since the directory was listed"));
    st.resumes.add(new Resume(0, 0, 0, 1, "hdfs://nn/ckpt", skipped));
    st.resumes.add(new Resume(7, 1, 2, 0, "hdfs://nn/ckpt"));
    byte[] meta = st.encodeMeta();
    assertThat(TrainingState.decodeMeta(meta).resumes).isEqualTo(st.resumes);

    // A state written before skipped checkpoints were recorded ("TST3": no count after each
    // resume).
    TrainingState old = new TrainingState();
    old.names.add("w");
    old.values.add(new float[3]);
    old.resumes.add(new Resume(7, 1, 2, 0, "hdfs://nn/ckpt"));
    byte[] v4 = old.encodeMeta();
    // Without the optional regression section (tag, 4 sums; no history), then without the count.
    byte[] v3 = Arrays.copyOf(v4, v4.length - 4 - 4 * 8 - 4);
    v3[3] = '3';
    assertThat(TrainingState.decodeMeta(v3).resumes).isEqualTo(old.resumes);

    JsonNode json = new ObjectMapper().readTree(st.resumes.get(0).toJson());
    assertThat(json.get("from_scratch").asBoolean()).isTrue();
    assertThat(json.get("stage_attempt").asInt()).isEqualTo(1);
    assertThat(json.get("skipped")).hasSize(2);
    assertThat(json.get("skipped").get(0).get("file").asText())
        .isEqualTo("hdfs://nn/ckpt/ckpt-2.bin");
    assertThat(json.get("skipped").get(0).get("reason").asText()).isEqualTo("corrupt: \"x\"\n");
    JsonNode plain = new ObjectMapper().readTree(st.resumes.get(1).toJson());
    assertThat(plain.get("from_scratch").asBoolean()).isFalse();
    assertThat(plain.get("skipped")).isEmpty();
    assertThat(plain.get("step").asLong()).isEqualTo(7);
  }

  @Test
  void regressionSumsAndMetricsSurviveACheckpoint() throws IOException {
    TrainingState st = new TrainingState();
    st.names.add("w");
    st.values.add(new float[3]);
    st.partial = new double[] {1, 2, 3, 4, 5, 6, 7};
    EpochMetrics.Regression r = new EpochMetrics.Regression(0.5, 0.4, 0.9, 0.6, 0.5, Double.NaN);
    st.history.add(
        new EpochMetrics(
            0, 10, 320, 0.25, Double.NaN, 0.3, Double.NaN, 1, 320, 0, 0, 0, 0, 0, 0, "h0", r));
    st.history.add(
        new EpochMetrics(1, 10, 320, 0.25, 0.9, 0.3, 0.8, 1, 320, 0, 0, 0, 0, 0, 0, "h1"));
    TrainingState back = TrainingState.decodeMeta(st.encodeMeta());
    assertThat(back.partial).containsExactly(1, 2, 3, 4, 5, 6, 7);
    assertThat(back.history).isEqualTo(st.history);
    assertThat(back.history.get(0).toJson())
        .contains(
            "\"mse\":0.5,\"mae\":0.4,\"r2\":0.9,\"validation_mse\":0.6", "\"validation_r2\":null}");
    assertThat(back.history.get(1).regression()).isNull();
  }
}
