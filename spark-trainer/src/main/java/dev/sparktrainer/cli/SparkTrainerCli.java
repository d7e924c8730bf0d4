package dev.sparktrainer.cli;

import dev.sparktrainer.train.job.TrainingFailedException;
import java.io.File;
import java.io.PrintStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;
import org.apache.spark.SparkException;
import org.apache.spark.sql.SparkSession;

/**
 * The command line: {@code spark-trainer COMMAND [options]} with commands {@code train}, {@code
 * evaluate}, {@code predict}, {@code inspect}, {@code convert} and {@code doctor}.
 *
 * <p>Run it with {@code bin/spark-trainer} (an embedded local Spark in this JVM unless {@code
 * --master} names a cluster), or on a cluster with {@code spark-submit --class
 * dev.sparktrainer.cli.SparkTrainerCli spark-trainer-<version>-all.jar train ...}. With {@code
 * --master spark://...} (or yarn, k8s://...) outside spark-submit it checks the options, then hands
 * the same command to {@code $SPARK_HOME/bin/spark-submit} with the shaded jar.
 *
 * <p>Exit codes: 0 success, 1 failure while running (the message names the cause), 2 bad input: an
 * unknown option, a missing column, a column of the wrong type, a path without data, labels that do
 * not match {@code --num-classes}... — one line on stderr, before Spark starts any job.
 */
public final class SparkTrainerCli {
  /** Success. */
  public static final int EXIT_OK = 0;

  /** The command failed while running. */
  public static final int EXIT_FAILURE = 1;

  /** Bad input: nothing was run. */
  public static final int EXIT_USAGE = 2;

  private static final System.Logger LOG = System.getLogger(SparkTrainerCli.class.getName());

  private final PrintStream out;
  private final PrintStream err;
  private final Map<String, String> env;
  private final Map<String, Command> commands = new LinkedHashMap<>();

  /**
   * @param out results (metrics JSON, summaries)
   * @param err progress, notes and errors
   * @param env the environment ({@code SPARK_HOME}, {@code SPARK_TRAINER_JAR})
   */
  public SparkTrainerCli(PrintStream out, PrintStream err, Map<String, String> env) {
    this.out = out;
    this.err = err;
    this.env = env;
    for (Command c :
        List.of(
            new TrainCommand(),
            new EvaluateCommand(),
            new PredictCommand(),
            new InspectCommand(),
            new ConvertCommand(),
            new DoctorCommand())) {
      commands.put(c.name, c);
    }
  }

  public static void main(String[] args) {
    int code = new SparkTrainerCli(System.out, System.err, System.getenv()).run(args);
    System.out.flush();
    if (code == EXIT_OK && underSparkSubmit()) {
      // Success under spark-submit is a normal return: YARN's cluster-mode ApplicationMaster
      // reports an
      // application whose main calls System.exit, even System.exit(0), as FAILED ("Shutdown hook
      // called
      // before final status was reported"). run() has stopped the session it started
      // (YarnTrainingIT).
      return;
    }
    System.exit(code);
  }

  /** Runs one command line; returns the exit code. */
  public int run(String[] args) {
    if (System.getProperty("ai.djl.offline") == null) {
      System.setProperty("ai.djl.offline", "true"); // never download at run time
    }
    if (System.getProperty("java.awt.headless") == null) {
      System.setProperty("java.awt.headless", "true");
    }
    if (args.length == 0
        || args[0].equals("--help")
        || args[0].equals("-h")
        || args[0].equals("help")) {
      (args.length == 0 ? err : out).print(usage());
      return args.length == 0 ? EXIT_USAGE : EXIT_OK;
    }
    if (args[0].equals("--version")) {
      out.println("spark-trainer " + version());
      return EXIT_OK;
    }
    Command command = commands.get(args[0]);
    if (command == null) {
      return fail(
          EXIT_USAGE,
          "Unknown command '"
              + args[0]
              + "': expected one of "
              + String.join(", ", commands.keySet())
              + " (spark-trainer --help)",
          null,
          false);
    }
    Flags flags = command.flags();
    boolean verbose = Arrays.asList(args).contains("--verbose");
    CliContext ctx = null;
    try {
      String[] rest = Arrays.copyOfRange(args, 1, args.length);
      if (!flags.parse(rest, otherFlags(command))) {
        out.print(flags.help(command.usage, command.description));
        return EXIT_OK;
      }
      if (flags.given("config")) {
        flags.applyConfig(flags.string("config"), otherFlags(command));
      }
      flags.checkRequired();
      for (String c : flags.list("conf")) {
        if (c.indexOf('=') <= 0) {
          throw new CliException(
              "Invalid --conf '" + c + "': expected KEY=VALUE (e.g. spark.executor.memory=4g)");
        }
      }
      Flags f = flags;
      ctx = new CliContext(out, err, env, () -> session(command, f));
      command.validate(flags, ctx);
      String master = flags.given("master") ? flags.string("master") : null;
      if (master != null && !underSparkSubmit() && !master.startsWith("local")) {
        return submit(command, flags, args);
      }
      return command.run(flags, ctx);
    } catch (CliException e) {
      return fail(EXIT_USAGE, e.getMessage(), e, verbose);
    } catch (Exception | Error e) {
      return fail(EXIT_FAILURE, failure(e), e, verbose);
    } finally {
      if (ctx != null && ctx.ownsSession()) {
        ctx.spark()
            .stop(); // under spark-submit too: main then returns (see main) with nothing running
      }
    }
  }

