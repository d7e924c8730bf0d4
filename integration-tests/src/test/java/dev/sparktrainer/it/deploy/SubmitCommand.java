package dev.sparktrainer.it.deploy;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A spark-submit command line, parsed the way spark-submit reads it (the options deploy/ uses). */
public record SubmitCommand(
    Map<String, String> options, Map<String, String> conf, String jar, List<String> appArgs) {
  private static final List<String> WITH_VALUE =
      List.of(
          "--master",
          "--deploy-mode",
          "--name",
          "--class",
          "--queue",
          "--files",
          "--jars",
          "--conf");

  /** {@code args}: what follows the spark-submit binary. */
  public static SubmitCommand parse(List<String> args) {
    Map<String, String> options = new LinkedHashMap<>();
    Map<String, String> conf = new LinkedHashMap<>();
    int i = 0;
    for (; i < args.size() && args.get(i).startsWith("--"); i++) {
      String a = args.get(i);
      if (!WITH_VALUE.contains(a)) {
        throw new IllegalArgumentException("Unexpected spark-submit option " + a + " in " + args);
      }
      if (i + 1 >= args.size()) {
        throw new IllegalArgumentException("No value for " + a + " in " + args);
      }
      String v = args.get(++i);
      if (a.equals("--conf")) {
        int eq = v.indexOf('=');
        if (eq <= 0) {
          throw new IllegalArgumentException("--conf " + v + " is not KEY=VALUE");
        }
        if (conf.put(v.substring(0, eq), v.substring(eq + 1)) != null) {
          throw new IllegalArgumentException("--conf " + v.substring(0, eq) + " given twice");
        }
      } else if (options.put(a, v) != null) {
        throw new IllegalArgumentException(a + " given twice in " + args);
      }
    }
    if (i >= args.size()) {
      throw new IllegalArgumentException("No application jar in " + args);
    }
    return new SubmitCommand(
        options, conf, args.get(i), new ArrayList<>(args.subList(i + 1, args.size())));
  }

  public String option(String name) {
    return options.get(name);
  }

  /** The value after {@code flag} in the application's arguments, or null. */
  public String appArg(String flag) {
    int i = appArgs.indexOf(flag);
    return i < 0 || i + 1 >= appArgs.size() ? null : appArgs.get(i + 1);
  }
}
