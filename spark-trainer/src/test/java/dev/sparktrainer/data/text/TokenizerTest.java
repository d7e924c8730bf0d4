package dev.sparktrainer.data.text;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/** The tokenizer's rule on a fixed text, token by token, with and without lower-casing. */
class TokenizerTest {
  /**
   * Every case of the rule in one text (escapes keep the characters exact): apostrophes inside,
   * around and alone, the typographic apostrophe, digits of two scripts, precomposed and combining
   * accents, Greek with a final sigma, CJK without spaces, a letter above U+FFFF, punctuation,
   * symbols, underscores, hyphens, superscripts and emoji as separators.
   */
  static final String TEXT =
      "Don't panic: it's 42 o'clock, 'quoted' and dogs' bones \u2014 rock'n'roll!\n"
          + "\u00dcn\u00efcode cafe\u0301 \u039f\u0394\u039f\u03a3 \u6771\u4eac 2024\u5e74"
          + " \u0663\u0664\te-mail foo_bar x\u00b2 C++ AT&T\r\n"
          + "\u2019tis \u2019\u2019 '' don\u2019t \u0130stanbul \ud835\udd18x \ud83d\ude42 (hello.)";

  @Test
  void tokensOfTheFixedText() {
    assertThat(new Tokenizer(false).tokens(TEXT))
        .containsExactly(
            "Don't",
            "panic",
            "it's",
            "42",
            "o'clock",
            "quoted",
            "and",
            "dogs",
            "bones",
            "rock'n'roll",
            "\u00dcn\u00efcode",
            "cafe\u0301",
            "\u039f\u0394\u039f\u03a3",
            "\u6771\u4eac",
            "2024\u5e74",
            "\u0663\u0664",
            "e",
            "mail",
            "foo",
            "bar",
            "x",
            "C",
            "AT",
            "T",
            "tis",
            "don't",
            "\u0130stanbul",
            "\ud835\udd18x",
            "hello");
  }

  @Test
  void lowercaseUsesTheRootLocale() {
    Locale before = Locale.getDefault();
    Locale.setDefault(Locale.forLanguageTag("tr-TR")); // Turkish would lower-case I to dotless ı
    try {
      assertThat(new Tokenizer(true).tokens(TEXT))
          .containsExactly(
              "don't",
              "panic",
              "it's",
              "42",
              "o'clock",
              "quoted",
              "and",
              "dogs",
              "bones",
              "rock'n'roll",
              "\u00fcn\u00efcode",
              "cafe\u0301",
              "\u03bf\u03b4\u03bf\u03c2", // final sigma
              "\u6771\u4eac",
              "2024\u5e74",
              "\u0663\u0664",
              "e",
              "mail",
              "foo",
              "bar",
              "x",
              "c",
              "at",
              "t",
              "tis",
              "don't",
              "i\u0307stanbul", // İ → i + combining dot above, a mark: still one token
              "\ud835\udd18x", // no lower case for the Fraktur U
              "hello");
      assertThat(new Tokenizer(true).tokens("IDIOM")).containsExactly("idiom");
    } finally {
      Locale.setDefault(before);
    }
  }

  @Test
  void emptyNullAndSeparatorsOnly() {
    Tokenizer t = new Tokenizer(true);
    assertThat(t.tokens(null)).isEmpty();
    assertThat(t.tokens("")).isEmpty();
    assertThat(t.tokens(" ,.;'' \u2019 -- \n\t")).isEmpty();
    assertThat(t.tokens("a")).containsExactly("a");
    assertThat(t.tokens("'a'")).containsExactly("a");
  }

  @Test
  void forEachGivesTheSameTokensAsTokens() {
    List<String> seen = new ArrayList<>();
    new Tokenizer(false).forEach(TEXT, seen::add);
    assertThat(seen).isEqualTo(new Tokenizer(false).tokens(TEXT));
  }

  @Test
  void everyTokenOfTheTextIsAValidVocabularyLine() {
    for (boolean lower : new boolean[] {false, true}) {
      for (String token : new Tokenizer(lower).tokens(TEXT)) {
        assertThat(Tokenizer.whyNotToken(token)).as(token).isNull();
      }
    }
    assertThat(Tokenizer.whyNotToken("")).isEqualTo("an empty line");
    assertThat(Tokenizer.whyNotToken("a-b"))
        .isEqualTo(
            "character U+002D at column 2 is not a token character"
                + " (letters, digits, combining marks, inner apostrophes ')");
    assertThat(Tokenizer.whyNotToken("\ud835\udd18 b")).startsWith("character U+0020 at column 2");
    assertThat(Tokenizer.whyNotToken("dogs'"))
        .isEqualTo("a token cannot start or end with an apostrophe");
  }
}
