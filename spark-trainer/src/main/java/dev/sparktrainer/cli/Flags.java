package dev.sparktrainer.cli;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;

/**
 * The flags of one command, parsed once into typed values: {@code --name value}, {@code
 * --name=value}, boolean switches, repeatable flags and positional arguments; then a YAML config
 * file ({@code --config}) with the same keys fills in what the command line did not set (the
 * command line wins), then defaults. Every problem is a {@link CliException} with one line naming
 * the flag, the value and what is expected.
 */
final class Flags {
  /** Kinds of values, each with its parser and the words used in messages. */
  enum Kind {
    STRING("a value"),
    INT("an integer"),
    LONG("an integer"),
    DOUBLE("a number"),
    BOOL("true or false"),
    LIST("a value (repeatable)");

    final String expected;

    Kind(String expected) {
      this.expected = expected;
    }
  }

  /** One flag: its name (without {@code --}), kind, metavariable, help and default. */
  record Flag(
      String name, Kind kind, String meta, String help, String defaultValue, boolean required) {}

  private final String command;
  private final Map<String, Flag> flags = new LinkedHashMap<>();
  private final List<String> positionalNames = new ArrayList<>();
  private final Map<String, Object> values = new LinkedHashMap<>();
  private final Map<String, String> sources = new LinkedHashMap<>();
  private final List<String> positional = new ArrayList<>();

  Flags(String command) {
    this.command = command;
  }

  Flags add(String name, Kind kind, String meta, String defaultValue, String help) {
    flags.put(name, new Flag(name, kind, meta, help, defaultValue, false));
    return this;
  }

  Flags required(String name, Kind kind, String meta, String help) {
    flags.put(name, new Flag(name, kind, meta, help, null, true));
    return this;
  }

  Flags positional(String name) {
    positionalNames.add(name);
    return this;
  }

  Collection<Flag> all() {
    return flags.values();
  }

