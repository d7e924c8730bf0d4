package dev.sparktrainer.cluster;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A Spark standalone cluster of separate JVMs on this machine, from Spark's Maven jars (no Spark
 * download): a {@code Master} and N {@code Worker}s on 127.0.0.1, and applications submitted with
 * {@code SparkSubmit} in client mode, each driver its own JVM; the workers launch one executor JVM
 * per application. For integration tests and benchmarks that need what local mode cannot give:
 * executors in different processes (DJL's per-process state, real serialization, real sockets).
 *
 * <pre>{@code
 * try (StandaloneCluster cluster = StandaloneCluster.builder()
 *         .setSparkHome(sparkHome)                  // jars/: Spark's runtime (copy-dependencies)
 *         .setWorkDir(dir).optWorkers(2).optCoresPerWorker(1)
 *         .optJavaOptions(sparkJavaOpens).build().start()) {
 *   StandaloneCluster.Application app = cluster.submit(StandaloneCluster.submission()
 *       .setMainClass("my.Main").setAppJar(appJar).addJars(djlJars)
 *       .conf("spark.executor.extraJavaOptions", "-Dai.djl.offline=true").args("--x", "1").build());
 *   int exit = app.waitFor(Duration.ofMinutes(10));
 * }   // stops the drivers, workers (and their executors) and the master, by process id
 * }</pre>
 *
 * <p>{@code SPARK_HOME} (with a {@code RELEASE} file, created if missing) and {@code
 * SPARK_SCALA_VERSION} are set for every process: without them the workers cannot build the
 * executors' class path ("Cannot find any build directories"). The process ids are also appended to
 * {@code <workDir>/pids} so a script can stop them if this JVM is killed before {@link #close()}.
 */
public final class StandaloneCluster implements AutoCloseable {
  private static final String HOST = "127.0.0.1";
  private static final Pattern ALIVE = Pattern.compile("\"aliveworkers\"\\s*:\\s*(\\d+)");

  /**
   * Set to the worker's index (0, 1, ...) in each worker's environment, which the worker passes on
   * to what it runs (resource discovery scripts, executors): per-worker behaviour in tests.
   */
  public static final String WORKER_INDEX_ENV = "STANDALONE_CLUSTER_WORKER";

  private final Builder cfg;
  private final List<Process> processes = Collections.synchronizedList(new ArrayList<>());
  private final List<Process> workerProcesses = new ArrayList<>();
  private final Thread shutdownHook = new Thread(this::stopAll, "standalone-cluster-shutdown");
  private int masterPort;
  private int masterUiPort;
  private volatile boolean closed;

  private StandaloneCluster(Builder cfg) {
    this.cfg = cfg;
  }

  /** A builder: {@code setX} for required values, {@code optX} for optional ones. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder of an application to {@link #submit}. */
  public static Submission.Builder submission() {
    return new Submission.Builder();
  }

  /**
   * Makes {@code home} a Spark home for the given runtime jars (Spark, Scala, Hadoop client and
   * their dependencies): {@code home/jars} holds links to them, and a {@code RELEASE} file. For
   * tests that take the jars from their own class path.
   */
  public static Path sparkHomeOf(Path home, Collection<Path> runtimeJars) throws IOException {
    Path jars = Files.createDirectories(home.resolve("jars"));
    for (Path jar : runtimeJars) {
      Path link = jars.resolve(jar.getFileName());
      if (!Files.exists(link, LinkOption.NOFOLLOW_LINKS)) {
        Files.createSymbolicLink(link, jar.toAbsolutePath());
      }
    }
    writeRelease(home);
    return home;
  }

  /**
   * Writes the class files under {@code classesDir} into {@code jar} (an application jar for
   * tests).
   */
  public static Path jarOf(Path classesDir, Path jar) throws IOException {
    Files.createDirectories(jar.toAbsolutePath().getParent());
    Path tmp = jar.resolveSibling(jar.getFileName() + ".tmp");
    try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(tmp));
        Stream<Path> files = Files.walk(classesDir)) {
      for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile).sorted()::iterator) {
        out.putNextEntry(new JarEntry(classesDir.relativize(f).toString().replace('\\', '/')));
        Files.copy(f, out);
        out.closeEntry();
      }
    }
    return Files.move(tmp, jar, StandardCopyOption.REPLACE_EXISTING);
  }

  /** Starts the master and the workers, and waits until every worker has registered. */
  public StandaloneCluster start() throws IOException, InterruptedException {
    Files.createDirectories(cfg.workDir);
    writeRelease(cfg.sparkHome);
    Runtime.getRuntime().addShutdownHook(shutdownHook);
    boolean started = false;
    try {
      // Port 0: the master binds what the kernel gives it, and its ports are read from the process
      // itself. A port probed free here and passed on could be taken (by a worker's RPC port, in
      // one benchmark run) before the master bound it.
      Process master =
          launch(
              "master",
              // No REST submission server: it binds a fixed port (6066), and applications are
              // submitted in client mode.
              List.of("-Xmx" + cfg.daemonHeap, "-Dspark.master.rest.enabled=false"),
              "org.apache.spark.deploy.master.Master",
              List.of("--host", HOST, "--port", "0", "--webui-port", "0"));
      long deadline = System.nanoTime() + cfg.startTimeout.toNanos();
      readMasterPorts(master, deadline);
      for (int w = 0; w < cfg.workers; w++) {
        launchWorker(w);
      }
      int alive = -1;
      while (alive < cfg.workers) {
        for (Process p : processes) {
          if (!p.isAlive()) {
            throw new IllegalStateException(
                "A cluster process exited at start-up ("
                    + p.info().commandLine().orElse("pid " + p.pid())
                    + "); see the logs in "
                    + logDir());
          }
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(
              "The standalone cluster did not start in "
                  + cfg.startTimeout
                  + ": "
                  + Math.max(alive, 0)
                  + " of "
                  + cfg.workers
                  + " workers alive at "
                  + masterUrl()
                  + " (master pid "
                  + master.pid()
                  + "); see the logs in "
                  + logDir());
        }
        alive = aliveWorkers();
        if (alive < cfg.workers) {
          Thread.sleep(250); // daemons register asynchronously: poll the master with a deadline
        }
      }
      started = true;
      return this;
    } finally {
      if (!started) {
        close();
      }
    }
  }

  private static final Pattern MASTER_URL =
      Pattern.compile("\"url\"\\s*:\\s*\"spark://" + Pattern.quote(HOST) + ":(\\d+)\"");

  /**
   * Waits until the master answers: of the TCP ports its process listens on, the one that serves
   * the master's {@code /json/} is its web UI, and the {@code url} there names its RPC port.
   */
  private void readMasterPorts(Process master, long deadline)
      throws IOException, InterruptedException {
    while (true) {
      if (!master.isAlive()) {
        throw new IllegalStateException(
            "The master exited at start-up (exit " + master.exitValue() + "); see " + logDir());
      }
      for (int port : listeningPorts(master.pid())) {
        Optional<String> json = masterJson(port);
        Matcher m = json.map(MASTER_URL::matcher).orElse(null);
        if (m != null && m.find()) {
          masterUiPort = port;
          masterPort = Integer.parseInt(m.group(1));
          return;
        }
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "The standalone master (pid "
                + master.pid()
                + ") did not serve its web UI in "
                + cfg.startTimeout
                + " (listening on "
                + listeningPorts(master.pid())
                + "); see the logs in "
                + logDir());
      }
      Thread.sleep(100); // the master binds its ports as it starts: poll with a deadline
    }
  }

  /** The body of {@code GET http://127.0.0.1:port/json/} if it answers 200, else empty. */
  private static Optional<String> masterJson(int port) throws InterruptedException {
    try {
      HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create("http://" + HOST + ":" + port + "/json/"))
                  .timeout(Duration.ofSeconds(5))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 200 ? Optional.of(r.body()) : Optional.empty();
    } catch (IOException e) {
      return Optional.empty(); // not HTTP (the RPC port), or not ready yet
    }
  }

  /**
   * The TCP ports process {@code pid} listens on (Linux): the socket inodes among its open files
   * ({@code /proc/PID/fd}) matched against the listening sockets of {@code /proc/net/tcp} and
   * {@code tcp6}. Empty if the process is gone.
   */
  static java.util.Set<Integer> listeningPorts(long pid) throws IOException {
    java.util.Set<String> inodes = new java.util.HashSet<>();
    try (Stream<Path> fds = Files.list(Path.of("/proc", Long.toString(pid), "fd"))) {
      for (Path fd : (Iterable<Path>) fds::iterator) {
        try {
          String target = Files.readSymbolicLink(fd).toString();
          if (target.startsWith("socket:[")) {
            inodes.add(target.substring("socket:[".length(), target.length() - 1));
          }
        } catch (IOException e) {
          // the descriptor was closed while listing
        }
      }
    } catch (java.nio.file.NoSuchFileException e) {
      return java.util.Set.of();
    }
    java.util.Set<Integer> ports = new java.util.TreeSet<>();
    for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
      Path t = Path.of(table);
      if (!Files.exists(t)) {
        continue;
      }
      for (String line : Files.readAllLines(t, StandardCharsets.US_ASCII)) {
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        String[] f = line.strip().split("\\s+");
        if (f.length > 9 && f[3].equals("0A") && inodes.contains(f[9])) { // 0A: LISTEN
          String local = f[1];
          ports.add(Integer.parseInt(local.substring(local.lastIndexOf(':') + 1), 16));
        }
      }
    }
    return ports;
  }

  /** The port of the master's web UI (its {@code /json/} says which workers are alive). */
  public int masterUiPort() {
    return masterUiPort;
  }

  /** The master's process id. */
  long masterPid() {
    return processes.get(0).pid();
  }

  /** {@code spark://127.0.0.1:port}. */
  public String masterUrl() {
    return "spark://" + HOST + ":" + masterPort;
  }

  public Path sparkHome() {
    return cfg.sparkHome;
  }

  /**
   * Where each process's output goes ({@code <name>.log}). Executor logs are under the workers'
   * dirs.
   */
  public Path logDir() {
    return cfg.workDir.resolve("logs");
  }

  /**
   * Worker {@code w}'s work directory: executors' logs are in {@code <app-id>/<executor-id>/stderr}
   * under it.
   */
  public Path workerDir(int w) {
    return cfg.workDir.resolve("worker-" + w);
  }

  /**
   * The executor JVMs running now: the live descendants of this cluster's worker processes (a
   * worker launches one per application, and a new one when an executor dies).
   */
  public List<ProcessHandle> executors() {
    List<ProcessHandle> out = new ArrayList<>();
    for (Process w : workerProcesses) {
      w.descendants()
          .filter(ProcessHandle::isAlive)
          .filter(h -> h.info().commandLine().orElse("").contains("CoarseGrainedExecutorBackend"))
          .forEach(out::add);
    }
    return out;
  }

  private void launchWorker(int w) throws IOException {
    Path dir = Files.createDirectories(workerDir(w));
    List<String> jvm = new ArrayList<>(List.of("-Xmx" + cfg.daemonHeap));
    cfg.workerConf.forEach(
        (k, v) -> jvm.add("-D" + k + "=" + v)); // SparkConf reads spark.* properties
    workerProcesses.add(
        launch(
            "worker-" + w,
            jvm,
            "org.apache.spark.deploy.worker.Worker",
            List.of(
                "--host",
                HOST,
                "--cores",
                Integer.toString(cfg.coresPerWorker),
                "--memory",
                cfg.memoryPerWorker,
                "--work-dir",
                dir.toString(),
                "--webui-port",
                "0",
                masterUrl()),
            Map.of(WORKER_INDEX_ENV, Integer.toString(w))));
  }

  /**
   * Starts one more worker (a machine joining the cluster); returns its index once the master
   * counts it alive.
   */
  public int addWorker() throws IOException, InterruptedException {
    int w = workerProcesses.size();
    launchWorker(w);
    long live = workerProcesses.stream().filter(Process::isAlive).count();
    long deadline = System.nanoTime() + cfg.startTimeout.toNanos();
    // (A killed worker counts as alive until the master's worker timeout: at least as many as
    // live.)
    while (aliveWorkers() < live) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "Worker " + w + " did not register in " + cfg.startTimeout + "; see " + logDir());
      }
      Thread.sleep(250); // the worker registers asynchronously: poll the master with a deadline
    }
    return w;
  }

  /** Number of worker processes this cluster started. */
  public int workerCount() {
    return workerProcesses.size();
  }

  /** The index of the worker whose descendant is the process {@code pid}, or -1. */
  public int workerOf(long pid) {
    for (int w = 0; w < workerProcesses.size(); w++) {
      if (workerProcesses.get(w).descendants().anyMatch(h -> h.pid() == pid)) {
        return w;
      }
    }
    return -1;
  }

  /**
   * Kills worker {@code w} for good, as a lost machine: SIGKILL to its descendants (its executors)
   * and to the worker itself, by process id, waiting until they have exited. Returns their pids.
   */
  public List<Long> killWorker(int w) throws InterruptedException {
    Process worker = workerProcesses.get(w);
    List<ProcessHandle> tree = new ArrayList<>(worker.descendants().toList());
    tree.add(worker.toHandle());
    tree.forEach(ProcessHandle::destroyForcibly);
    List<Long> pids = new ArrayList<>();
    for (ProcessHandle h : tree) {
      try {
        h.onExit().get(30, TimeUnit.SECONDS);
      } catch (ExecutionException | TimeoutException e) {
        throw new IllegalStateException(
            "process " + h.pid() + " of worker " + w + " did not exit after SIGKILL", e);
      }
      pids.add(h.pid());
    }
    return pids;
  }

  /**
   * The executor JVM with process id {@code pid}, if it is one of this cluster's (see {@link
   * #executors()}).
   */
  public Optional<ProcessHandle> executor(long pid) {
    return executors().stream().filter(h -> h.pid() == pid).findFirst();
  }

  /** Workers the master reports alive (-1 if the master does not answer). */
  public int aliveWorkers() {
    try {
      Matcher m = masterJson(masterUiPort).map(ALIVE::matcher).orElse(null);
      return m != null && m.find() ? Integer.parseInt(m.group(1)) : -1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }

  /** Submits an application (client mode: its driver is a new JVM, a child of this one). */
  public Application submit(Submission s) throws IOException {
    if (closed) {
      throw new IllegalStateException("The cluster is closed");
    }
    List<String> args =
        new ArrayList<>(
            List.of(
                "--master",
                masterUrl(),
                "--deploy-mode",
                "client",
                "--class",
                s.mainClass,
                "--name",
                s.name));
    if (!s.jars.isEmpty()) {
      args.add("--jars");
      args.add(
          s.jars.stream().map(p -> p.toAbsolutePath().toString()).collect(Collectors.joining(",")));
    }
    Map<String, String> conf = new LinkedHashMap<>();
    conf.put("spark.driver.host", HOST);
    conf.put("spark.driver.bindAddress", HOST);
    conf.put("spark.ui.enabled", "false");
    conf.putAll(s.conf);
    conf.forEach(
        (k, v) -> {
          args.add("--conf");
          args.add(k + "=" + v);
        });
    args.add(s.appJar.toAbsolutePath().toString());
    args.addAll(s.args);
    List<String> jvm = new ArrayList<>(List.of("-Xmx" + s.driverHeap));
    jvm.addAll(s.driverJavaOptions);
    Process p = launch("driver-" + s.name, jvm, "org.apache.spark.deploy.SparkSubmit", args);
    return new Application(p, logDir().resolve("driver-" + s.name + ".log"));
  }

  private Process launch(String name, List<String> extraJvm, String mainClass, List<String> args)
      throws IOException {
    return launch(name, extraJvm, mainClass, args, Map.of());
  }

  private Process launch(
      String name,
      List<String> extraJvm,
      String mainClass,
      List<String> args,
      Map<String, String> extraEnv)
      throws IOException {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(cfg.javaOptions);
    cmd.addAll(extraJvm);
    cmd.add("-cp");
    cmd.add(cfg.sparkHome.resolve("jars") + "/*");
    cmd.add(mainClass);
    cmd.addAll(args);
    Path log = Files.createDirectories(logDir()).resolve(name + ".log");
    ProcessBuilder pb =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.to(log.toFile()));
    Map<String, String> env = pb.environment();
    env.put("SPARK_HOME", cfg.sparkHome.toAbsolutePath().toString());
    env.put("SPARK_SCALA_VERSION", cfg.scalaBinaryVersion);
    env.put("SPARK_LOCAL_IP", HOST);
    env.put("SPARK_LOCAL_DIRS", Files.createDirectories(cfg.workDir.resolve("local")).toString());
    env.putAll(cfg.environment);
    env.putAll(extraEnv);
    Process p = pb.start();
    processes.add(p);
    Files.writeString(
        cfg.workDir.resolve("pids"),
        p.pid() + " " + name + "\n",
        StandardCharsets.UTF_8,
        StandardOpenOption.CREATE,
        StandardOpenOption.APPEND);
    return p;
  }

  /**
   * Stops every process this cluster started (executors, drivers, workers, master), by process id.
   */
  @Override
  public void close() {
    closed = true;
    stopAll();
    try {
      Runtime.getRuntime().removeShutdownHook(shutdownHook);
    } catch (IllegalStateException | IllegalArgumentException e) {
      // the JVM is shutting down (the hook is running) or the hook was never added
    }
  }

  private void stopAll() {
    List<Process> all;
    synchronized (processes) {
      all = new ArrayList<>(processes);
    }
    Collections.reverse(all); // drivers first, then workers (with their executors), the master last
    for (Process p : all) {
      stop(p.toHandle());
    }
  }

  /**
   * SIGTERM to the process's descendants and the process, SIGKILL to whatever is left after 15 s.
   */
  static void stop(ProcessHandle p) {
    List<ProcessHandle> tree = new ArrayList<>(p.descendants().toList());
    tree.add(p);
    tree.forEach(ProcessHandle::destroy);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    for (ProcessHandle h : tree) {
      try {
        h.onExit().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (Exception e) {
        h.destroyForcibly();
      }
    }
  }

  private static void writeRelease(Path home) throws IOException {
    Path release = home.resolve("RELEASE");
    if (!Files.exists(release)) {
      Files.writeString(release, "Spark runtime from Maven jars (spark-trainer test cluster)\n");
    }
  }

  /** A submitted application: its driver process. */
  public static final class Application {
    private final Process process;
    private final Path log;

    Application(Process process, Path log) {
      this.process = process;
      this.log = log;
    }

    public long pid() {
      return process.pid();
    }

    /** Whether the driver is still running. */
    public boolean isAlive() {
      return process.isAlive();
    }

    /** SIGKILL to the driver JVM (a crash of the machine or process running spark-submit). */
    public void kill() throws InterruptedException {
      process.destroyForcibly();
      process.waitFor();
    }

    /** The driver's combined stdout and stderr. */
    public Path log() {
      return log;
    }

    /** Waits for the driver to exit; stops it (and its children) and throws if it takes longer. */
    public int waitFor(Duration timeout) throws InterruptedException {
      if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        stop(process.toHandle());
        throw new IllegalStateException(
            "The application did not finish in "
                + timeout
                + " (driver pid "
                + process.pid()
                + ", stopped); see "
                + log);
      }
      return process.exitValue();
    }

    /** The last {@code lines} lines of the driver's log. */
    public String logTail(int lines) {
      try {
        List<String> all = Files.readAllLines(log, StandardCharsets.UTF_8);
        return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
      } catch (IOException e) {
        return "(cannot read " + log + ": " + e.getMessage() + ")";
      }
    }
  }

  /** What to submit: main class, application jar, extra jars, Spark configuration, arguments. */
  public static final class Submission {
    private final String mainClass;
    private final String name;
    private final Path appJar;
    private final List<Path> jars;
    private final Map<String, String> conf;
    private final List<String> args;
    private final String driverHeap;
    private final List<String> driverJavaOptions;

    private Submission(Builder b) {
      this.mainClass = b.mainClass;
      this.name = b.name;
      this.appJar = b.appJar;
      this.jars = List.copyOf(b.jars);
      this.conf = Collections.unmodifiableMap(new LinkedHashMap<>(b.conf));
      this.args = List.copyOf(b.args);
      this.driverHeap = b.driverHeap;
      this.driverJavaOptions = List.copyOf(b.driverJavaOptions);
    }

    /** Builder of a {@link Submission}. */
    public static final class Builder {
      private String mainClass;
      private String name = "app";
      private Path appJar;
      private final List<Path> jars = new ArrayList<>();
      private final Map<String, String> conf = new LinkedHashMap<>();
      private final List<String> args = new ArrayList<>();
      private String driverHeap = "1g";
      private final List<String> driverJavaOptions = new ArrayList<>();

      /** The application's main class. Required. */
      public Builder setMainClass(String mainClass) {
        this.mainClass = mainClass;
        return this;
      }

      /** The jar holding the main class (SparkSubmit's primary resource). Required. */
      public Builder setAppJar(Path jar) {
        this.appJar = jar;
        return this;
      }

      /** Application name, also the driver's log file name. Default "app". */
      public Builder optName(String name) {
        this.name = name;
        return this;
      }

      /** Jars for the driver and the executors ({@code --jars}). */
      public Builder addJars(Collection<Path> jars) {
        this.jars.addAll(jars);
        return this;
      }

      /** A Spark configuration entry ({@code --conf key=value}). */
      public Builder conf(String key, String value) {
        conf.put(key, value);
        return this;
      }

      /** Arguments of the main class. */
      public Builder args(String... args) {
        this.args.addAll(List.of(args));
        return this;
      }

      /** The driver JVM's maximum heap. Default 1g. */
      public Builder optDriverHeap(String heap) {
        this.driverHeap = heap;
        return this;
      }

      /** Extra flags of the driver JVM (after the cluster's own Java options). */
      public Builder optDriverJavaOptions(List<String> options) {
        this.driverJavaOptions.addAll(options);
        return this;
      }

      public Submission build() {
        Objects.requireNonNull(mainClass, "mainClass: setMainClass is required");
        Objects.requireNonNull(appJar, "appJar: setAppJar is required");
        return new Submission(this);
      }
    }
  }

  /** Builder of a {@link StandaloneCluster}; {@link #start()} validates and starts it. */
  public static final class Builder {
    private Path sparkHome;
    private Path workDir;
    private int workers = 2;
    private int coresPerWorker = 1;
    private String memoryPerWorker = "2g";
    private String daemonHeap = "512m";
    private String scalaBinaryVersion = "2.13";
    private Duration startTimeout = Duration.ofSeconds(90);
    private final List<String> javaOptions = new ArrayList<>();
    private final Map<String, String> environment = new LinkedHashMap<>();
    private final Map<String, String> workerConf = new LinkedHashMap<>();

    /** A directory whose {@code jars/} holds Spark's runtime jars. Required. */
    public Builder setSparkHome(Path home) {
      this.sparkHome = home.toAbsolutePath();
      return this;
    }

    /** Where logs, worker directories and the pid list go. Required. */
    public Builder setWorkDir(Path dir) {
      this.workDir = dir.toAbsolutePath();
      return this;
    }

    /** Number of worker JVMs. Default 2. */
    public Builder optWorkers(int workers) {
      this.workers = workers;
      return this;
    }

    /** Cores each worker offers ({@code --cores}). Default 1. */
    public Builder optCoresPerWorker(int cores) {
      this.coresPerWorker = cores;
      return this;
    }

    /** Memory each worker offers to executors ({@code --memory}). Default 2g. */
    public Builder optMemoryPerWorker(String memory) {
      this.memoryPerWorker = memory;
      return this;
    }

    /** Heap of the master and worker daemons. Default 512m. */
    public Builder optDaemonHeap(String heap) {
      this.daemonHeap = heap;
      return this;
    }

    /**
     * JVM flags for every JVM this starts (e.g. Spark's {@code --add-opens} list, a log4j config).
     */
    public Builder optJavaOptions(List<String> options) {
      this.javaOptions.addAll(options);
      return this;
    }

    /** An environment variable for every process (the workers pass theirs to executors). */
    public Builder optEnvironment(String name, String value) {
      this.environment.put(name, value);
      return this;
    }

    /**
     * A Spark configuration entry of the workers (e.g. {@code spark.worker.resource.gpu.amount} and
     * {@code spark.worker.resource.gpu.discoveryScript}), given to their JVMs as a system property.
     */
    public Builder optWorkerConf(String key, String value) {
      this.workerConf.put(key, value);
      return this;
    }

    /** {@code SPARK_SCALA_VERSION}. Default 2.13. */
    public Builder optScalaBinaryVersion(String version) {
      this.scalaBinaryVersion = version;
      return this;
    }

    /** How long {@link StandaloneCluster#start()} waits for the workers. Default 90 s. */
    public Builder optStartTimeout(Duration timeout) {
      this.startTimeout = timeout;
      return this;
    }

    public StandaloneCluster build() {
      Objects.requireNonNull(sparkHome, "sparkHome: setSparkHome is required");
      Objects.requireNonNull(workDir, "workDir: setWorkDir is required");
      if (!Files.isDirectory(sparkHome.resolve("jars"))) {
        throw new IllegalArgumentException(
            "Invalid sparkHome '" + sparkHome + "': expected a directory with jars/");
      }
      if (workers < 1 || coresPerWorker < 1) {
        throw new IllegalArgumentException(
            "Invalid cluster "
                + workers
                + " workers x "
                + coresPerWorker
                + " cores: expected >= 1 each");
      }
      return new StandaloneCluster(this);
    }
  }
}