  private int fail(int code, String message, Throwable e, boolean verbose) {
    err.println("error: " + message.replace('\n', ' '));
    if (e != null && verbose) {
      e.printStackTrace(err);
    } else if (code == EXIT_FAILURE) {
      err.println("(run with --verbose for the stack trace)");
    }
    return code;
  }

  /**
   * The most telling message of a failure: the root cause, with what wrapped it if that says more.
   */
  static String failure(Throwable e) {
    if (e instanceof TrainingFailedException) {
      return DataChecks.firstLine(
          e); // leads with the failed task's own error (rank, peer, address)
    }
    if (!(e instanceof SparkException) && e.getCause() instanceof SparkException) {
      // The trainer's own error about a failed Spark job (a task failure it would not retry): its
      // message is the task's; Spark's cause only says the job was cancelled.
      return DataChecks.firstLine(e);
    }
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String msg = DataChecks.firstLine(root);
    if (e instanceof SparkException && root != e) {
      return "Spark job failed: " + msg;
    }
    return root == e ? msg : msg + " (" + e.getClass().getSimpleName() + ")";
  }

  /** Flag names of the other commands: a config file may hold them. */
  private Set<String> otherFlags(Command self) {
    Set<String> out = new LinkedHashSet<>();
    for (Command c : commands.values()) {
      if (c != self) {
        c.flags().all().forEach(fl -> out.add(fl.name()));
      }
    }
    return out;
  }

  private static final String CLEANER_BLOCKING = "spark.cleaner.referenceTracking.blocking";

  /** Spark-submit puts the application's configuration into system properties. */
  static boolean underSparkSubmit() {
    return System.getProperty("spark.master") != null;
  }

  /** The session: spark-submit's, or an embedded local one with enough task slots. */
  private SparkSession session(Command command, Flags f) {
    SparkSession.Builder b = SparkSession.builder();
    if (System.getProperty("spark.app.name") == null) {
      b.appName("spark-trainer " + command.name); // else spark-submit's --name, which YARN lists
    }
    if (!underSparkSubmit()) {
      int cores = Runtime.getRuntime().availableProcessors();
      String master =
          f.given("master")
              ? f.string("master")
              : "local[" + Math.max(command.slots(f), cores) + "]";
      b.master(master)
          .config("spark.driver.host", "127.0.0.1")
          .config("spark.driver.bindAddress", "127.0.0.1")
          .config("spark.ui.showConsoleProgress", "false") // our own progress bar instead
          .config("spark.sql.shuffle.partitions", String.valueOf(Math.max(2, command.slots(f))));
    }
    // Spark's cleaner removes a collected broadcast from every executor and, by default, waits for
    // each reply (up to spark.rpc.askTimeout, 120 s), and stopping the context waits for it: after
    // a
    // training failure caused by a frozen executor the driver would hang that long before exiting.
    // Without the wait, cleanup is the same and a failed run ends at once. A user's setting wins.
    if (System.getProperty(CLEANER_BLOCKING) == null
        && f.list("conf").stream()
            .noneMatch(c -> c.substring(0, c.indexOf('=')).trim().equals(CLEANER_BLOCKING))) {
      b.config(CLEANER_BLOCKING, "false");
    }
    for (String c : f.list("conf")) {
      int eq = c.indexOf('=');
      b.config(c.substring(0, eq).trim(), c.substring(eq + 1).trim());
    }
    SparkSession spark = b.getOrCreate();
    if (!f.bool("verbose")) {
      spark.sparkContext().setLogLevel("WARN");
    } else {
      // What bin/log4j2.properties keeps off the console (the ring's per-link lines, Spark's
      // notices).
      Configurator.setLevel("dev.sparktrainer.collective", Level.INFO);
      Configurator.setLevel("org.apache.spark.util.SparkStringUtils", Level.WARN);
    }
    return spark;
  }