  /**
   * Parses the command line (after the command word); returns false if {@code --help} was asked.
   */
  boolean parse(String[] args, Collection<String> knownElsewhere) {
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--help") || a.equals("-h")) {
        return false;
      }
      if (!a.startsWith("--") || a.equals("--")) {
        if (positional.size() >= positionalNames.size()) {
          throw new CliException(
              "Unexpected argument '"
                  + a
                  + "' for "
                  + command
                  + ": expected --flag value pairs"
                  + (positionalNames.isEmpty()
                      ? ""
                      : " after " + String.join(" ", positionalNames)));
        }
        positional.add(a);
        continue;
      }
      String name = a.substring(2);
      String value = null;
      int eq = name.indexOf('=');
      if (eq >= 0) {
        value = name.substring(eq + 1);
        name = name.substring(0, eq);
      }
      Flag f = flags.get(name);
      if (f == null) {
        throw unknown(name, knownElsewhere);
      }
      if (value == null) {
        if (f.kind() == Kind.BOOL && (i + 1 >= args.length || !isBool(args[i + 1]))) {
          value = "true";
        } else if (i + 1 >= args.length || args[i + 1].startsWith("--")) {
          throw new CliException(
              "Missing value for --"
                  + name
                  + ": expected "
                  + f.kind().expected
                  + (f.meta() == null ? "" : " (" + f.meta() + ")"));
        } else {
          value = args[++i];
        }
      }
      set(f, value, null);
    }
    return true;
  }

  private CliException unknown(String name, Collection<String> knownElsewhere) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String candidate : flags.keySet()) {
      int d = distance(name, candidate);
      if (d < bestDistance) {
        bestDistance = d;
        best = candidate;
      }
    }
    String hint =
        best != null && bestDistance <= Math.max(2, name.length() / 3)
            ? ": did you mean --" + best + "?"
            : knownElsewhere.contains(name)
                ? ": it is not an option of " + command
                : ": see spark-trainer " + command + " --help";
    return new CliException("Unknown option --" + name + " for " + command + hint);
  }

  private static boolean isBool(String s) {
    return s.equalsIgnoreCase("true") || s.equalsIgnoreCase("false");
  }

  /** {@code file}: the config file the value came from, null for the command line. */
  private void set(Flag f, String raw, String file) {
    Object v =
        convert(
            f, raw, file == null ? "--" + f.name() : f.name(), file == null ? "" : " in " + file);
    if (f.kind() == Kind.LIST) {
      @SuppressWarnings("unchecked")
      List<String> list =
          (List<String>) values.computeIfAbsent(f.name(), k -> new ArrayList<String>());
      list.add((String) v);
    } else {
      values.put(f.name(), v);
    }
    sources.put(f.name(), file == null ? "--" + f.name() : f.name() + " (from " + file + ")");
  }

  private Object convert(Flag f, String raw, String label, String where) {
    String v = raw.trim();
    try {
      switch (f.kind()) {
        case INT:
          return Integer.parseInt(v);
        case LONG:
          return Long.parseLong(v);
        case DOUBLE:
          double d = Double.parseDouble(v);
          if (!Double.isFinite(d)) {
            throw new NumberFormatException();
          }
          return d;
        case BOOL:
          if (!isBool(v)) {
            throw new NumberFormatException();
          }
          return Boolean.parseBoolean(v);
        default:
          if (v.isEmpty()) {
            throw new CliException(
                "Invalid "
                    + label
                    + " ''"
                    + where
                    + ": expected "
                    + f.kind().expected
                    + (f.meta() == null ? "" : " (" + f.meta() + ")"));
          }
          return v;
      }
    } catch (NumberFormatException e) {
      throw new CliException(
          "Invalid " + label + " '" + raw + "'" + where + ": expected " + f.kind().expected);
    }
  }

  /**
   * Fills in values from a YAML config file: a map whose keys are this command's flag names
   * (without {@code --}); lists become comma-separated values (or repeated values for repeatable
   * flags), a map under {@code conf} becomes {@code --conf key=value} entries. Keys of other
   * commands are ignored (one file can serve train, evaluate and predict); any other key is an
   * error.
   */
  void applyConfig(String file, Collection<String> knownElsewhere) {
    Object doc;
    try (Reader r = Files.newBufferedReader(Path.of(file), StandardCharsets.UTF_8)) {
      doc = new Yaml(new SafeConstructor(new LoaderOptions())).load(r);
    } catch (NoSuchFileException e) {
      throw new CliException("Invalid --config '" + file + "': no such file");
    } catch (IOException e) {
      throw new CliException("Invalid --config '" + file + "': cannot read it: " + e.getMessage());
    } catch (YAMLException e) {
      throw new CliException(
          "Invalid --config '" + file + "': not valid YAML: " + e.getMessage().replace('\n', ' '));
    }
    if (doc == null) {
      return;
    }
    if (!(doc instanceof Map)) {
      throw new CliException(
          "Invalid --config '"
              + file
              + "': expected a map of option: value, got "
              + doc.getClass().getSimpleName().toLowerCase(Locale.ROOT));
    }
    for (Map.Entry<?, ?> e : ((Map<?, ?>) doc).entrySet()) {
      String key = String.valueOf(e.getKey());
      Flag f = flags.get(key);
      if (f == null) {
        if (knownElsewhere.contains(key)) {
          continue;
        }
        throw new CliException(
            "Unknown key '"
                + key
                + "' in config file "
                + file
                + ": expected option names of "
                + command
                + " without the dashes (see spark-trainer "
                + command
                + " --help)");
      }
      if (sources.containsKey(key)) {
        continue; // the command line wins
      }
      Object v = e.getValue();
      String source = file;
      if (v == null) {
        continue;
      }
      if (f.kind() == Kind.LIST) {
        if (v instanceof Map) {
          for (Map.Entry<?, ?> c : ((Map<?, ?>) v).entrySet()) {
            set(f, c.getKey() + "=" + c.getValue(), source);
          }
        } else if (v instanceof List) {
          for (Object item : (List<?>) v) {
            set(f, String.valueOf(item), source);
          }
        } else {
          set(f, String.valueOf(v), source);
        }
      } else if (v instanceof List) {
        List<String> items = new ArrayList<>();
        for (Object item : (List<?>) v) {
          items.add(String.valueOf(item));
        }
        set(f, String.join(",", items), source);
      } else if (v instanceof Map) {
        throw new CliException(
            "Invalid " + key + " in " + file + ": expected " + f.kind().expected + ", got a map");
      } else {
        set(f, String.valueOf(v), source);
      }
    }
  }

  /** Checks required flags (after the config file is applied). */
  void checkRequired() {
    for (Flag f : flags.values()) {
      if (f.required() && !values.containsKey(f.name())) {
        throw new CliException(
            "Missing --" + f.name() + " for " + command + ": expected " + f.help());
      }
    }
    if (positional.size() < positionalNames.size()) {
      throw new CliException(
          "Missing "
              + positionalNames.get(positional.size())
              + " for "
              + command
              + ": usage: spark-trainer "
              + command
              + " "
              + String.join(" ", positionalNames)
              + " [options]");
    }
  }

  boolean has(String name) {
    return values.containsKey(name)
        || (flags.get(name) != null && flags.get(name).defaultValue() != null);
  }

  boolean given(String name) {
    return values.containsKey(name);
  }

  /** Where a value came from ({@code --name} or {@code 'name' in FILE}), for messages. */
  String source(String name) {
    return sources.getOrDefault(name, "--" + name);
  }

  private Object value(String name) {
    Flag f = flags.get(name);
    if (f == null) {
      throw new IllegalArgumentException("No flag " + name + " in " + command);
    }
    Object v = values.get(name);
    if (v == null && f.defaultValue() != null) {
      v = convert(f, f.defaultValue(), "default of --" + name, "");
    }
    return v;
  }

  String string(String name) {
    return (String) value(name);
  }

  int integer(String name) {
    return (Integer) value(name);
  }

  long longValue(String name) {
    return (Long) value(name);
  }

  double number(String name) {
    return (Double) value(name);
  }

  boolean bool(String name) {
    Object v = value(name);
    return v != null && (Boolean) v;
  }

  @SuppressWarnings("unchecked")
  List<String> list(String name) {
    Object v = values.get(name);
    return v == null ? List.of() : (List<String>) v;
  }

  String positional(int i) {
    return positional.get(i);
  }

  /** The help text of the command. */
  String help(String usage, String description) {
    StringBuilder sb = new StringBuilder();
    sb.append("Usage: spark-trainer ").append(command).append(' ').append(usage).append("\n\n");
    sb.append(description).append("\n\nOptions:\n");
    int width = 0;
    for (Flag f : flags.values()) {
      width = Math.max(width, label(f).length());
    }
    width = Math.min(width, 34);
    for (Flag f : flags.values()) {
      String l = label(f);
      sb.append("  ").append(l);
      if (l.length() > width) {
        sb.append('\n').append(" ".repeat(width + 2));
      } else {
        sb.append(" ".repeat(width - l.length()));
      }
      String text =
          f.help()
              + (f.required()
                  ? " (required)"
                  : f.defaultValue() != null ? " (default " + f.defaultValue() + ")" : "");
      sb.append("  ").append(wrap(text, 100 - width - 4, " ".repeat(width + 4))).append('\n');
    }
    sb.append("  --help").append(" ".repeat(Math.max(1, width - 6))).append("  this help\n");
    sb.append(
        "\nEvery option can also be given in a YAML file (--config FILE) under the same name without the\n"
            + "dashes; options on the command line win.\n");
    return sb.toString();
  }

  /**
   * Word-wraps {@code text} to {@code width} columns, continuation lines indented by {@code
   * indent}.
   */
  static String wrap(String text, int width, String indent) {
    StringBuilder out = new StringBuilder();
    int col = 0;
    for (String word : text.split(" ")) {
      if (col > 0 && col + 1 + word.length() > Math.max(20, width)) {
        out.append('\n').append(indent);
        col = 0;
      } else if (col > 0) {
        out.append(' ');
        col++;
      }
      out.append(word);
      col += word.length();
    }
    return out.toString();
  }

  private static String label(Flag f) {
    return "--"
        + f.name()
        + (f.kind() == Kind.BOOL ? "" : " " + (f.meta() == null ? "VALUE" : f.meta()));
  }

  static int distance(String a, String b) {
    int[] prev = new int[b.length() + 1];
    int[] cur = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      prev[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      cur[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
      }
      int[] t = prev;
      prev = cur;
      cur = t;
    }
    return prev[b.length()];
  }
}
