package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The documentation stays true: every relative link in {@code README.md} and {@code docs/} (with
 * its {@code #anchor}) leads somewhere, and every flag of a {@code bin/spark-trainer COMMAND ...}
 * command line or of an option table there is a flag the command has.
 */
class DocsTest {
  private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");
  private static final Pattern INVOCATION = Pattern.compile("bin/spark-trainer\\s+([a-z]+)\\b");
  private static final Pattern FLAG = Pattern.compile("(?<![\\w-])--([a-z][a-z0-9-]*)");
  private static final Pattern TABLE_ROW = Pattern.compile("^\\|\\s*(`--[^|]*)\\|");

  private static Path root;
  private static List<Path> pages;
  private static final Map<String, Set<String>> FLAGS = new LinkedHashMap<>();

  @BeforeAll
  static void load() throws IOException {
    root = Path.of("").toAbsolutePath();
    while (root != null && !Files.exists(root.resolve("README.md"))) {
      root = root.getParent();
    }
    assertThat(root)
        .as("the repository root (with README.md) above %s", Path.of("").toAbsolutePath())
        .isNotNull();
    pages = new ArrayList<>();
    pages.add(root.resolve("README.md"));
    Path docs = root.resolve("docs");
    if (Files.isDirectory(docs)) {
      try (Stream<Path> s = Files.walk(docs)) {
        s.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
      }
    }
    for (Command c :
        List.of(
            new TrainCommand(),
            new EvaluateCommand(),
            new PredictCommand(),
            new InspectCommand(),
            new ConvertCommand(),
            new DoctorCommand())) {
      Set<String> names = new LinkedHashSet<>();
      c.flags().all().forEach(f -> names.add(f.name()));
      names.add("help");
      FLAGS.put(c.name, names);
    }
  }

  @Test
  void everyRelativeLinkAndAnchorExists() {
    List<String> broken = new ArrayList<>();
    Map<Path, Set<String>> anchors = new HashMap<>();
    for (Path page : pages) {
      String text = read(page);
      Matcher m = LINK.matcher(stripCode(text));
      while (m.find()) {
        String target = m.group(1);
        if (target.matches("^[a-z][a-z0-9+.-]*:.*") || target.startsWith("//")) {
          continue; // http:, https:, mailto: ...
        }
        int hash = target.indexOf('#');
        String file = hash < 0 ? target : target.substring(0, hash);
        String anchor = hash < 0 ? null : target.substring(hash + 1);
        Path resolved = file.isEmpty() ? page : page.getParent().resolve(file).normalize();
        if (!Files.exists(resolved)) {
          broken.add(
              root.relativize(page)
                  + ": "
                  + target
                  + " (no such file "
                  + root.relativize(resolved)
                  + ")");
          continue;
        }
        if (anchor != null
            && resolved.toString().endsWith(".md")
            && !anchors.computeIfAbsent(resolved, DocsTest::anchorsOf).contains(anchor)) {
          broken.add(
              root.relativize(page)
                  + ": "
                  + target
                  + " (no heading #"
                  + anchor
                  + " in "
                  + root.relativize(resolved)
                  + ")");
        }
      }
    }
    assertThat(broken).as("broken links in %d pages", pages.size()).isEmpty();
  }

  @Test
  void everyCommandLineFlagExists() {
    List<String> unknown = new ArrayList<>();
    int checked = 0;
    for (Path page : pages) {
      List<String> lines = List.of(read(page).split("\n", -1));
      for (int i = 0; i < lines.size(); i++) {
        StringBuilder logical = new StringBuilder(lines.get(i));
        while (logical.toString().stripTrailing().endsWith("\\") && i + 1 < lines.size()) {
          logical.setLength(logical.toString().stripTrailing().length() - 1);
          logical.append(' ').append(lines.get(++i));
        }
        Matcher inv = INVOCATION.matcher(logical);
        while (inv.find()) {
          Set<String> known = FLAGS.get(inv.group(1));
          if (known == null) {
            continue; // "bin/spark-trainer COMMAND", prose
          }
          int end = logical.indexOf("`", inv.end());
          String rest = logical.substring(inv.end(), end < 0 ? logical.length() : end);
          int comment = rest.indexOf(" #");
          if (comment >= 0) {
            rest = rest.substring(0, comment);
          }
          Matcher f = FLAG.matcher(rest);
          while (f.find()) {
            checked++;
            if (!known.contains(f.group(1))) {
              unknown.add(
                  root.relativize(page)
                      + ":"
                      + (i + 1)
                      + ": `"
                      + inv.group(1)
                      + "` has no --"
                      + f.group(1));
            }
          }
        }
        Matcher row = TABLE_ROW.matcher(lines.get(i));
        if (row.find()) {
          Matcher f = FLAG.matcher(row.group(1));
          while (f.find()) {
            checked++;
            String flag = f.group(1);
            if (FLAGS.values().stream().noneMatch(s -> s.contains(flag))) {
              unknown.add(
                  root.relativize(page)
                      + ":"
                      + (i + 1)
                      + ": option table names --"
                      + flag
                      + ", which no command has");
            }
          }
        }
      }
    }
    assertThat(checked).as("flags found in the docs").isGreaterThan(20);
    assertThat(unknown).isEmpty();
  }

  @Test
  void slugsFollowGitHub() {
    assertThat(slug("The input pipeline (`dev.sparktrainer.data`)"))
        .isEqualTo("the-input-pipeline-devsparktrainerdata");
    assertThat(slug("Deploying (Kubernetes, YARN, Airflow)"))
        .isEqualTo("deploying-kubernetes-yarn-airflow");
    assertThat(slug("S3 (`s3a://`)")).isEqualTo("s3-s3a");
  }

  /**
   * GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered.
   */
  private static Set<String> anchorsOf(Path page) {
    Set<String> out = new LinkedHashSet<>();
    Map<String, Integer> seen = new HashMap<>();
    boolean fenced = false;
    for (String line : read(page).split("\n")) {
      if (line.startsWith("```")) {
        fenced = !fenced;
      }
      if (fenced || !line.startsWith("#")) {
        continue;
      }
      String s = slug(line.replaceFirst("^#+\\s*", ""));
      int n = seen.merge(s, 1, Integer::sum);
      out.add(n == 1 ? s : s + "-" + (n - 1));
    }
    return out;
  }

  static String slug(String heading) {
    return heading
        .trim()
        .toLowerCase(Locale.ROOT)
        .replaceAll("[^\\p{L}\\p{N} _-]", "")
        .replace(' ', '-');
  }

  /** The text without fenced code blocks (links there are not links). */
  private static String stripCode(String text) {
    return text.replaceAll("(?s)```.*?```", "");
  }

  private static String read(Path p) {
    try {
      return Files.readString(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
