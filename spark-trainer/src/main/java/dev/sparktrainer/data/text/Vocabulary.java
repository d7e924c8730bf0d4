package dev.sparktrainer.data.text;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;

/**
 * Token ↔ id: {@code <pad>}=0, {@code <unk>}=1, then tokens by decreasing count in the training
 * data, ties broken by the tokens' Unicode code point order (which is also their UTF-8 byte order,
 * and Python's {@code sorted} order), so the same counts always give the same ids. Truncated to a
 * given size that includes the two specials.
 *
 * <p>Stored as {@code vocab.txt}: UTF-8, one token per line, {@code \n} line ends, the line number
 * (from 0) is the id. {@link #read} checks every line and names the file and line of the first
 * problem. {@link #count} counts the tokens of a text column with a Spark job that brings only the
 * top counts back to the driver.
 */
public final class Vocabulary implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(Vocabulary.class);

  /** The padding token and its id. */
  public static final String PAD = "<pad>";

  public static final int PAD_ID = 0;

  /** The unknown token (any token not in the vocabulary) and its id. */
  public static final String UNK = "<unk>";

  public static final int UNK_ID = 1;

  /** The name of the file {@code convert --tokenize} writes. */
  public static final String FILE_NAME = "vocab.txt";

  private final String[] tokens;
  private final Map<String, Integer> ids;

  private Vocabulary(List<String> tokens) {
    this.tokens = tokens.toArray(new String[0]);
    this.ids = new HashMap<>(tokens.size() * 2);
    for (int i = 0; i < this.tokens.length; i++) {
      ids.put(this.tokens[i], i);
    }
  }

  /**
   * The vocabulary of {@code size} entries at most ({@code <pad>}, {@code <unk>} and the {@code
   * size - 2} most frequent tokens of {@code counts}, ties by code point order).
   *
   * @throws IllegalArgumentException if {@code size < 2}, or a token is one of the specials or a
   *     string the {@link Tokenizer} cannot produce
   */
  public static Vocabulary of(Map<String, Long> counts, int size) {
    checkSize(size);
    List<Tuple2<String, Long>> entries = new ArrayList<>(counts.size());
    counts.forEach((t, c) -> entries.add(new Tuple2<>(t, c)));
    entries.sort(ORDER);
    return ofOrdered(entries.subList(0, Math.min(entries.size(), size - 2)));
  }

  private static Vocabulary ofOrdered(List<Tuple2<String, Long>> top) {
    List<String> tokens = new ArrayList<>(top.size() + 2);
    tokens.add(PAD);
    tokens.add(UNK);
    for (Tuple2<String, Long> e : top) {
      String why = Tokenizer.whyNotToken(e._1());
      if (why != null) {
        throw new IllegalArgumentException("'" + e._1() + "' is not a token: " + why);
      }
      tokens.add(e._1());
    }
    return new Vocabulary(tokens);
  }

  private static void checkSize(int size) {
    if (size < 2) {
      throw new IllegalArgumentException(
          "Invalid vocabulary size " + size + ": expected at least 2 (<pad> and <unk>)");
    }
  }

  /** The vocabulary, the number of tokens counted and how many distinct ones there were. */
  public record Counted(Vocabulary vocabulary, long tokens, long distinctTokens) {}

  /**
   * Counts the tokens of {@code texts} (a Spark job: tokens counted per partition, then reduced by
   * token) and returns the vocabulary of the {@code size - 2} most frequent: only those counts come
   * back to the driver ({@code takeOrdered}), never the text. Null texts have no tokens.
   */
  public static Counted count(JavaRDD<String> texts, Tokenizer tokenizer, int size) {
    checkSize(size);
    JavaPairRDD<String, Long> counts =
        texts
            .flatMapToPair(
                text -> {
                  List<Tuple2<String, Long>> out = new ArrayList<>();
                  tokenizer.forEach(text, t -> out.add(new Tuple2<>(t, 1L)));
                  return out.iterator();
                })
            .reduceByKey(Long::sum);
    List<Tuple2<String, Long>> top = size == 2 ? List.of() : counts.takeOrdered(size - 2, ORDER);
    // The second job reuses the first one's shuffle output: only the reduce side runs again.
    Tuple2<Long, Long> totals =
        counts.aggregate(
            new Tuple2<>(0L, 0L),
            (acc, e) -> new Tuple2<>(acc._1() + e._2(), acc._2() + 1),
            (a, b) -> new Tuple2<>(a._1() + b._1(), a._2() + b._2()));
    return new Counted(ofOrdered(top), totals._1(), totals._2());
  }

  /** Decreasing count, then code point order of the token. */
  static final Comparator<Tuple2<String, Long>> ORDER = new CountOrder();

  private static final class CountOrder implements Comparator<Tuple2<String, Long>>, Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public int compare(Tuple2<String, Long> a, Tuple2<String, Long> b) {
      int c = Long.compare(b._2(), a._2());
      return c != 0 ? c : compareCodePoints(a._1(), b._1());
    }
  }

  /** Unicode code point order (String.compareTo orders UTF-16 units: it differs above U+FFFF). */
  static int compareCodePoints(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int x = a.codePointAt(i);
      int y = b.codePointAt(j);
      if (x != y) {
        return Integer.compare(x, y);
      }
      i += Character.charCount(x);
      j += Character.charCount(y);
    }
    return Boolean.compare(i < a.length(), j < b.length());
  }

  /** The number of entries, the two specials included. */
  public int size() {
    return tokens.length;
  }

  /** The token of {@code id}. */
  public String token(int id) {
    return tokens[id];
  }

  /** Every token, by id. */
  public List<String> tokens() {
    return Collections.unmodifiableList(java.util.Arrays.asList(tokens));
  }

  /** The id of {@code token}: {@link #UNK_ID} if it is not in the vocabulary. */
  public int id(String token) {
    Integer id = ids.get(token);
    return id == null ? UNK_ID : id;
  }

  /** The ids of {@code tokens} (unknown ones are {@link #UNK_ID}). */
  public long[] ids(List<String> tokens) {
    long[] out = new long[tokens.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = id(tokens.get(i));
    }
    return out;
  }

  /** The ids of the tokens of {@code text} by {@code tokenizer} (none for {@code null}). */
  public long[] ids(String text, Tokenizer tokenizer) {
    return ids(tokenizer.tokens(text));
  }

  /** Writes the vocabulary file: UTF-8, one token per line, each line ended by {@code \n}. */
  public void write(OutputStream out) throws IOException {
    StringBuilder s = new StringBuilder();
    for (String t : tokens) {
      s.append(t).append('\n');
    }
    out.write(s.toString().getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Writes {@code file} atomically on its Hadoop FileSystem: a hidden temporary file beside it,
   * then a rename (an existing file is replaced: deleted just before the rename).
   */
  public void write(FileSystem fs, Path file) throws IOException {
    Path tmp = new Path(file.getParent(), "." + file.getName() + ".tmp-" + UUID.randomUUID());
    boolean done = false;
    try {
      try (FSDataOutputStream out = fs.create(tmp, false)) {
        write(out);
      }
      if (fs.exists(file) && !fs.delete(file, false)) {
        throw new IOException("Cannot replace " + file + ": the file system refused to delete it");
      }
      if (!fs.rename(tmp, file)) {
        throw new IOException("Cannot rename " + tmp + " to " + file);
      }
      done = true;
    } finally {
      if (!done) {
        try {
          fs.delete(tmp, false);
        } catch (IOException | RuntimeException e) {
          LOG.warn("Cannot delete the temporary vocabulary file {}: {}", tmp, e.toString());
        }
      }
    }
  }

  /** Reads and checks the vocabulary {@code file} on its Hadoop FileSystem. */
  public static Vocabulary read(FileSystem fs, Path file) throws IOException {
    try (FSDataInputStream in = fs.open(file)) {
      return read(in, file.toString());
    }
  }

  /**
   * Reads and checks a vocabulary file ({@code name} is the file named in errors): UTF-8; line 1
   * {@code <pad>}, line 2 {@code <unk>}; then one token per line that the {@link Tokenizer} could
   * produce, none twice. A final line end is optional.
   *
   * @throws IOException naming the file and the line (or byte offset) of the first problem
   */
  public static Vocabulary read(InputStream in, String name) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    in.transferTo(bytes);
    ByteBuffer buf = ByteBuffer.wrap(bytes.toByteArray());
    CharsetDecoder dec =
        StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
    CharBuffer chars = CharBuffer.allocate(buf.remaining());
    CoderResult r = dec.decode(buf, chars, true);
    if (r.isError()) {
      throw new IOException(
          "Malformed vocabulary " + name + ": not UTF-8 at byte offset " + buf.position());
    }
    dec.flush(chars);
    String text = chars.flip().toString();
    List<String> lines = new ArrayList<>(List.of(text.split("\n", -1)));
    if (!lines.isEmpty() && lines.get(lines.size() - 1).isEmpty()) {
      lines.remove(lines.size() - 1); // the final line end
    }
    if (lines.size() < 2) {
      throw new IOException(
          "Malformed vocabulary "
              + name
              + ": "
              + (lines.isEmpty() ? "empty" : "1 line")
              + ", expected <pad> on line 1 and <unk> on line 2");
    }
    String[] specials = {PAD, UNK};
    Map<String, Integer> seen = new HashMap<>();
    for (int i = 0; i < lines.size(); i++) {
      String t = lines.get(i);
      if (t.endsWith("\r")) {
        throw malformed(name, i, "ends with \\r (a Windows line end): lines end with \\n only");
      }
      if (i < 2) {
        if (!t.equals(specials[i])) {
          throw malformed(name, i, "expected " + specials[i] + ", found '" + t + "'");
        }
      } else {
        Integer before = seen.get(t);
        if (before != null) {
          throw malformed(name, i, "'" + t + "' repeats line " + (before + 1));
        }
        String why = Tokenizer.whyNotToken(t);
        if (why != null) {
          throw malformed(
              name,
              i,
              t.isEmpty()
                  ? "an empty line (expected one token per line)"
                  : "'" + t + "' is not a token: " + why);
        }
      }
      seen.put(t, i);
    }
    return new Vocabulary(lines);
  }

  private static IOException malformed(String name, int line, String why) {
    return new IOException(
        String.format(Locale.ROOT, "Malformed vocabulary %s line %d: %s", name, line + 1, why));
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Vocabulary v && java.util.Arrays.equals(v.tokens, tokens);
  }

  @Override
  public int hashCode() {
    return java.util.Arrays.hashCode(tokens);
  }

  @Override
  public String toString() {
    return "Vocabulary[" + tokens.length + " entries]";
  }
}
