package dev.sparktrainer.it.yarn;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * A MiniDFSCluster (1 NameNode, 1 DataNode) and a MiniYARNCluster (1 ResourceManager, 1
 * NodeManager) in this JVM, the second using the first as its default file system, and the client
 * configuration a submitter needs ({@code core-site.xml}, {@code yarn-site.xml}) written to a
 * HADOOP_CONF_DIR.
 *
 * <p>The NodeManager offers 6 GiB and 4 vcores: a Spark ApplicationMaster (or cluster-mode driver)
 * and two 1-core executors of 1 GiB heap fit at once, as barrier mode needs. Memory is not enforced
 * (the mini cluster disables the pmem/vmem checks) and the disk health check tolerates a nearly
 * full disk, so a shared build machine does not make the node unhealthy. The daemons bind to this
 * machine's host name ({@code MiniYARNCluster} takes it from {@link InetAddress#getLocalHost()});
 * start fails unless every address is a loopback one, so nothing listens beyond this machine.
 *
 * <p>Containers are child processes of this JVM (the NodeManager's DefaultContainerExecutor);
 * {@link #close()} stops the clusters, then every process this JVM started that is still alive, by
 * process id.
 */
final class MiniHadoop implements AutoCloseable {
  private static final int NM_MEMORY_MB = 6144;
  private static final int NM_VCORES = 4;

  private final MiniDFSCluster dfs;
  private final MiniYARNCluster yarn;
  private final YarnClient client;
  private final Path confDir;
  private final String hdfsRoot;
  private final FileSystem fs;

  private MiniHadoop(
      MiniDFSCluster dfs,
      MiniYARNCluster yarn,
      YarnClient client,
      Path confDir,
      String hdfsRoot,
      FileSystem fs) {
    this.dfs = dfs;
    this.yarn = yarn;
    this.client = client;
    this.confDir = confDir;
    this.hdfsRoot = hdfsRoot;
    this.fs = fs;
  }

  /**
   * Starts both clusters (work directories under {@code target/<name>}) and writes {@code confDir}.
   */
  static MiniHadoop start(String name, Path confDir) throws Exception {
    MiniDFSCluster dfs = null;
    MiniYARNCluster yarn = null;
    YarnClient client = null;
    boolean started = false;
    try {
      Configuration dfsConf = new Configuration();
      dfsConf.setInt("dfs.replication", 1);
      Path dfsDir = Path.of("target", name, "dfs").toAbsolutePath();
      dfs = new MiniDFSCluster.Builder(dfsConf, dfsDir.toFile()).numDataNodes(1).build();
      dfs.waitActive();
      InetSocketAddress nn = dfs.getNameNode().getNameNodeAddress();
      requireLoopback("NameNode", nn.getAddress());
      String defaultFs = "hdfs://127.0.0.1:" + nn.getPort();

      YarnConfiguration conf = new YarnConfiguration();
      conf.set("fs.defaultFS", defaultFs);
      conf.setInt("dfs.replication", 1);
      conf.setInt(YarnConfiguration.YARN_MINICLUSTER_NM_PMEM_MB, NM_MEMORY_MB);
      conf.setInt(YarnConfiguration.NM_VCORES, NM_VCORES);
      conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 256);
      conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, NM_MEMORY_MB);
      conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES, NM_VCORES);
      conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.9f);
      // The CapacityScheduler (YARN's default) with one queue, as a small cluster has; the shaded
      // minicluster brings no capacity-scheduler.xml. AMs may take half of it (default 10 %).
      conf.set("yarn.scheduler.capacity.root.queues", "default");
      conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
      conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
      conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
      conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
      conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
      // Its work directory (NodeManager local and log dirs: ~120 MB per run with the localized
      // application jar) is target/test/data/<name>/yarn-<random>: keep only this run's.
      deleteRecursively(Path.of("target", "test", "data", name));
      yarn = new MiniYARNCluster(name, 1, 1, 1);
      yarn.init(conf);
      yarn.start();
      if (!yarn.waitForNodeManagersToConnect(60_000)) {
        throw new IllegalStateException(
            "The NodeManager did not register with the ResourceManager in 60 s");
      }
      Configuration clientConf = yarn.getConfig();
      String rm =
          awaitBoundAddress(clientConf, YarnConfiguration.RM_ADDRESS, Duration.ofSeconds(30));
      requireLoopback(
          "ResourceManager (" + rm + ")",
          InetAddress.getByName(rm.substring(0, rm.lastIndexOf(':'))));

      client = YarnClient.createYarnClient();
      client.init(clientConf);
      client.start();
      List<NodeReport> nodes = client.getNodeReports(NodeState.RUNNING);
      if (nodes.size() != 1) {
        throw new IllegalStateException(
            "Expected 1 running NodeManager, the ResourceManager reports " + nodes);
      }
      requireLoopback(
          "NodeManager (" + nodes.get(0).getNodeId() + ")",
          InetAddress.getByName(nodes.get(0).getNodeId().getHost()));

      Files.createDirectories(confDir);
      for (String file : List.of("core-site.xml", "yarn-site.xml")) {
        try (OutputStream out = Files.newOutputStream(confDir.resolve(file))) {
          clientConf.writeXml(
              out); // everything, as Spark's own YARN tests do: the client reads what it needs
        }
      }
      FileSystem fs = FileSystem.newInstance(URI.create(defaultFs), clientConf);
      String root = defaultFs + "/yarn-it";
      fs.mkdirs(new org.apache.hadoop.fs.Path(root));
      started = true;
      return new MiniHadoop(dfs, yarn, client, confDir.toAbsolutePath(), root, fs);
    } finally {
      if (!started) {
        stop(client, yarn, dfs, null);
      }
    }
  }

  /** {@code hdfs://127.0.0.1:PORT/yarn-it}: a directory for the test's data and jobs. */
  String hdfsRoot() {
    return hdfsRoot;
  }

  /** HADOOP_CONF_DIR for a client of these clusters. */
  Path confDir() {
    return confDir;
  }

  /**
   * The newest application named {@code name} once YARN has finished it (FINISHED, FAILED or
   * KILLED), waiting up to {@code timeout}: a client-mode driver exits before the ApplicationMaster
   * unregisters.
   */
  ApplicationReport finishedApplication(String name, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    EnumSet<YarnApplicationState> done =
        EnumSet.of(
            YarnApplicationState.FINISHED,
            YarnApplicationState.FAILED,
            YarnApplicationState.KILLED);
    while (true) {
      ApplicationReport newest =
          client.getApplications().stream()
              .filter(a -> a.getName().equals(name))
              .max(Comparator.comparingLong(ApplicationReport::getStartTime))
              .orElse(null);
      if (newest == null) {
        // the submitter has exited: an application it created is known to the ResourceManager
        throw new AssertionError("YARN has no application named '" + name + "'");
      }
      if (done.contains(newest.getYarnApplicationState())) {
        return newest;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "Application "
                + newest.getApplicationId()
                + " is still "
                + newest.getYarnApplicationState()
                + " after "
                + timeout);
      }
      Thread.sleep(200); // YARN's state changes asynchronously: poll with a deadline
    }
  }

  /**
   * The container directories of {@code app} in the NodeManager's log directory, by container
   * number.
   */
  List<Path> containerLogDirs(ApplicationReport app) throws IOException {
    String logDirs = yarn.getNodeManager(0).getConfig().get(YarnConfiguration.NM_LOG_DIRS);
    List<Path> out = new ArrayList<>();
    for (String dir : logDirs.split(",")) {
      Path appDir = Path.of(dir, app.getApplicationId().toString());
      if (Files.isDirectory(appDir)) {
        try (Stream<Path> s = Files.list(appDir)) {
          s.filter(Files::isDirectory).forEach(out::add);
        }
      }
    }
    out.sort(Comparator.comparing(p -> p.getFileName().toString()));
    return out;
  }

  /**
   * A log file ({@code stdout}, {@code stderr}) of the container whose number is {@code number} (1:
   * the AM).
   */
  String containerLog(ApplicationReport app, int number, String file) throws IOException {
    String suffix = String.format("_%06d", number);
    for (Path dir : containerLogDirs(app)) {
      if (dir.getFileName().toString().endsWith(suffix)) {
        return Files.readString(dir.resolve(file), StandardCharsets.UTF_8);
      }
    }
    throw new AssertionError(
        "No container "
            + number
            + " of "
            + app.getApplicationId()
            + " in "
            + containerLogDirs(app));
  }

  /** stderr of every container but the first (the ApplicationMaster), by container id. */
  Map<String, String> executorLogs(ApplicationReport app) throws IOException {
    Map<String, String> out = new LinkedHashMap<>();
    List<Path> dirs = containerLogDirs(app);
    for (Path dir : dirs.subList(Math.min(1, dirs.size()), dirs.size())) {
      Path stderr = dir.resolve("stderr");
      out.put(
          dir.getFileName().toString(),
          Files.exists(stderr) ? Files.readString(stderr, StandardCharsets.UTF_8) : "");
    }
    return out;
  }

  /** The last lines of every container's stdout and stderr (for failure messages). */
  String containerLogTails(ApplicationReport app, int lines) {
    StringBuilder sb = new StringBuilder();
    try {
      for (Path dir : containerLogDirs(app)) {
        for (String file : List.of("stdout", "stderr")) {
          Path f = dir.resolve(file);
          if (Files.exists(f)) {
            sb.append("[")
                .append(dir.getFileName())
                .append("/")
                .append(file)
                .append("]\n")
                .append(YarnTrainingIT.tail(f, lines))
                .append('\n');
          }
        }
      }
    } catch (IOException e) {
      sb.append("(cannot list the container logs: ").append(e).append(")");
    }
    return sb.toString();
  }

  String readString(String path) throws IOException {
    try (FSDataInputStream in = fs.open(new org.apache.hadoop.fs.Path(path))) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  List<FileStatus> list(String path) throws IOException {
    return Arrays.asList(fs.listStatus(new org.apache.hadoop.fs.Path(path)));
  }

  @Override
  public void close() {
    stop(client, yarn, dfs, fs);
  }

  private static void stop(
      YarnClient client, MiniYARNCluster yarn, MiniDFSCluster dfs, FileSystem fs) {
    // Each step on its own: a failure is logged and the rest still stops.
    try {
      if (client != null) {
        client.stop();
      }
    } catch (RuntimeException e) {
      System.err.println("MiniHadoop: stopping the YARN client failed: " + e);
    }
    try {
      if (yarn != null) {
        yarn.stop();
      }
    } catch (RuntimeException e) {
      System.err.println("MiniHadoop: stopping the MiniYARNCluster failed: " + e);
    }
    try {
      if (fs != null) {
        fs.close();
      }
    } catch (IOException e) {
      System.err.println("MiniHadoop: closing the HDFS client failed: " + e);
    }
    try {
      if (dfs != null) {
        dfs.shutdown(true);
      }
    } catch (RuntimeException e) {
      System.err.println("MiniHadoop: stopping the MiniDFSCluster failed: " + e);
    }
    // Containers the NodeManager launched (and their children) that outlived it: this JVM started
    // them.
    List<ProcessHandle> left =
        ProcessHandle.current()
            .children()
            .filter(ProcessHandle::isAlive)
            .collect(Collectors.toList());
    for (ProcessHandle p : left) {
      System.err.println(
          "MiniHadoop: stopping leftover process "
              + p.pid()
              + " "
              + p.info().commandLine().orElse(""));
      stopTree(p);
    }
  }

  /**
   * SIGTERM to the process's descendants and the process, SIGKILL to whatever is left after 15 s.
   */
  static void stopTree(ProcessHandle p) {
    List<ProcessHandle> tree = new ArrayList<>(p.descendants().collect(Collectors.toList()));
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

  private static String awaitBoundAddress(Configuration conf, String key, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      String address = conf.get(key);
      if (address != null && !address.endsWith(":0")) {
        return address;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(key + " is still '" + address + "' after " + timeout);
      }
      Thread.sleep(
          100); // the ResourceManager writes its bound port into the configuration when it starts
    }
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : (Iterable<Path>) files.sorted(Comparator.reverseOrder())::iterator) {
        Files.delete(p);
      }
    }
  }

  private static void requireLoopback(String what, InetAddress address) {
    if (!address.isLoopbackAddress()) {
      throw new IllegalStateException(
          what
              + " listens on "
              + address
              + ", not on loopback: MiniYARNCluster binds"
              + " to this machine's host name ("
              + address
              + "); map it to 127.0.0.1 in /etc/hosts to run this test");
    }
  }
}
