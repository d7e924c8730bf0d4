package dev.sparktrainer.cli;

import dev.sparktrainer.data.text.TextEncoding;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Finds the {@code vocab.txt} that {@code convert --tokenize} writes beside its output: in the data
 * directory itself or in its parent (the data being {@code OUTPUT/train}), for the first data path
 * (a glob's directory counts as the directory).
 */
final class Vocabularies {
  static final String FILE = "vocab.txt";

  private Vocabularies() {}

  /** The vocabulary file beside {@code paths}, or null if there is none. */
  static Path find(List<String> paths, Configuration conf) {
    if (paths.isEmpty()) {
      return null;
    }
    Path p = new Path(paths.get(0));
    if (p.toString().matches(".*[*?\\[{].*")) {
      p = p.getParent();
    }
    try {
      FileSystem fs = p.getFileSystem(conf);
      for (Path dir = p; dir != null && dir.getParent() != null; dir = dir.getParent()) {
        Path f = new Path(dir, FILE);
        if (fs.isFile(f)) {
          return f;
        }
        if (dir != p) {
          break; // the directory and its parent only
        }
      }
    } catch (IOException e) {
      throw new CliException("Cannot look for " + FILE + " beside " + p + ": " + e.getMessage());
    }
    return null;
  }

  /**
   * The vocabulary and tokenizer settings beside the training data, as files for the saved model
   * ({@code vocab.txt}, {@code tokenizer.properties}), when an ids column was trained on and the
   * data has them; otherwise none.
   */
  static java.util.Map<String, byte[]> modelFiles(
      List<String> paths,
      List<DataChecks.FeatureArg> features,
      Configuration conf,
      CliContext ctx) {
    java.util.Map<String, byte[]> out = new java.util.LinkedHashMap<>();
    if (features.stream().noneMatch(a -> DataChecks.FeatureArg.IDS.equals(a.kind()))) {
      return out;
    }
    Path vocab = find(paths, conf);
    if (vocab == null) {
      return out;
    }
    Path settings = new Path(vocab.getParent(), TextEncoding.SETTINGS);
    try {
      FileSystem fs = vocab.getFileSystem(conf);
      if (!fs.exists(settings)) {
        ctx.err.println(
            "note: "
                + vocab
                + " has no "
                + TextEncoding.SETTINGS
                + " beside it: the model keeps no vocabulary, so predict needs token ids, not"
                + " text");
        return out;
      }
      out.put(FILE, read(fs, vocab));
      out.put(TextEncoding.SETTINGS, read(fs, settings));
      TextEncoding.of(out.get(FILE), out.get(TextEncoding.SETTINGS), vocab.getParent().toString());
    } catch (IOException e) {
      throw new CliException("Cannot read the vocabulary beside the data: " + e.getMessage());
    }
    return out;
  }

  private static byte[] read(FileSystem fs, Path f) throws IOException {
    try (java.io.InputStream in = fs.open(f)) {
      return in.readAllBytes();
    }
  }

  /**
   * The text encoding a model keeps ({@link #modelFiles}), or null if it keeps none.
   *
   * @throws CliException naming the file when it is malformed
   */
  static TextEncoding ofModel(String modelDir, Configuration conf) {
    try {
      Path dir = new Path(modelDir);
      return TextEncoding.read(dir.getFileSystem(conf), dir);
    } catch (IOException e) {
      throw new CliException("Cannot read the model's vocabulary: " + e.getMessage());
    }
  }

  /** The number of entries (lines) of the vocabulary beside {@code paths}; 0 if there is none. */
  static long sizeBeside(List<String> paths, Configuration conf) {
    Path f = find(paths, conf);
    if (f == null) {
      return 0;
    }
    try (BufferedReader in =
        new BufferedReader(
            new InputStreamReader(f.getFileSystem(conf).open(f), StandardCharsets.UTF_8))) {
      long n = 0;
      while (in.readLine() != null) {
        n++;
      }
      return n;
    } catch (IOException e) {
      throw new CliException("Cannot read " + f + ": " + e.getMessage());
    }
  }
}
