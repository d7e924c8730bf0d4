package dev.sparktrainer.data.text;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The vocabulary counted by a Spark job equals the one counted in memory. */
class VocabularyCountTest {
  private static SparkSession spark;

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("vocabulary-count")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  @Test
  void sparkCountEqualsInMemoryCount() {
    List<String> texts = new ArrayList<>();
    for (int i = 0; i < 500; i++) {
      // many ties: w0..w36 appear 13 or 14 times each, x0..x10 about 30 times, "null" 167 times
      texts.add("w" + (i % 37) + " The the THE, " + (i % 3 == 0 ? "null" : "x" + (i % 11)));
    }
    texts.add(null);
    texts.add("");
    Tokenizer tok = new Tokenizer(true);
    Map<String, Long> expected = new HashMap<>();
    long total = 0;
    for (String t : texts) {
      for (String token : tok.tokens(t)) {
        expected.merge(token, 1L, Long::sum);
        total++;
      }
    }
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    for (int size : new int[] {2, 3, 10, 40, 1000}) {
      Vocabulary.Counted c = Vocabulary.count(jsc.parallelize(texts, 4), tok, size);
      assertThat(c.vocabulary()).as("size " + size).isEqualTo(Vocabulary.of(expected, size));
      assertThat(c.tokens()).isEqualTo(total);
      assertThat(c.distinctTokens()).isEqualTo(expected.size());
    }
    assertThat(Vocabulary.of(expected, 4).tokens())
        .containsExactly("<pad>", "<unk>", "the", "null"); // "the" 1500 times, "null" 167 times
  }
}
