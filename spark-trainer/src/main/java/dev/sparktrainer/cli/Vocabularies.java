package dev.sparktrainer.cli;

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