  /** Hands the command to {@code spark-submit} with the shaded jar; returns its exit code. */
  private int submit(Command command, Flags flags, String[] args) throws Exception {
    String submit = sparkSubmit();
    String jar = shadedJar();
    List<String> cmd = new ArrayList<>();
    cmd.add(submit);
    cmd.add("--master");
    cmd.add(flags.string("master"));
    cmd.add("--class");
    cmd.add(SparkTrainerCli.class.getName());
    cmd.add("--name");
    cmd.add("spark-trainer " + command.name);
    // DJL must never try to download at run time; the drivers and executors get the flag.
    cmd.add("--conf");
    cmd.add("spark.driver.extraJavaOptions=-Dai.djl.offline=true");
    cmd.add("--conf");
    cmd.add("spark.executor.extraJavaOptions=-Dai.djl.offline=true");
    for (String c : flags.list("conf")) {
      cmd.add("--conf");
      cmd.add(c);
    }
    cmd.add(jar);
    cmd.add(command.name);
    for (int i = 1; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--master") || a.equals("--conf")) {
        i++;
      } else if (!a.startsWith("--master=") && !a.startsWith("--conf=")) {
        cmd.add(a);
      }
    }
    err.println(
        "Submitting to "
            + flags.string("master")
            + ": "
            + String.join(
                " ", cmd.stream().map(a -> a.contains(" ") ? "'" + a + "'" : a).toList()));
    ProcessBuilder pb = new ProcessBuilder(cmd).inheritIO();
    Process p = pb.start();
    return p.waitFor();
  }

  private String sparkSubmit() {
    String home = env.get("SPARK_HOME");
    if (home != null && !home.isBlank()) {
      File f = new File(home, "bin/spark-submit");
      if (f.canExecute()) {
        return f.getPath();
      }
      throw new CliException(
          "SPARK_HOME="
              + home
              + " has no executable bin/spark-submit: expected a Spark"
              + " installation (to submit to --master)");
    }
    String path = env.getOrDefault("PATH", "");
    for (String dir : path.split(File.pathSeparator)) {
      File f = new File(dir, "spark-submit");
      if (!dir.isEmpty() && f.canExecute()) {
        return f.getPath();
      }
    }
    throw new CliException(
        "--master needs Spark's spark-submit: set SPARK_HOME or put spark-submit on the PATH"
            + " (or leave out --master to run on the embedded local Spark)");
  }

  /**
   * The shaded jar: SPARK_TRAINER_JAR, this jar if it is the shaded one, or the one built next to
   * it.
   */
  private String shadedJar() {
    String explicit = env.get("SPARK_TRAINER_JAR");
    if (explicit != null && !explicit.isBlank()) {
      if (!new File(explicit).isFile()) {
        throw new CliException(
            "SPARK_TRAINER_JAR="
                + explicit
                + " is not a file: expected the shaded"
                + " spark-trainer-<version>-all.jar");
      }
      return explicit;
    }
    try {
      File self =
          new File(
              SparkTrainerCli.class.getProtectionDomain().getCodeSource().getLocation().toURI());
      if (self.isFile() && self.getName().endsWith("-all.jar")) {
        return self.getPath();
      }
      File dir =
          self.isFile() ? self.getParentFile() : self.getParentFile(); // target/ for target/classes
      File[] found =
          dir == null
              ? null
              : dir.listFiles((d, n) -> n.startsWith("spark-trainer-") && n.endsWith("-all.jar"));
      if (found != null && found.length > 0) {
        return found[0].getPath();
      }
    } catch (URISyntaxException | SecurityException | NullPointerException e) {
      LOG.log(System.Logger.Level.DEBUG, "Cannot locate this jar: " + e);
    }
    throw new CliException(
        "No shaded jar to submit: build it (mvn -pl spark-trainer -am package -DskipTests)"
            + " or set SPARK_TRAINER_JAR to spark-trainer-<version>-all.jar");
  }

  private static String version() {
    String v = SparkTrainerCli.class.getPackage().getImplementationVersion();
    return v == null ? "(development build)" : v;
  }

  /** The overview printed by {@code --help}. */
  String usage() {
    StringBuilder sb = new StringBuilder();
    sb.append(
        "Usage: spark-trainer COMMAND [options]   (spark-trainer COMMAND --help for its options)\n\n");
    sb.append(
        "Distributed deep-learning training on Spark (synchronous data parallelism, DJL/PyTorch).\n\n");
    sb.append("Commands:\n");
    Map<String, String> summaries =
        Map.of(
            "train",
                "train a model with N synchronous workers: model, metrics.json, TensorBoard logs, plot",
            "evaluate", "loss and accuracy of a trained model on labelled data, as JSON",
            "predict",
                "distributed batch inference: Parquet with prediction and probability columns",
            "inspect", "a TFRecord dataset's schema, record count and first records",
            "convert", "CSV or Parquet to sharded TFRecord files (optionally a train/test split)",
            "doctor", "whether PyTorch trains here: libtorch, JNI, CUDA, one step per device");
    for (Command c : commands.values()) {
      sb.append(
          String.format(Locale.ROOT, "  %-9s %s%n", c.name, summaries.getOrDefault(c.name, "")));
    }
    sb.append(
        "\nWithout --master every command runs on an embedded local Spark in this process (CPU);\n"
            + "with --master spark://HOST:PORT (or yarn, k8s://...) it is submitted through spark-submit.\n"
            + "Options can also come from a YAML file: --config FILE (same names without dashes; flags win).\n"
            + "Exit codes: 0 success, 1 failure while running, 2 bad input (nothing was run).\n");
    return new String(sb.toString().getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
  }
}
