package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Token sequences through the command line: {@code --features tokens:ids} with the sequence models
 * on 2 workers (padded and bucketed batches), the statistics pass's figures in the log and
 * metrics.json, and the bad inputs of sequence flags and data.
 */
class CliSequenceTest {
  private static SparkSession spark;
  @TempDir static Path tmp;
  private static long longerThan24;

  @BeforeAll
  static void start() throws IOException {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("cli-sequence-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    Random r = new Random(3);
    longerThan24 = write(tmp.resolve("train"), 1200, r);
    write(tmp.resolve("validation"), 300, r);
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  /**
   * Texts of 0..40 tokens (ids 3..49) of which, in all but empty ones, one of ids 0..2 — the
   * class's own word — appears; returns how many are longer than 24.
   */
  private static long write(Path dir, int n, Random r) throws IOException {
    Files.createDirectories(dir);
    long longer = 0;
    try (OutputStream os = Files.newOutputStream(dir.resolve("part-0.tfrecord"));
        TFRecordWriter w = new TFRecordWriter(os)) {
      for (int i = 0; i < n; i++) {
        int label = r.nextInt(3);
        int len = r.nextInt(10) == 0 ? 25 + r.nextInt(16) : 1 + r.nextInt(12);
        long[] tokens = new long[len];
        for (int j = 0; j < len; j++) {
          tokens[j] = 3 + r.nextInt(47);
        }
        tokens[r.nextInt(Math.min(len, 12))] = label; // within the first 12: never truncated away
        longer += len > 24 ? 1 : 0;
        Map<String, Feature> m = new LinkedHashMap<>();
        m.put("tokens", Feature.ofInt64(tokens));
        m.put("label", Feature.ofInt64(label));
        w.write(Examples.encodeExample(m));
      }
    }
    return longer;
  }

  private static String[] train(String out, String model, String... extra) {
    String[] base = {
      "train",
      "--data",
      tmp.resolve("train").toString(),
      "--validation-data",
      tmp.resolve("validation").toString(),
      "--features",
      "tokens:ids",
      "--label",
      "label",
      "--num-classes",
      "3",
      "--model",
      model,
      "--workers",
      "2",
      "--batch-size",
      "16",
      "--learning-rate",
      "0.01",
      "--progress",
      "log",
      "--output",
      tmp.resolve(out).toString()
    };
    String[] all = new String[base.length + extra.length];
    System.arraycopy(base, 0, all, 0, base.length);
    System.arraycopy(extra, 0, all, base.length, extra.length);
    return all;
  }

  @Test
  void anEmbeddingModelLearnsFromBucketedTokenSequencesOnTwoWorkers() throws IOException {
    CliRunner r =
        CliRunner.run(
            train(
                "embed",
                "embed:16",
                "--epochs",
                "4",
                "--max-length",
                "24",
                "--bucket-boundaries",
                "4,8,16"));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.err())
        .contains("Column 'tokens': ids 0..49, vocabulary size 50 (the largest id + 1)")
        .contains("max length 24 (" + longerThan24 + " sequences longer");
    JsonNode m = new ObjectMapper().readTree(tmp.resolve("embed/metrics.json").toFile());
    JsonNode col = m.get("sequence_columns").get("tokens");
    assertThat(col.get("truncated_sequences").asLong()).isEqualTo(longerThan24);
    assertThat(col.get("max_length").asLong()).isEqualTo(24);
    assertThat(col.get("vocab_size").asLong()).isEqualTo(50);
    assertThat(m.get("final").get("val_accuracy").asDouble()).isGreaterThan(0.9);

    // evaluate and predict pad their own batches (another batch size, no buckets): the same
    // numbers as the trainer's validation.
    CliRunner e =
        CliRunner.run(
            "evaluate",
            "--model",
            tmp.resolve("embed/model").toString(),
            "--data",
            tmp.resolve("validation").toString(),
            "--batch-size",
            "50");
    assertThat(e.code()).as(e.err()).isZero();
    JsonNode eval = new ObjectMapper().readTree(e.out());
    assertThat(eval.get("count").asLong()).isEqualTo(300);
    assertThat(eval.get("accuracy").asDouble())
        .isCloseTo(m.get("final").get("val_accuracy").asDouble(), within(1e-9));
    assertThat(eval.get("loss").asDouble())
        .isCloseTo(m.get("final").get("val_loss").asDouble(), within(1e-4));
    CliRunner pr =
        CliRunner.run(
            "predict",
            "--model",
            tmp.resolve("embed/model").toString(),
            "--data",
            tmp.resolve("validation").toString(),
            "--output",
            tmp.resolve("predictions").toString());
    assertThat(pr.code()).as(pr.err()).isZero();
    assertThat(spark.read().parquet(tmp.resolve("predictions").toString()).count()).isEqualTo(300);
  }

  @Test
  void aTransformerTrainsOnPaddedBatchesOfTheLongestInTheData() throws IOException {
    CliRunner r =
        CliRunner.run(
            train(
                "transformer",
                "transformer:layers=1,dim=16,heads=2",
                "--epochs",
                "2",
                "--vocab-size",
                "64"));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.err())
        .contains("vocabulary size 64 (--vocab-size)")
        .contains("longest 40; max length 40");
    JsonNode m = new ObjectMapper().readTree(tmp.resolve("transformer/metrics.json").toFile());
    assertThat(m.get("final").get("val_accuracy").asDouble()).isGreaterThan(0.5);
  }

