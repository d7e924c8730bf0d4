package dev.sparktrainer.it.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.cluster.StandaloneCluster;
import dev.sparktrainer.it.cluster.ClusterRuns.RankInfo;
import dev.sparktrainer.it.cluster.ClusterRuns.Train;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Barrier training across executor JVMs of a Spark standalone cluster (a Master and two Workers as
 * separate JVMs, from the Maven-assembled {@code SPARK_HOME}), the application submitted the
 * spark-submit way with the shaded jar: {@code SparkSubmit --master spark://... --class
 * dev.sparktrainer.cli.SparkTrainerCli spark-trainer-*-all.jar train ...}.
 *
 * <p>The workers offer one fake GPU each (a discovery script, no GPU behind it), so the GPU test
 * runs on the same cluster; applications that do not ask for GPUs do not get them.
 */
class StandaloneTrainingIT {
  private static final Duration RUN = Duration.ofMinutes(5);
  private static final Path ROOT =
      Path.of("target", "it-cluster", "StandaloneTrainingIT").toAbsolutePath();
  private static StandaloneCluster cluster;
  private static Path data;
  private static Train reference;
  private static String referenceAppId;

  @BeforeAll
  static void startCluster() throws Exception {
    deleteRecursively(ROOT);
    Files.createDirectories(ROOT);
    Path script = ROOT.resolve("fake-gpu-discovery.sh");
    try (InputStream in =
        StandaloneTrainingIT.class.getResourceAsStream("/cluster/fake-gpu-discovery.sh")) {
      Files.copy(in, script);
    }
    Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
    data = ClusterRuns.digits(ROOT);
    cluster =
        ClusterRuns.startCluster(
            ROOT.resolve("cluster"),
            b ->
                b.optWorkerConf("spark.worker.resource.gpu.amount", "1")
                    .optWorkerConf("spark.worker.resource.gpu.discoveryScript", script.toString()));
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close(); // drivers, workers with their executors, master: by process id
    }
  }

  /** The uninterrupted run (the first test that needs it runs it). */
  private static synchronized Train reference() throws Exception {
    if (reference == null) {
      Train t = new Train(ROOT, "reference");
      StandaloneCluster.Application app = t.submit(cluster, data);
      ClusterRuns.assertSucceeds(app, RUN);
      referenceAppId = ClusterRuns.appId(app).orElseThrow();
      reference = t;
    }
    return reference;
  }

  @Test
  void trainsAcrossTwoExecutorJvmsWithTheShadedJar() throws Exception {
    Train t = reference();
    assertThat(t.validationAccuracy())
        .as("held-out accuracy")
        .isGreaterThanOrEqualTo(ClusterRuns.MIN_ACCURACY);
    assertThat(t.metrics().path("epochs").size()).isEqualTo(ClusterRuns.EPOCHS);
    assertThat(t.metrics().path("master").asText()).startsWith("spark://127.0.0.1:");
    assertThat(t.resumes()).as("resumes of an uninterrupted run").isEmpty();
    assertThat(t.output.resolve("model").resolve("model.params")).isRegularFile();
    // The two ranks ran in two different executor JVMs, one per worker.
    String logs = ClusterRuns.executorLogText(cluster, referenceAppId);
    Matcher m = ClusterRuns.LISTENER.matcher(logs);
    Map<Integer, Long> pids = new TreeMap<>();
    while (m.find()) {
      pids.put(Integer.parseInt(m.group(1)), Long.parseLong(m.group(6)));
    }
    assertThat(pids).containsOnlyKeys(0, 1);
    assertThat(pids.get(0)).as("rank 0 and rank 1 executor pids").isNotEqualTo(pids.get(1));
    assertThat(logs)
        .contains("rank 0 of 2 (stage attempt 0)")
        .contains("rank 1 of 2 (stage attempt 0)");
  }

  @Test
  void eachTaskGetsItsOwnFakeGpuAndFallsBackToTheCpuWithoutCuda() throws Exception {
    Train t =
        new Train(ROOT, "fake-gpus")
            .conf("spark.executor.resource.gpu.amount", "1")
            .conf("spark.task.resource.gpu.amount", "1")
            .args("--epochs", "1", "--gpus");
    StandaloneCluster.Application app = t.submit(cluster, data);
    ClusterRuns.assertSucceeds(app, RUN);
    String appId = ClusterRuns.appId(app).orElseThrow();
    String logs = ClusterRuns.executorLogText(cluster, appId);
    // The discovery script gives worker w the address "w": each task logs the one its executor got.
    Matcher m = Pattern.compile("rank (\\d): GPU address (\\d) assigned by Spark").matcher(logs);
    Map<Integer, String> byRank = new TreeMap<>();
    while (m.find()) {
      byRank.put(Integer.parseInt(m.group(1)), m.group(2));
    }
    assertThat(byRank).as("GPU address per rank").containsOnlyKeys(0, 1);
    assertThat(Set.copyOf(byRank.values()))
        .as("distinct addresses")
        .containsExactlyInAnyOrder("0", "1");
    for (int rank = 0; rank < 2; rank++) {
      assertThat(logs)
          .contains(
              "rank "
                  + rank
                  + ": Spark assigned GPU "
                  + byRank.get(rank)
                  + ", but CUDA is not available to PyTorch in this executor (it sees 0 GPUs: CPU-only natives, or no CUDA"
                  + " driver): falling back to the CPU with 1 thread(s)");
    }
    assertThat(t.metrics().path("epochs").size()).isEqualTo(1);
    assertThat(t.metrics().path("final").path("val_accuracy").asDouble())
        .as("trained on the CPU")
        .isGreaterThan(0.5);
  }

  /**
   * A process without the job's secret connects to a rank's ring port while the ring forms: once
   * with bytes that are not the protocol, once speaking it with the right job id (it is public) but
   * a made-up proof of the secret. The listener drops both (logged with the caller's address), the
   * real neighbour joins, and training ends exactly as the uninterrupted run did. Once the ring is
   * formed the port is closed: nobody can connect at all.
   */
  /**
   * The ring protocol's version (collective.Wire.VERSION; 2 since the shared-memory negotiation).
   */
  private static final short PROTOCOL = 2;

  @Test
  void aConnectionWithoutTheSecretIsRejectedAndTrainingIsUnaffected() throws Exception {
    Train ref = reference();
    // Rank 0 waits 10 s after the rendezvous before joining: rank 1 listens for it meanwhile.
    Train t = new Train(ROOT, "secretless").ringConnectDelay(0, 10000);
    StandaloneCluster.Application app = t.submit(cluster, data);
    try {
      RankInfo rank1 = ClusterRuns.awaitRank(cluster, app, 1, 0, Duration.ofMinutes(3));
      InetSocketAddress port = new InetSocketAddress(rank1.host(), rank1.port());

      int garbagePort;
      try (Socket s = new Socket()) {
        s.connect(port, 5000);
        s.setSoTimeout(15_000);
        garbagePort = s.getLocalPort();
        OutputStream out = s.getOutputStream();
        byte[] http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
        out.write(Arrays.copyOf(http, 64)); // at least a hello's length: the listener reads one
        out.flush();
        assertClosedByPeer(s.getInputStream(), "a connection sending non-protocol bytes");
      }

      int forgedPort;
      try (Socket s = new Socket()) {
        s.connect(port, 5000);
        s.setSoTimeout(15_000);
        forgedPort = s.getLocalPort();
        OutputStream out = s.getOutputStream();
        DataInputStream in = new DataInputStream(s.getInputStream());
        byte[] nonce = new byte[32];
        new SecureRandom().nextBytes(nonce);
        // HELLO: magic "STRC", protocol version 2, type 1, job id, from rank 0, to rank 1, world
        // size 2, nonce
        ByteBuffer hello =
            ByteBuffer.allocate(60)
                .putInt(0x53545243)
                .putShort(PROTOCOL)
                .putShort((short) 1)
                .putLong(Long.parseUnsignedLong(rank1.jobId(), 16))
                .putInt(0)
                .putInt(1)
                .putInt(2)
                .put(nonce);
        out.write(hello.array());
        out.flush();
        byte[] challenge = new byte[72];
        in.readFully(challenge); // the listener accepted the job id and challenges the caller
        assertThat(ByteBuffer.wrap(challenge).getInt(4) & 0xffff)
            .as("message type: CHALLENGE")
            .isEqualTo(2);
        byte[] forgedMac = new byte[32];
        new SecureRandom().nextBytes(forgedMac);
        ByteBuffer response =
            ByteBuffer.allocate(40)
                .putInt(0x53545243)
                .putShort(PROTOCOL)
                .putShort((short) 3)
                .put(forgedMac);
        out.write(response.array());
        out.flush();
        assertClosedByPeer(in, "a connection with a made-up proof of the secret");
      }

      ClusterRuns.assertSucceeds(app, RUN);
      String rank1Log = ClusterRuns.read(rank1.log());
      assertThat(rank1Log)
          .contains(
              "rank 1 of 2: dropped an unauthenticated connection from /127.0.0.1:"
                  + garbagePort
                  + " while waiting for rank 0: not a spark-trainer ring peer (bad magic")
          .contains(
              "rank 1 of 2: dropped an unauthenticated connection from /127.0.0.1:"
                  + forgedPort
                  + " while waiting for rank 0: wrong proof of the job secret")
          .contains("2 unauthenticated connection(s) rejected");
      // After the ring formed the listener is closed: the port refuses connections.
      assertThatThrownBy(
              () -> {
                try (Socket s = new Socket()) {
                  s.connect(port, 5000);
                }
              })
          .isInstanceOf(ConnectException.class);

      assertThat(t.resumes()).as("no stage retry").isEmpty();
      assertThat(t.validationAccuracy())
          .as("held-out accuracy")
          .isEqualTo(ref.validationAccuracy());
      assertThat(t.parameterHash())
          .as("final parameters, bit for bit, of the undisturbed run")
          .isEqualTo(ref.parameterHash());
    } finally {
      if (app.isAlive()) {
        app.kill();
      }
    }
  }

  private static void assertClosedByPeer(InputStream in, String what) throws IOException {
    long start = System.nanoTime();
    try {
      int b = in.read();
      assertThat(b).as(what + ": the listener closes it without answering").isEqualTo(-1);
    } catch (SocketException e) {
      assertThat(e.getMessage()).as(what).containsIgnoringCase("reset");
    } catch (SocketTimeoutException e) {
      throw new AssertionError(what + " was still open after 15 s", e);
    }
    assertThat(Duration.ofNanos(System.nanoTime() - start))
        .as(what + ": closed promptly")
        .isLessThan(Duration.ofSeconds(5));
  }

  static void deleteRecursively(Path p) throws IOException {
    if (!Files.exists(p)) {
      return;
    }
    try (var s = Files.walk(p)) {
      for (Path f : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) {
        Files.delete(f);
      }
    }
  }
}
