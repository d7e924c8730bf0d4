package dev.sparktrainer.cli;

import static org.apache.spark.sql.functions.coalesce;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.element_at;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.map_from_arrays;
import static org.apache.spark.sql.functions.transform;
import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.data.text.Tokenizer;
import dev.sparktrainer.data.text.Vocabulary;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.ml.feature.CountVectorizer;
import org.apache.spark.ml.feature.CountVectorizerModel;
import org.apache.spark.ml.feature.RegexTokenizer;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code convert --tokenize} end to end on a local Spark (the session of this class, which the CLI
 * reuses): the token ids in the TFRecord output (read back with the tfrecord DataSource), the
 * vocabulary counted on the training split only, and the errors of bad input.
 */
class ConvertTokenizeTest {
  private static SparkSession spark;
  @TempDir static Path tmp;
  private static Path sentences;

  @BeforeAll
  static void start() throws IOException {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("convert-tokenize-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    sentences = tmp.resolve("sentences.csv");
    try (InputStream in = ConvertTokenizeTest.class.getResourceAsStream("/text/sentences.csv")) {
      Files.copy(in, sentences);
    }
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  private static CliRunner ok(String... args) {
    CliRunner r = CliRunner.run(args);
    assertThat(r.code()).as(r.err()).isZero();
    return r;
  }

  /** row (the float feature holding the input's row number) → token ids, of one output split. */
  private static Map<Integer, List<Long>> idsByRow(Path dir) {
    Map<Integer, List<Long>> out = new TreeMap<>();
    for (Row r :
        spark
            .read()
            .format("tfrecord")
            .schema("features array<float>, text array<bigint>, label bigint")
            .load(dir.toString())
            .collectAsList()) {
      int row = (int) (float) r.<Float>getList(0).get(0);
      assertThat(out.put(row, r.getList(1))).as("row %d twice", row).isNull();
    }
    return out;
  }

  private static List<Long> boxed(long[] ids) {
    List<Long> out = new ArrayList<>();
    for (long id : ids) {
      out.add(id);
    }
    return out;
  }

  @Test
  void idsByHandWithoutASplit() throws IOException {
    Path csv = tmp.resolve("tiny.csv");
    Files.writeString(
        csv,
        "row,text,label\n"
            + "0,\"b a, a!\",0\n"
            + "1,\"C a B\",1\n"
            + "2,\"\",0\n"
            + "3,\"Don't STOP\",1\n",
        StandardCharsets.UTF_8);
    Path out = tmp.resolve("tiny");
    CliRunner r =
        ok(
            "convert",
            "--input",
            csv.toString(),
            "--header",
            "--label",
            "label",
            "--features",
            "row",
            "--tokenize",
            "text",
            "--lowercase",
            "--vocab-size",
            "5",
            "--shards",
            "2",
            "--output",
            out.toString());
    // counts a 3, b 2, then c, don't, stop once each: the tie goes to c (code point order)
    assertThat(Files.readString(out.resolve("vocab.txt"), StandardCharsets.UTF_8))
        .isEqualTo("<pad>\n<unk>\na\nb\nc\n");
    assertThat(idsByRow(out.resolve("train")))
        .containsExactly(
            Map.entry(0, List.of(3L, 2L, 2L)),
            Map.entry(1, List.of(4L, 2L, 3L)),
            Map.entry(2, List.of()),
            Map.entry(3, List.of(1L, 1L)));
    assertThat(r.out())
        .contains(
            "Vocabulary: 5 entries (<pad>, <unk> and the 3 most frequent of 5 distinct tokens in 8"
                + " tokens of the training split, lower-cased) in ",
            "Wrote 4 records to "
                + out.resolve("train")
                + " (2 shards): features array<float>,"
                + " text array<bigint>, label bigint",
            "Tokens: 8 (25.00% unknown)");
    // without a schema, the data source infers the list of int64 (Int64List) as array<bigint>
    assertThat(
            spark
                .read()
                .format("tfrecord")
                .load(out.resolve("train").toString())
                .schema()
                .apply("text")
                .dataType())
        .isEqualTo(DataTypes.createArrayType(DataTypes.LongType));
    try (Stream<Path> s = Files.list(out)) {
      assertThat(s.map(p -> p.getFileName().toString()).filter(n -> !n.startsWith(".")).sorted())
          .containsExactly("tokenizer.properties", "train", "vocab.txt");
    }
  }

  @Test
  void vocabularyFromTheTrainingSplitOnlyAppliedToBoth() throws IOException {
    Map<Integer, String> texts = new HashMap<>();
    Pattern line = Pattern.compile("^(\\d+),\"(.*)\",\\d$");
    for (String l : Files.readAllLines(sentences, StandardCharsets.UTF_8)) {
      Matcher m = line.matcher(l);
      if (m.matches()) {
        texts.put(Integer.parseInt(m.group(1)), m.group(2));
      }
    }
    assertThat(texts).hasSize(30);
    Path out = tmp.resolve("split");
    CliRunner r =
        ok(
            "convert",
            "--input",
            sentences.toString(),
            "--header",
            "--label",
            "label",
            "--features",
            "row",
            "--tokenize",
            "text",
            "--lowercase",
            "--test-fraction",
            "0.3",
            "--seed",
            "7",
            "--shards",
            "2",
            "--output",
            out.toString());
    Map<Integer, List<Long>> train = idsByRow(out.resolve("train"));
    Map<Integer, List<Long>> test = idsByRow(out.resolve("test"));
    assertThat(train).isNotEmpty();
    assertThat(test).isNotEmpty();
    Set<Integer> all = new HashSet<>(train.keySet());
    all.addAll(test.keySet());
    assertThat(all).hasSize(30).isEqualTo(texts.keySet());
    assertThat(train.keySet()).doesNotContainAnyElementsOf(test.keySet());

    // The expected vocabulary, counted here from the training rows' texts.
    Tokenizer tok = new Tokenizer(true);
    Map<String, Long> counts = new HashMap<>();
    for (int row : train.keySet()) {
      tok.forEach(texts.get(row), t -> counts.merge(t, 1L, Long::sum));
    }
    Vocabulary expected = Vocabulary.of(counts, 20000);
    Vocabulary written =
        Vocabulary.read(Files.newInputStream(out.resolve("vocab.txt")), "vocab.txt");
    assertThat(written).isEqualTo(expected);
    long testTokens = 0;
    long testUnknown = 0;
    Set<String> testOnly = new HashSet<>();
    for (var e : test.entrySet()) {
      List<String> tokens = tok.tokens(texts.get(e.getKey()));
      assertThat(e.getValue()).as("row %d", e.getKey()).isEqualTo(boxed(expected.ids(tokens)));
      for (int i = 0; i < tokens.size(); i++) {
        if (!counts.containsKey(tokens.get(i))) {
          testOnly.add(tokens.get(i));
          assertThat(e.getValue().get(i)).isEqualTo(Vocabulary.UNK_ID);
        }
      }
      testTokens += tokens.size();
      testUnknown += e.getValue().stream().filter(id -> id == Vocabulary.UNK_ID).count();
    }
    for (var e : train.entrySet()) {
      assertThat(e.getValue())
          .as("row %d", e.getKey())
          .isEqualTo(boxed(expected.ids(texts.get(e.getKey()), tok)))
          .doesNotContain((long) Vocabulary.UNK_ID);
    }
    // Words seen only in the held-out rows exist, and the vocabulary does not hold them.
    assertThat(testOnly).isNotEmpty();
    assertThat(written.tokens()).doesNotContainAnyElementsOf(testOnly);
    long trainTokens = counts.values().stream().mapToLong(Long::longValue).sum();
    assertThat(r.out())
        .contains(
            "Vocabulary: "
                + expected.size()
                + " entries (<pad>, <unk> and all "
                + counts.size()
                + " distinct tokens in "
                + trainTokens
                + " tokens of the training split, lower-cased) in "
                + out.resolve("vocab.txt"),
            "Wrote "
                + train.size()
                + " records to "
                + out.resolve("train")
                + " (2 shards) and "
                + test.size()
                + " to "
                + out.resolve("test"),
            String.format(
                Locale.ROOT,
                "Tokens: train %d (0.00%% unknown), test %d (%.2f%% unknown)",
                trainTokens,
                testTokens,
                100.0 * testUnknown / testTokens));
  }

  @Test
  void badInputIsNamed() {
    String in = sentences.toString();
    assertThat(
            CliRunner.run(
                    "convert",
                    "--input",
                    in,
                    "--header",
                    "--tokenize",
                    "body",
                    "--output",
                    tmp.resolve("bad1").toString())
                .error())
        .isEqualTo(
            "error: No --tokenize column 'body' in " + in + ": its columns are row, text, label");
    assertThat(
            CliRunner.run(
                    "convert",
                    "--input",
                    in,
                    "--header",
                    "--tokenize",
                    "label",
                    "--output",
                    tmp.resolve("bad2").toString())
                .error())
        .isEqualTo(
            "error: The --tokenize column 'label' in "
                + in
                + " has type int: expected text (string)");
    CliRunner small =
        CliRunner.run(
            "convert",
            "--input",
            in,
            "--tokenize",
            "text",
            "--vocab-size",
            "2",
            "--output",
            tmp.resolve("bad3").toString());
    assertThat(small.code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(small.error())
        .isEqualTo(
            "error: Invalid --vocab-size 2: expected at least 3 (<pad>, <unk> and one token)");
    assertThat(
            CliRunner.run(
                    "convert",
                    "--input",
                    in,
                    "--lowercase",
                    "--output",
                    tmp.resolve("bad4").toString())
                .error())
        .isEqualTo("error: Invalid --lowercase: it applies to --tokenize COL, which is not given");
    assertThat(
            CliRunner.run(
                    "convert",
                    "--input",
                    in,
                    "--header",
                    "--tokenize",
                    "text",
                    "--features",
                    "row,text",
                    "--output",
                    tmp.resolve("bad5").toString())
                .error())
        .isEqualTo(
            "error: Column 'text' is both in --features and the --tokenize column: leave it out of"
                + " --features");
    assertThat(
            CliRunner.run(
                    "convert",
                    "--input",
                    in,
                    "--header",
                    "--tokenize",
                    "text",
                    "--label",
                    "label",
                    "--label-column",
                    "text",
                    "--output",
                    tmp.resolve("bad6").toString())
                .error())
        .isEqualTo(
            "error: The --tokenize column 'text' keeps its name in the output, which is also the"
                + " --label-column's: choose another --label-column");
    assertThat(tmp.resolve("bad1")).doesNotExist();
    assertThat(tmp.resolve("bad6")).doesNotExist();
  }

  /**
   * The recipe of docs/cli.md for users with their own tokenization (Spark ML's RegexTokenizer and
   * CountVectorizer, ids shifted past {@code <pad>} and {@code <unk>}) gives an array<bigint>
   * column that the tfrecord DataSource writes as an Int64List.
   */
  @Test
  void sparkMlRecipeWritesInt64Lists() {
    Dataset<Row> in =
        spark.createDataFrame(
            List.of(
                RowFactory.create("b a a", 0),
                RowFactory.create("c a b", 1),
                RowFactory.create("", 0)),
            new StructType().add("text", DataTypes.StringType).add("label", DataTypes.IntegerType));
    Dataset<Row> tokens =
        new RegexTokenizer()
            .setInputCol("text")
            .setOutputCol("tokens")
            .setPattern("[\\p{L}\\p{N}\\p{M}']+")
            .setGaps(false)
            .transform(in);
    CountVectorizerModel cv =
        new CountVectorizer().setInputCol("tokens").setVocabSize(19998).fit(tokens);
    String[] vocab = cv.vocabulary();
    long[] ids = new long[vocab.length];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = i + 2; // 0 = <pad>, 1 = <unk>
    }
    Column lookup = map_from_arrays(lit(vocab), lit(ids));
    Path out = tmp.resolve("recipe");
    tokens
        .select(
            transform(col("tokens"), t -> coalesce(element_at(lookup, t), lit(1L))).as("text"),
            col("label").cast("long").as("label"))
        .write()
        .format("tfrecord")
        .save(out.toString());
    Dataset<Row> back = spark.read().format("tfrecord").load(out.toString());
    assertThat(back.schema().apply("text").dataType())
        .isEqualTo(DataTypes.createArrayType(DataTypes.LongType));
    assertThat(vocab).containsExactly("a", "b", "c"); // by count; here no ties
    Map<Long, List<Long>> byLabel = new TreeMap<>();
    for (Row r : back.collectAsList()) {
      if (!r.<Long>getList(r.fieldIndex("text")).isEmpty()) {
        byLabel.put(r.getLong(r.fieldIndex("label")), r.getList(r.fieldIndex("text")));
      }
    }
    assertThat(byLabel)
        .containsExactly(Map.entry(0L, List.of(3L, 2L, 2L)), Map.entry(1L, List.of(4L, 2L, 3L)));
    // a token the vocabulary lacks becomes <unk>
    assertThat(
            spark
                .range(1)
                .select(
                    transform(
                        lit(new String[] {"a", "zebra"}),
                        t -> coalesce(element_at(lookup, t), lit(1L))))
                .first()
                .getList(0))
        .containsExactly(2L, 1L);
  }
}
