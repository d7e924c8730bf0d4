package dev.sparktrainer.data.text;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * Word-level tokens, by one rule:
 *
 * <ol>
 *   <li>A token is a maximal run of <em>token characters</em>: letters and digits ({@link
 *       Character#isLetterOrDigit(int)}, any script), combining marks (Unicode categories Mn, Mc,
 *       Me, so {@code e} + U+0301 stays in its word), and apostrophes ({@code '} U+0027 and the
 *       typographic {@code ’} U+2019, which is written as {@code '}). Everything else (spaces,
 *       punctuation, symbols, hyphens, controls) separates tokens.
 *   <li>Leading and trailing apostrophes are removed from each run ({@code 'quoted'} → {@code
 *       quoted}, {@code dogs'} → {@code dogs}); inner ones stay ({@code don't}, {@code o'clock}). A
 *       run of apostrophes alone is no token.
 *   <li>With {@code lowercase}, each token is {@link String#toLowerCase(Locale) lower-cased} with
 *       {@link Locale#ROOT} (the same on every machine, whatever its default locale).
 * </ol>
 *
 * No Unicode normalization is applied: text in NFD and NFC gives different tokens (normalize the
 * text first if it mixes them). A token never holds a line break, so a vocabulary is one token a
 * line. Instances are immutable and serializable (they travel to Spark executors).
 */
public final class Tokenizer implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final char RIGHT_QUOTE = '\u2019';

  private final boolean lowercase;

  /**
   * @param lowercase lower-case every token (with {@link Locale#ROOT})
   */
  public Tokenizer(boolean lowercase) {
    this.lowercase = lowercase;
  }

  /** Whether tokens are lower-cased. */
  public boolean lowercase() {
    return lowercase;
  }

  /** The tokens of {@code text} in order (none for {@code null} or a text without tokens). */
  public List<String> tokens(String text) {
    List<String> out = new ArrayList<>();
    forEach(text, out::add);
    return out;
  }

  /** Passes each token of {@code text} to {@code sink}, in order, without building a list. */
  public void forEach(String text, Consumer<String> sink) {
    if (text == null) {
      return;
    }
    int n = text.length();
    int i = 0;
    StringBuilder token = new StringBuilder();
    while (i < n) {
      int cp = text.codePointAt(i);
      if (!isTokenChar(cp)) {
        i += Character.charCount(cp);
        continue;
      }
      token.setLength(0);
      while (i < n) {
        cp = text.codePointAt(i);
        if (!isTokenChar(cp)) {
          break;
        }
        token.appendCodePoint(cp == RIGHT_QUOTE ? '\'' : cp);
        i += Character.charCount(cp);
      }
      int from = 0;
      int to = token.length();
      while (from < to && token.charAt(from) == '\'') {
        from++;
      }
      while (to > from && token.charAt(to - 1) == '\'') {
        to--;
      }
      if (from < to) {
        String t = token.substring(from, to);
        sink.accept(lowercase ? t.toLowerCase(Locale.ROOT) : t);
      }
    }
  }

  /** Whether {@code cp} can be part of a token (before apostrophes are normalized). */
  static boolean isTokenChar(int cp) {
    return cp == '\'' || cp == RIGHT_QUOTE || Character.isLetterOrDigit(cp) || isMark(cp);
  }

  static boolean isMark(int cp) {
    int t = Character.getType(cp);
    return t == Character.NON_SPACING_MARK
        || t == Character.COMBINING_SPACING_MARK
        || t == Character.ENCLOSING_MARK;
  }

  /**
   * Why {@code s} could not be a token this rule produces, or {@code null} when it could: it is
   * empty, holds a character that is no token character (or a {@code ’}, which tokens hold as
   * {@code '}), or starts or ends with an apostrophe.
   */
  static String whyNotToken(String s) {
    if (s.isEmpty()) {
      return "an empty line";
    }
    for (int i = 0; i < s.length(); ) {
      int cp = s.codePointAt(i);
      if (cp == RIGHT_QUOTE || !isTokenChar(cp)) {
        return String.format(
            Locale.ROOT,
            "character U+%04X at column %d is not a token character"
                + " (letters, digits, combining marks, inner apostrophes ')",
            cp,
            s.codePointCount(0, i) + 1);
      }
      i += Character.charCount(cp);
    }
    if (s.charAt(0) == '\'' || s.charAt(s.length() - 1) == '\'') {
      return "a token cannot start or end with an apostrophe";
    }
    return null;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Tokenizer t && t.lowercase == lowercase;
  }

  @Override
  public int hashCode() {
    return Boolean.hashCode(lowercase);
  }

  @Override
  public String toString() {
    return "Tokenizer[lowercase=" + lowercase + "]";
  }
}
