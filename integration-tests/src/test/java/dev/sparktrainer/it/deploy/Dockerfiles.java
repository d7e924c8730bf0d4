package dev.sparktrainer.it.deploy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A Dockerfile read the way Docker reads it, for the instructions deploy/docker uses: line
 * continuations, comments, {@code ARG} defaults (global ones before the first {@code FROM}, and per
 * stage) substituted into {@code FROM}, {@code COPY} and {@code USER}; {@code RUN} kept as its
 * shell text.
 */
final class Dockerfiles {
  record Copy(String from, List<String> sources, String destination) {}

  /**
   * @param runs each {@code RUN} instruction's shell text, continuations joined, as written (the
   *     shell, not Docker, expands its variables)
   */
  record Stage(
      String image,
      String alias,
      List<Copy> copies,
      List<String> users,
      List<String> entrypoint,
      List<String> runs) {}

  private static final Pattern VAR =
      Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)}|\\$([A-Za-z_][A-Za-z0-9_]*)");

  private Dockerfiles() {}

  static List<Stage> parse(Path file) throws IOException {
    List<String> instructions = new ArrayList<>();
    StringBuilder cur = new StringBuilder();
    for (String line : Files.readAllLines(file)) {
      String t = line.strip();
      if (cur.length() == 0 && (t.isEmpty() || t.startsWith("#"))) {
        continue;
      }
      if (t.startsWith("#")) {
        continue; // a comment inside a continued instruction
      }
      if (t.endsWith("\\")) {
        cur.append(t, 0, t.length() - 1).append(' ');
      } else {
        instructions.add(cur.append(t).toString().strip());
        cur.setLength(0);
      }
    }
    Map<String, String> global = new HashMap<>();
    Map<String, String> args = global;
    List<Stage> stages = new ArrayList<>();
    Stage stage = null;
    for (String ins : instructions) {
      String[] kv = ins.split("\\s+", 2);
      String op = kv[0].toUpperCase();
      String rest = kv.length > 1 ? kv[1] : "";
      switch (op) {
        case "ARG" -> {
          String[] a = rest.split("=", 2);
          args.put(
              a[0].strip(),
              a.length > 1 ? subst(a[1].strip(), args) : global.getOrDefault(a[0].strip(), ""));
        }
        case "FROM" -> {
          String[] f = subst(rest, global).split("\\s+");
          stage =
              new Stage(
                  f[0],
                  f.length >= 3 && f[1].equalsIgnoreCase("AS") ? f[2] : null,
                  new ArrayList<>(),
                  new ArrayList<>(),
                  new ArrayList<>(),
                  new ArrayList<>());
          stages.add(stage);
          args = new HashMap<>(); // a stage sees a global ARG only when it declares it again
        }
        case "COPY" -> {
          List<String> tokens = new ArrayList<>(Arrays.asList(subst(rest, args).split("\\s+")));
          String from = null;
          while (tokens.get(0).startsWith("--")) {
            String flag = tokens.remove(0);
            if (flag.startsWith("--from=")) {
              from = flag.substring("--from=".length());
            }
          }
          String dest = tokens.remove(tokens.size() - 1);
          require(stage, ins).copies().add(new Copy(from, tokens, dest));
        }
        case "USER" -> require(stage, ins).users().add(subst(rest, args).strip());
        case "ENTRYPOINT" -> require(stage, ins).entrypoint().add(rest.strip());
        case "RUN" -> require(stage, ins).runs().add(rest.strip());
        default -> {}
      }
    }
    return stages;
  }

  private static Stage require(Stage s, String ins) {
    if (s == null) {
      throw new IllegalStateException("'" + ins + "' before FROM");
    }
    return s;
  }

  private static String subst(String s, Map<String, String> args) {
    Matcher m = VAR.matcher(s);
    StringBuilder sb = new StringBuilder();
    while (m.find()) {
      String name = m.group(1) != null ? m.group(1) : m.group(2);
      String v = args.get(name);
      if (v == null) {
        throw new IllegalStateException("Undefined build argument $" + name + " in '" + s + "'");
      }
      m.appendReplacement(sb, Matcher.quoteReplacement(v));
    }
    return m.appendTail(sb).toString();
  }
}