  /**
   * A user's TorchScript module reads the ids column as two forward arguments, ids then mask
   * ({@code src/test/resources/torchscript/text_classifier.pt}: an embedding of 20 ids averaged
   * over the mask, a linear head): it learns, and predict, which pads its own batches, feeds it the
   * same: its accuracy is the trainer's validation accuracy. (Two workers with their own lengths:
   * TorchScriptSequenceTest; what the module must take: TorchScriptChecksTest.)
   */
  @Test
  void aTorchScriptModuleTakesTheIdsAndTheMask() throws IOException {
    Random r = new Random(11);
    for (String[] d : new String[][] {{"ts-train", "240"}, {"ts-validation", "60"}}) {
      Path dir = tmp.resolve(d[0]);
      Files.createDirectories(dir);
      try (OutputStream os = Files.newOutputStream(dir.resolve("part-0.tfrecord"));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = 0; i < Integer.parseInt(d[1]); i++) {
          int label = r.nextInt(3);
          long[] tokens = new long[1 + r.nextInt(12)];
          for (int j = 0; j < tokens.length; j++) {
            tokens[j] = 3 + r.nextInt(17); // ids 3..19 of the module's 20
          }
          tokens[r.nextInt(tokens.length)] = label;
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("tokens", Feature.ofInt64(tokens));
          m.put("label", Feature.ofInt64(label));
          w.write(Examples.encodeExample(m));
        }
      }
    }
    String module =
        Path.of("src/test/resources/torchscript/text_classifier.pt").toAbsolutePath().toString();
    String[] args = train("ts", "torchscript:" + module, "--epochs", "3");
    args[2] = tmp.resolve("ts-train").toString();
    args[4] = tmp.resolve("ts-validation").toString();
    args[java.util.Arrays.asList(args).indexOf("--workers") + 1] = "1";
    args[java.util.Arrays.asList(args).indexOf("--learning-rate") + 1] = "0.1";
    CliRunner t = CliRunner.run(args);
    assertThat(t.code()).as(t.err()).isZero();
    JsonNode m = new ObjectMapper().readTree(tmp.resolve("ts/metrics.json").toFile());
    assertThat(m.get("final").get("val_accuracy").asDouble()).isGreaterThan(0.8);
    CliRunner pr =
        CliRunner.run(
            "predict",
            "--model",
            tmp.resolve("ts/model").toString(),
            "--data",
            tmp.resolve("ts-validation").toString(),
            "--output",
            tmp.resolve("ts-predictions").toString());
    assertThat(pr.code()).as(pr.err()).isZero();
    var rows = spark.read().parquet(tmp.resolve("ts-predictions").toString()).collectAsList();
    assertThat(rows).hasSize(60);
    long right =
        rows.stream()
            .filter(
                row ->
                    row.<Double>getAs("prediction") == ((Number) row.getAs("label")).doubleValue())
            .count();
    // predict pads each of its batches to another length than validation's: the masked sums may
    // round differently, which can only matter for an example whose two top logits all but tie.
    assertThat(right / 60.0)
        .isCloseTo(m.get("final").get("val_accuracy").asDouble(), within(1 / 60.0 + 1e-9));
  }

  @Test
  void badSequenceInputIsNamed() {
    CliRunner small = CliRunner.run(train("small", "embed:8", "--vocab-size", "10"));
    assertThat(small.code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(small.error())
        .isEqualTo(
            "error: Feature column 'tokens' in "
                + tmp.resolve("train")
                + " holds ids 0..49: outside the vocabulary 0..9 (--vocab-size)");
    CliRunner buckets = CliRunner.run(train("buckets", "embed:8", "--bucket-boundaries", "8,4"));
    assertThat(buckets.error())
        .isEqualTo(
            "error: Invalid --bucket-boundaries '8,4': expected strictly increasing positive"
                + " lengths, e.g. 16,32,64,128");
    String[] noSequence = train("none", "mlp:8", "--max-length", "8");
    noSequence[6] = "tokens";
    assertThat(CliRunner.run(noSequence).error())
        .isEqualTo(
            "error: Invalid --max-length: it applies to sequence columns, and --features names"
                + " none (COL:ids or COL:seq)");
  }

  @Test
  void predictCutsRawTextWithTheVocabularyTheModelKept() throws IOException {
    String[] filler = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"};
    String[] words = {"Cat", "dog", "bird"};
    Random r = new Random(5);
    StringBuilder csv = new StringBuilder("text,label\n");
    for (int i = 0; i < 400; i++) {
      int label = r.nextInt(3);
      StringBuilder t = new StringBuilder();
      int len = 2 + r.nextInt(8);
      int at = r.nextInt(len);
      for (int j = 0; j < len; j++) {
        t.append(j == at ? words[label] : filler[r.nextInt(filler.length)]).append(' ');
      }
      csv.append(t.toString().trim()).append(',').append(label).append('\n');
    }
    Path raw = tmp.resolve("raw.csv");
    Files.writeString(raw, csv.toString());
    CliRunner c =
        CliRunner.run(
            "convert",
            "--input",
            raw.toString(),
            "--header",
            "--label",
            "label",
            "--tokenize",
            "text",
            "--lowercase",
            "--test-fraction",
            "0.2",
            "--output",
            tmp.resolve("text-ids").toString());
    assertThat(c.code()).as(c.err()).isZero();
    assertThat(tmp.resolve("text-ids/tokenizer.properties")).exists();
    CliRunner t =
        CliRunner.run(
            "train",
            "--data",
            tmp.resolve("text-ids/train").toString(),
            "--features",
            "text:ids",
            "--label",
            "label",
            "--num-classes",
            "3",
            "--model",
            "embed:8",
            "--workers",
            "1",
            "--epochs",
            "3",
            "--learning-rate",
            "0.05",
            "--progress",
            "none",
            "--output",
            tmp.resolve("text-run").toString());
    assertThat(t.code()).as(t.err()).isZero();
    assertThat(tmp.resolve("text-run/model/vocab.txt")).exists();
    assertThat(tmp.resolve("text-run/model/tokenizer.properties")).exists();
    // Raw text, upper case words and all: cut and looked up as convert did.
    Path texts = tmp.resolve("texts.csv");
    Files.writeString(texts, "text,label\nA CAT here,0\nthe Dog,1\nbird bird alpha,2\n");
    CliRunner p =
        CliRunner.run(
            "predict",
            "--model",
            tmp.resolve("text-run/model").toString(),
            "--data",
            texts.toString(),
            "--format",
            "csv",
            "--output",
            tmp.resolve("text-preds").toString());
    assertThat(p.code()).as(p.err()).isZero();
    var rows =
        spark.read().parquet(tmp.resolve("text-preds").toString()).orderBy("label").collectAsList();
    assertThat(rows).hasSize(3);
    for (var row : rows) {
      assertThat(row.<Double>getAs("prediction")).isEqualTo(row.<Integer>getAs("label") * 1.0);
    }
    CliRunner e =
        CliRunner.run(
            "evaluate",
            "--model",
            tmp.resolve("text-run/model").toString(),
            "--data",
            raw.toString(),
            "--format",
            "csv");
    assertThat(e.code()).as(e.err()).isZero();
    assertThat(new ObjectMapper().readTree(e.out()).get("accuracy").asDouble()).isGreaterThan(0.9);
  }
}
