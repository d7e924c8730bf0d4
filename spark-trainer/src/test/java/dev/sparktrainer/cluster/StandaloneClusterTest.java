package dev.sparktrainer.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The test cluster reads the ports its master bound from the master process itself: no port is
 * probed free here and handed on (a worker's RPC port once took such a port before the master bound
 * it, and the health check then spoke HTTP to the worker).
 */
class StandaloneClusterTest {
  @TempDir Path tmp;

  @Test
  void listeningPortsAreReadFromTheProcess() throws Exception {
    long self = ProcessHandle.current().pid();
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
      port = s.getLocalPort();
      assertThat(StandaloneCluster.listeningPorts(self)).contains(port);
    }
    assertThat(StandaloneCluster.listeningPorts(self)).doesNotContain(port);
    assertThat(StandaloneCluster.listeningPorts(Long.MAX_VALUE)).isEmpty();
  }

  @Test
  void theMastersPortsAreThoseItBound() throws Exception {
    List<Path> jars =
        Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
            .filter(p -> p.endsWith(".jar"))
            .map(Path::of)
            .filter(Files::isRegularFile)
            .toList();
    Path home = StandaloneCluster.sparkHomeOf(tmp.resolve("spark-home"), jars);
    try (StandaloneCluster cluster =
        StandaloneCluster.builder()
            .setSparkHome(home)
            .setWorkDir(tmp.resolve("cluster"))
            .optWorkers(1)
            .optCoresPerWorker(1)
            .optStartTimeout(Duration.ofMinutes(2))
            .optJavaOptions(
                ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                    .filter(a -> a.startsWith("--add-opens") || a.startsWith("-Dio.netty"))
                    .toList())
            .build()
            .start()) {
      int rpc = Integer.parseInt(cluster.masterUrl().substring("spark://127.0.0.1:".length()));
      assertThat(StandaloneCluster.listeningPorts(cluster.masterPid()))
          .as("the master listens on its RPC and UI ports")
          .contains(rpc, cluster.masterUiPort());
      assertThat(rpc).isNotEqualTo(cluster.masterUiPort());
      assertThat(cluster.aliveWorkers()).as("the worker registered, as /json/ says").isEqualTo(1);
    }
  }
}
