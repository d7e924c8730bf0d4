package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;

/** One command of the command line: its flags, help, and what it does. */
abstract class Command {
  final String name;
  final String usage;
  final String description;

  Command(String name, String usage, String description) {
    this.name = name;
    this.usage = usage;
    this.description = description;
  }

  /** The command's flags, with the Spark flags every command has. */
  Flags flags() {
    Flags f = new Flags(name);
    define(f);
    f.add(
        "master",
        Kind.STRING,
        "URL",
        null,
        "Spark master: without it, an embedded local Spark in this process (CPU); local[N] runs embedded too;"
            + " any other URL (spark://, yarn, k8s://) submits through $SPARK_HOME/bin/spark-submit");
    f.add("conf", Kind.LIST, "KEY=VALUE", null, "a Spark configuration entry (repeatable)");
    f.add(
        "config",
        Kind.STRING,
        "FILE",
        null,
        "a YAML file of options (same names, without the dashes)");
    f.add("verbose", Kind.BOOL, null, null, "print stack traces and Spark's own warnings");
    return f;
  }

  abstract void define(Flags f);

  /** Checks that need no Spark (called before any session starts); throws {@link CliException}. */
  void validate(Flags f, CliContext ctx) {}

  /** Runs the command; returns the exit code. */
  abstract int run(Flags f, CliContext ctx) throws Exception;

  /** How many task slots the embedded Spark needs (training: one per worker). */
  int slots(Flags f) {
    return 2;
  }
}
