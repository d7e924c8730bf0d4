package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SecurityTest {
  private List<Communicator> comms;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @AfterEach
  void cleanUp() throws Exception {
    Rings.closeAll(comms);
    for (AutoCloseable c : toClose) {
      c.close();
    }
    Rings.assertNoCommunicatorThreads();
  }

  @Test
  void strangersWithoutTheSecretAreDroppedAndLoggedAndTheRingStillForms() throws Exception {
    List<String> logged = Collections.synchronizedList(new ArrayList<>());
    Logger jul = Logger.getLogger(Communicator.class.getName());
    Handler capture =
        new Handler() {
          @Override
          public void publish(LogRecord record) {
            logged.add(record.getMessage());
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    jul.addHandler(capture);
    List<Thread> strangers = new ArrayList<>();
    List<Throwable> strangerErrors = Collections.synchronizedList(new ArrayList<>());
    try {
      comms =
          Rings.form(
              3,
              // The ring's own handshakes keep the default timeout: 500 ms, as this test had, could
              // be too short for a legitimate neighbour on a loaded machine (cold crypto classes,
              // three ranks and three strangers on two cores). The silent stranger is dropped at
              // its pre-authentication deadline or when the ring forms, either way counted.
              b -> {},
              listeners -> {
                InetSocketAddress target =
                    new InetSocketAddress("127.0.0.1", listeners.get(1).port());
                try {
                  // 1. speaks another protocol
                  SocketChannel http = SocketChannel.open(target);
                  http.write(
                      ByteBuffer.wrap("GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4).getBytes()));
                  toClose.add(http);
                  // 2. speaks our protocol with another job's secret
                  SocketChannel impostor = SocketChannel.open(target);
                  toClose.add(impostor);
                  Thread t =
                      new Thread(
                          () -> {
                            try {
                              Link link = new ChannelLink(impostor, 1, "impostor");
                              Handshake.client(
                                  link,
                                  JobSecret.generate(),
                                  0,
                                  1,
                                  3,
                                  System.nanoTime() + TimeUnit.SECONDS.toNanos(10));
                            } catch (Throwable e) {
                              strangerErrors.add(e);
                            }
                          });
                  t.start();
                  strangers.add(t);
                  // 3. connects and says nothing
                  toClose.add(SocketChannel.open(target));
                } catch (IOException e) {
                  throw new UncheckedIOException(e);
                }
              });
      for (Thread t : strangers) {
        t.join(10_000);
      }
      assertThat(strangerErrors).hasSize(1); // the impostor never got in
      assertThat(comms.get(1).rejectedConnections()).isEqualTo(3);
      assertThat(logged)
          .filteredOn(m -> m.contains("dropped an unauthenticated connection"))
          .hasSize(3);
      // The impostor is dropped for its foreign job, or, when the ring forms first on a loaded
      // machine (seen in CI), as unauthenticated when the ring formed: never let in either way.
      assertThat(logged)
          .anySatisfy(
              m ->
                  assertThat(m)
                      .contains("rank 1 of 3")
                      .containsAnyOf("foreign job", "the ring formed before it authenticated"));
      List<float[]> got =
          Rings.onEachOk(
              comms,
              c -> {
                float[] a = {c.rank(), 1};
                c.allReduce(a, ReduceOp.SUM);
                return a;
              });
      assertThat(got).allSatisfy(a -> assertThat(a).containsExactly(3, 3));
    } finally {
      jul.removeHandler(capture);
    }
  }

  @Test
  void aRankWithTheWrongSecretCannotJoin() {
    RingListener l0 = RingListener.bind("127.0.0.1");
    RingListener l1 = RingListener.bind("127.0.0.1");
    List<String> peers = List.of(l0.address(), l1.address());
    JobSecret[] secrets = {JobSecret.generate(), JobSecret.generate()};
    RingListener[] listeners = {l0, l1};
    long start = System.nanoTime();
    List<Rings.Outcome<Communicator>> outcomes =
        Rings.runEach(
            2,
            r ->
                Communicator.builder()
                    .setRank(r)
                    .setPeers(peers)
                    .setSecret(secrets[r])
                    .setListener(listeners[r])
                    .optConnectTimeout(Duration.ofMillis(1500))
                    .build());
    for (int r = 0; r < 2; r++) {
      assertThat(outcomes.get(r).error)
          .isInstanceOf(CollectiveException.class)
          .hasMessageContaining("rank " + r + " of 2")
          .hasMessageContaining("rank " + (1 - r) + " at " + peers.get(1 - r));
      assertThat(((CollectiveException) outcomes.get(r).error).operation()).isEqualTo("connect");
      assertThat((outcomes.get(r).endNanos - start) / 1e9).isLessThan(6);
    }
    assertThat(l0.isOpen()).isFalse();
    assertThat(l1.isOpen()).isFalse();
  }

  @Test
  void tlsRingWithASelfSignedKeystore(@TempDir Path dir) throws Exception {
    SSLContext tls = selfSignedContext(dir);
    comms = Rings.form(3, b -> b.optSslContext(tls).optChunkBytes(16 * 1024));
    for (Communicator c : comms) {
      assertThat(c.rightLink()).isInstanceOf(TlsLink.class);
      // ranks on one host with shared memory allowed (the default): TLS was asked for, TLS it stays
      assertThat(c.rightTransport()).isEqualTo(LinkTransport.TLS);
      assertThat(c.leftTransport()).isEqualTo(LinkTransport.TLS);
      assertThat(((TlsLink) c.rightLink()).sslSocket().getSession().getProtocol())
          .startsWith("TLS");
    }
    int count = 200_003;
    List<Object[]> got =
        Rings.onEachOk(
            comms,
            c -> {
              byte[] large = Values.allReduceArray(c, ElementType.FLOAT32, ReduceOp.SUM, count);
              byte[] small = Values.allReduceArray(c, ElementType.INT64, ReduceOp.MAX, 10);
              List<byte[]> gathered = c.allGather(new byte[] {(byte) c.rank()});
              c.barrier();
              return new Object[] {large, small, gathered};
            });
    for (Object[] r : got) {
      Values.assertSameBytes(
          "tls large",
          Values.expected(ElementType.FLOAT32, ReduceOp.SUM, 3, count),
          (byte[]) r[0],
          ElementType.FLOAT32);
      Values.assertSameBytes(
          "tls small",
          Values.expected(ElementType.INT64, ReduceOp.MAX, 3, 10),
          (byte[]) r[1],
          ElementType.INT64);
      @SuppressWarnings("unchecked")
      List<byte[]> gathered = (List<byte[]>) r[2];
      assertThat(gathered).containsExactly(new byte[] {0}, new byte[] {1}, new byte[] {2});
    }
  }

  @Test
  void tlsPeerThatStopsReadingStillFailsWithinTheTimeout(@TempDir Path dir) throws Exception {
    SSLContext tls = selfSignedContext(dir);
    comms = Rings.form(2, b -> b.optSslContext(tls).optOperationTimeout(Duration.ofMillis(1500)));
    long start = System.nanoTime();
    assertThatThrownBy(() -> comms.get(0).allReduce(new float[8 << 20], ReduceOp.SUM))
        .isInstanceOf(CollectiveException.class)
        .hasMessageContaining("rank 0 of 2")
        .hasMessageContaining("rank 1 at " + comms.get(0).peers().get(1))
        .hasMessageContaining("timed out");
    assertThat((System.nanoTime() - start) / 1e9).isLessThan(6.5);
  }

  @Test
  void plainPeerCannotJoinATlsRing(@TempDir Path dir) throws Exception {
    SSLContext tls = selfSignedContext(dir);
    RingListener l0 = RingListener.bind("127.0.0.1");
    RingListener l1 = RingListener.bind("127.0.0.1");
    List<String> peers = List.of(l0.address(), l1.address());
    JobSecret secret = JobSecret.generate();
    List<Rings.Outcome<Communicator>> outcomes =
        Rings.runEach(
            2,
            r -> {
              Communicator.Builder b =
                  Communicator.builder()
                      .setRank(r)
                      .setPeers(peers)
                      .setSecret(secret)
                      .setListener(r == 0 ? l0 : l1)
                      .optConnectTimeout(Duration.ofMillis(1500))
                      .optHandshakeTimeout(Duration.ofMillis(500));
              if (r == 0) {
                b.optSslContext(tls);
              }
              return b.build();
            });
    assertThat(outcomes)
        .allSatisfy(o -> assertThat(o.error).isInstanceOf(CollectiveException.class));
  }

  static SSLContext selfSignedContext(Path dir) throws Exception {
    Path keystore = dir.resolve("ring.p12");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    Process p =
        new ProcessBuilder(
                keytool,
                "-genkeypair",
                "-alias",
                "ring",
                "-keyalg",
                "EC",
                "-groupname",
                "secp256r1",
                "-dname",
                "CN=spark-trainer-ring",
                "-validity",
                "2",
                "-storetype",
                "PKCS12",
                "-keystore",
                keystore.toString(),
                "-storepass",
                "changeit",
                "-keypass",
                "changeit")
            .redirectErrorStream(true)
            .start();
    try {
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("keytool finished").isTrue();
      assertThat(p.exitValue())
          .as("keytool: " + new String(p.getInputStream().readAllBytes()))
          .isZero();
    } finally {
      p.destroyForcibly();
    }
    KeyStore ks = KeyStore.getInstance("PKCS12");
    try (InputStream in = new FileInputStream(keystore.toFile())) {
      ks.load(in, "changeit".toCharArray());
    }
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(ks, "changeit".toCharArray());
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(ks);
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    Files.deleteIfExists(keystore);
    return ctx;
  }

  @Test
  void listenerBindsTheAdvertisedAddressUnlessToldOtherwise() throws Exception {
    try (RingListener l = RingListener.bind("127.0.0.1")) {
      InetSocketAddress bound = (InetSocketAddress) l.channel().getLocalAddress();
      assertThat(bound.getAddress()).isEqualTo(InetAddress.getByName("127.0.0.1"));
      assertThat(l.address()).isEqualTo("127.0.0.1:" + l.port());
      assertThat(l.port()).isPositive();
    }
    try (RingListener l =
        RingListener.builder().setHost("127.0.0.1").optBindAllInterfaces(true).build()) {
      InetSocketAddress bound = (InetSocketAddress) l.channel().getLocalAddress();
      assertThat(bound.getAddress().isAnyLocalAddress()).isTrue();
      assertThat(l.address()).isEqualTo("127.0.0.1:" + l.port());
    }
    assertThat(PeerAddress.format("::1", 5)).isEqualTo("[::1]:5");
    assertThat(PeerAddress.parse("[::1]:5").getHostString()).isEqualTo("::1");
    assertThatThrownBy(() -> PeerAddress.parse("host"))
        .hasMessageContaining("Invalid peer address 'host'");
    assertThatThrownBy(() -> PeerAddress.parse("host:99999"))
        .hasMessageContaining("port must be 1..65535");
  }

  @Test
  void builderValidatesBeforeConnecting() {
    try (RingListener l = RingListener.bind("127.0.0.1")) {
      JobSecret s = JobSecret.generate();
      assertThatThrownBy(
              () ->
                  Communicator.builder()
                      .setRank(2)
                      .setPeers(List.of(l.address(), "h:1"))
                      .setSecret(s)
                      .setListener(l)
                      .build())
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("Invalid rank 2: expected 0..1");
      assertThatThrownBy(
              () ->
                  Communicator.builder()
                      .setRank(0)
                      .setPeers(List.of("other:1", "h:1"))
                      .setSecret(s)
                      .setListener(l)
                      .build())
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("peers[0] is 'other:1'");
      assertThatThrownBy(
              () ->
                  Communicator.builder()
                      .setRank(0)
                      .setPeers(List.of(l.address(), "h:1"))
                      .setSecret(s)
                      .setListener(l)
                      .optChunkBytes(7)
                      .build())
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("Invalid chunkBytes 7");
      assertThatThrownBy(
              () ->
                  Communicator.builder()
                      .setRank(0)
                      .setPeers(List.of(l.address(), "h:1"))
                      .setListener(l)
                      .build())
          .isInstanceOf(NullPointerException.class)
          .hasMessageContaining("setSecret");
      assertThat(l.isOpen()).isTrue();
    }
  }

  @Test
  void jobSecretIsRandomRoundTripsAndNeverPrinted() {
    JobSecret a = JobSecret.generate();
    JobSecret b = JobSecret.generate();
    assertThat(a).isNotEqualTo(b);
    assertThat(a.jobId()).isNotEqualTo(b.jobId());
    assertThat(a.bytes()).hasSize(32);
    assertThat(JobSecret.fromHex(a.toHex())).isEqualTo(a);
    assertThat(JobSecret.fromHex(a.toHex()).jobId()).isEqualTo(a.jobId());
    assertThat(a.toString()).doesNotContain(a.toHex()).contains(Long.toHexString(a.jobId()));
    assertThatThrownBy(() -> JobSecret.fromBytes(new byte[8])).hasMessageContaining("at least 16");
    assertThatThrownBy(() -> JobSecret.fromHex("xyz")).hasMessageContaining("hex");
  }

  @Test
  void singleRankNeedsNoNetwork() {
    Communicator c =
        Communicator.builder()
            .setRank(0)
            .setPeers(List.of("127.0.0.1:1"))
            .setSecret(JobSecret.generate())
            .build();
    try {
      float[] a = {1.5f, -2};
      c.allReduce(a, ReduceOp.MEAN);
      assertThat(a).containsExactly(1.5f, -2);
      assertThat(c.allGather(new byte[] {7})).containsExactly(new byte[] {7});
      assertThat(c.broadcastBytes(new byte[] {1, 2}, 0)).containsExactly(1, 2);
      c.barrier();
    } finally {
      c.close();
    }
  }
}
