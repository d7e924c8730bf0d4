package dev.sparktrainer.data.text;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * How a text becomes token ids: the {@link Tokenizer} and the {@link Vocabulary}, kept together as
 * {@code convert --tokenize} writes them ({@code vocab.txt} and {@code tokenizer.properties} in one
 * directory) and as a trained model keeps them, so {@code predict} on raw text tokenizes as the
 * training data was.
 */
public record TextEncoding(Tokenizer tokenizer, Vocabulary vocabulary) implements Serializable {
  /** The tokenizer's settings beside {@code vocab.txt}. */
  public static final String SETTINGS = "tokenizer.properties";

  /** The ids of {@code text} (unknown tokens: {@code <unk>}). */
  public long[] ids(String text) {
    return vocabulary.ids(text, tokenizer);
  }

  /** The content of {@link #SETTINGS} for {@code tokenizer}. */
  public static byte[] settings(Tokenizer tokenizer) {
    Properties p = new Properties();
    p.setProperty("rule", "words");
    p.setProperty("lowercase", Boolean.toString(tokenizer.lowercase()));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      p.store(out, "spark-trainer: how vocab.txt's tokens were cut (see docs/cli.md)");
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    return out.toByteArray();
  }

  /** Writes {@link #SETTINGS} for {@code tokenizer} into {@code dir} (replacing one). */
  public static void writeSettings(FileSystem fs, Path dir, Tokenizer tokenizer)
      throws IOException {
    Path f = new Path(dir, SETTINGS);
    try (OutputStream out = fs.create(f, true)) {
      out.write(settings(tokenizer));
    }
  }

  /** The tokenizer {@link #settings} describe; {@code name} is the file named in errors. */
  public static Tokenizer tokenizer(InputStream in, String name) throws IOException {
    Properties p = new Properties();
    p.load(new java.io.InputStreamReader(in, StandardCharsets.ISO_8859_1));
    String rule = p.getProperty("rule");
    String lower = p.getProperty("lowercase");
    if (!"words".equals(rule) || !("true".equals(lower) || "false".equals(lower))) {
      throw new IOException(
          name
              + ": expected rule=words and lowercase=true or false (written by convert --tokenize),"
              + " found rule="
              + rule
              + ", lowercase="
              + lower);
    }
    return new Tokenizer(Boolean.parseBoolean(lower));
  }

  /**
   * The encoding in {@code dir} ({@code vocab.txt} and {@link #SETTINGS}), or null when the
   * directory has no {@code vocab.txt}.
   *
   * @throws IOException naming the file that is missing or malformed
   */
  public static TextEncoding read(FileSystem fs, Path dir) throws IOException {
    Path vocab = new Path(dir, Vocabulary.FILE_NAME);
    if (!fs.exists(vocab)) {
      return null;
    }
    Path settings = new Path(dir, SETTINGS);
    if (!fs.exists(settings)) {
      throw new IOException(
          "No "
              + settings
              + " beside "
              + vocab
              + ": how its tokens were cut (lower-cased or not) is unknown; convert --tokenize"
              + " writes both");
    }
    Tokenizer t;
    try (InputStream in = fs.open(settings)) {
      t = tokenizer(in, settings.toString());
    }
    return new TextEncoding(t, Vocabulary.read(fs, vocab));
  }

  /** The encoding from the two files' contents (a saved model's). */
  public static TextEncoding of(byte[] vocab, byte[] settings, String where) throws IOException {
    return new TextEncoding(
        tokenizer(new ByteArrayInputStream(settings), where + "/" + SETTINGS),
        Vocabulary.read(new ByteArrayInputStream(vocab), where + "/" + Vocabulary.FILE_NAME));
  }
}
