package dev.sparktrainer.data.text;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The vocabulary's order, ties, specials, truncation and unknowns; vocab.txt and its errors. */
class VocabularyTest {
  @TempDir Path tmp;

  private static Map<String, Long> counts() {
    Map<String, Long> c = new LinkedHashMap<>();
    c.put("cat", 1L);
    c.put("\u00c9t\u00e9", 3L); // Été: above ASCII
    c.put("z", 3L);
    c.put("the", 5L);
    c.put("b", 3L);
    c.put("a", 3L);
    return c;
  }

  @Test
  void specialsThenMostFrequentTiesByCodePoint() {
    Vocabulary v = Vocabulary.of(counts(), 100);
    assertThat(v.tokens())
        .containsExactly("<pad>", "<unk>", "the", "a", "b", "z", "\u00c9t\u00e9", "cat");
    assertThat(v.size()).isEqualTo(8);
    assertThat(v.id("<pad>")).isEqualTo(Vocabulary.PAD_ID).isZero();
    assertThat(v.id("<unk>")).isEqualTo(Vocabulary.UNK_ID).isOne();
    assertThat(v.id("the")).isEqualTo(2);
    assertThat(v.token(7)).isEqualTo("cat");
  }

  @Test
  void truncatedToTheSizeWithTheSpecials() {
    assertThat(Vocabulary.of(counts(), 5).tokens())
        .containsExactly("<pad>", "<unk>", "the", "a", "b");
    assertThat(Vocabulary.of(counts(), 2).tokens()).containsExactly("<pad>", "<unk>");
    assertThat(Vocabulary.of(Map.of(), 10).tokens()).containsExactly("<pad>", "<unk>");
    assertThatThrownBy(() -> Vocabulary.of(counts(), 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Invalid vocabulary size 1: expected at least 2 (<pad> and <unk>)");
  }

  @Test
  void tiesFollowCodePointsNotUtf16Units() {
    // U+FF21 (fullwidth A) is below U+1D518 (Fraktur U) as code points, above it as UTF-16 units.
    String fullwidthA = "\uff21";
    String frakturU = "\ud835\udd18";
    assertThat(fullwidthA.compareTo(frakturU)).isPositive();
    Vocabulary v = Vocabulary.of(Map.of(frakturU, 2L, fullwidthA, 2L), 10);
    assertThat(v.tokens()).containsExactly("<pad>", "<unk>", fullwidthA, frakturU);
    assertThat(Vocabulary.compareCodePoints("ab", "a")).isPositive();
    assertThat(Vocabulary.compareCodePoints("a", "ab")).isNegative();
    assertThat(Vocabulary.compareCodePoints("ab", "ab")).isZero();
  }

  @Test
  void unknownTokensMapToOne() {
    Vocabulary v = Vocabulary.of(counts(), 5);
    assertThat(v.id("cat")).isEqualTo(Vocabulary.UNK_ID); // cut by the size
    assertThat(v.id("dog")).isEqualTo(Vocabulary.UNK_ID);
    assertThat(v.ids("The cat, a dog and b.", new Tokenizer(true)))
        .containsExactly(2, 1, 3, 1, 1, 4);
    assertThat(v.ids("The cat", new Tokenizer(false))).containsExactly(1, 1);
    assertThat(v.ids(null, new Tokenizer(false))).isEmpty();
    assertThat(v.ids(List.of("<pad>", "<unk>"))).containsExactly(0, 1);
  }

  @Test
  void refusesWhatTheTokenizerCannotProduce() {
    assertThatThrownBy(() -> Vocabulary.of(Map.of("new york", 1L), 10))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "'new york' is not a token: character U+0020 at column 4 is not a token character"
                + " (letters, digits, combining marks, inner apostrophes ')");
    assertThatThrownBy(() -> Vocabulary.of(Map.of("<unk>", 1L), 10))
        .hasMessageStartingWith("'<unk>' is not a token: character U+003C at column 1");
  }

  @Test
  void vocabTxtRoundTrip() throws IOException {
    Vocabulary v = Vocabulary.of(counts(), 100);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    v.write(out);
    assertThat(out.toString(StandardCharsets.UTF_8))
        .isEqualTo("<pad>\n<unk>\nthe\na\nb\nz\n\u00c9t\u00e9\ncat\n");
    Vocabulary back = Vocabulary.read(new ByteArrayInputStream(out.toByteArray()), "v.txt");
    assertThat(back).isEqualTo(v);
    assertThat(back.tokens()).isEqualTo(v.tokens());
    // the final line end is optional
    assertThat(read("<pad>\n<unk>\nthe").tokens()).containsExactly("<pad>", "<unk>", "the");
  }

  @Test
  void writesAtomicallyOnAHadoopFileSystemAndReplaces() throws IOException {
    FileSystem fs = FileSystem.getLocal(new Configuration());
    org.apache.hadoop.fs.Path file =
        new org.apache.hadoop.fs.Path(tmp.toUri().toString(), "vocab.txt");
    Vocabulary.of(Map.of("old", 1L), 10).write(fs, file);
    Vocabulary v = Vocabulary.of(counts(), 6);
    v.write(fs, file);
    assertThat(Vocabulary.read(fs, file)).isEqualTo(v);
    try (Stream<Path> s = Files.list(tmp)) {
      // no temporary file left behind (LocalFileSystem's .crc files aside)
      assertThat(s.map(p -> p.getFileName().toString()).filter(n -> !n.endsWith(".crc")))
          .containsExactly("vocab.txt");
    }
  }

  private static Vocabulary read(String text) throws IOException {
    return read(text.getBytes(StandardCharsets.UTF_8));
  }

  private static Vocabulary read(byte[] bytes) throws IOException {
    return Vocabulary.read(new ByteArrayInputStream(bytes), "/data/vocab.txt");
  }

  private static void assertMalformed(String text, String message) {
    assertThatThrownBy(() -> read(text)).isInstanceOf(IOException.class).hasMessage(message);
  }

  @Test
  void eachMalformedFileNamesFileAndLine() {
    assertMalformed(
        "",
        "Malformed vocabulary /data/vocab.txt: empty, expected <pad> on line 1 and <unk> on line 2");
    assertMalformed(
        "<pad>\n",
        "Malformed vocabulary /data/vocab.txt: 1 line, expected <pad> on line 1 and <unk> on line 2");
    assertMalformed(
        "<unk>\n<pad>\n",
        "Malformed vocabulary /data/vocab.txt line 1: expected <pad>, found '<unk>'");
    assertMalformed(
        "<pad>\nthe\n<unk>\n",
        "Malformed vocabulary /data/vocab.txt line 2: expected <unk>, found 'the'");
    assertMalformed(
        "<pad>\n<unk>\nthe\na\nthe\n",
        "Malformed vocabulary /data/vocab.txt line 5: 'the' repeats line 3");
    assertMalformed(
        "<pad>\n<unk>\n<pad>\n",
        "Malformed vocabulary /data/vocab.txt line 3: '<pad>' repeats line 1");
    assertMalformed(
        "<pad>\n<unk>\nthe\n\na\n",
        "Malformed vocabulary /data/vocab.txt line 4: an empty line (expected one token per line)");
    assertMalformed(
        "<pad>\n<unk>\nthe\n\n",
        "Malformed vocabulary /data/vocab.txt line 4: an empty line (expected one token per line)");
    assertMalformed(
        "<pad>\n<unk>\nnew york\n",
        "Malformed vocabulary /data/vocab.txt line 3: 'new york' is not a token: character U+0020"
            + " at column 4 is not a token character (letters, digits, combining marks, inner"
            + " apostrophes ')");
    assertMalformed(
        "<pad>\n<unk>\n'tis\n",
        "Malformed vocabulary /data/vocab.txt line 3: ''tis' is not a token: a token cannot start"
            + " or end with an apostrophe");
    assertMalformed(
        "<pad>\r\n<unk>\r\n",
        "Malformed vocabulary /data/vocab.txt line 1: ends with \\r (a Windows line end): lines end"
            + " with \\n only");
    byte[] notUtf8 = {
      '<', 'p', 'a', 'd', '>', '\n', '<', 'u', 'n', 'k', '>', '\n', 'a', (byte) 0xff, '\n'
    };
    assertThatThrownBy(() -> read(notUtf8))
        .isInstanceOf(IOException.class)
        .hasMessage("Malformed vocabulary /data/vocab.txt: not UTF-8 at byte offset 13");
  }
}
