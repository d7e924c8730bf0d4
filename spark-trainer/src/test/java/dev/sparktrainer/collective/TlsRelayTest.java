package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A man in the middle that holds a certificate the ranks trust (another key than theirs, e.g. one
 * issued by the same CA): it terminates TLS with each rank and forwards the bytes in between. The
 * HMAC handshake is bound to each TLS connection's certificates, so the proofs it relays do not
 * verify; connections without it still form the ring.
 */
class TlsRelayTest {
  @TempDir static Path dir;
  private static SSLContext ranks;
  private static SSLContext relay;
  private List<Communicator> comms;
  private final List<AutoCloseable> toClose = Collections.synchronizedList(new ArrayList<>());

  @BeforeAll
  static void keys() throws Exception {
    KeyStore ringKey = generate(dir, "ring");
    KeyStore relayKey = generate(dir, "relay");
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    trust.setCertificateEntry("ring", ringKey.getCertificate("ring"));
    trust.setCertificateEntry("relay", relayKey.getCertificate("relay"));
    ranks = context(ringKey, trust);
    relay = context(relayKey, trust);
  }

  @AfterEach
  void cleanUp() throws Exception {
    Rings.closeAll(comms);
    for (AutoCloseable c : new ArrayList<>(toClose)) {
      c.close();
    }
    Rings.assertNoCommunicatorThreads();
  }

  @Test
  void directTlsConnectionsFormTheRing() {
    comms = Rings.form(3, b -> b.optSslContext(ranks));
    List<float[]> got =
        Rings.onEachOk(
            comms,
            c -> {
              float[] a = {c.rank(), 1};
              c.allReduce(a, ReduceOp.SUM);
              return a;
            });
    assertThat(got).allSatisfy(a -> assertThat(a).containsExactly(3, 3));
  }

  @Test
  void aRelayWithAnotherTrustedCertificateFailsTheHandshake() throws Exception {
    RingListener l0 = RingListener.bind("127.0.0.1");
    RingListener l1 = RingListener.bind("127.0.0.1");
    toClose.add(l0);
    toClose.add(l1);
    AtomicInteger relayed = new AtomicInteger();
    Relay mitm = new Relay(relay, new InetSocketAddress("127.0.0.1", l1.port()), relayed);
    toClose.add(mitm);
    JobSecret secret = JobSecret.generate();
    // rank 0 was told that rank 1 is at the relay's address (a poisoned rendezvous or a routed
    // port)
    List<String> peersOf0 = List.of(l0.address(), "127.0.0.1:" + mitm.port());
    List<String> peersOf1 = List.of(l0.address(), l1.address());
    List<Rings.Outcome<Communicator>> outcomes =
        Rings.runEach(
            2,
            r ->
                Communicator.builder()
                    .setRank(r)
                    .setPeers(r == 0 ? peersOf0 : peersOf1)
                    .setSecret(secret)
                    .setListener(r == 0 ? l0 : l1)
                    .optSslContext(ranks)
                    .optConnectTimeout(Duration.ofSeconds(4))
                    .build());
    comms = new ArrayList<>();
    for (Rings.Outcome<Communicator> o : outcomes) {
      if (o.value != null) {
        comms.add(o.value);
      }
    }
    assertThat(relayed.get()).as("the relay carried TLS connections both ways").isPositive();
    assertThat(outcomes.get(0).error)
        .as("rank 0, which connected through the relay")
        .isInstanceOf(CollectiveException.class)
        .hasMessageContaining("authentication with rank 1")
        .hasMessageContaining("failed to prove the job secret");
    assertThat(outcomes.get(1).error)
        .as("rank 1, whose left neighbour never authenticated")
        .isInstanceOf(CollectiveException.class);
  }

  /** Terminates TLS from rank 0 and opens its own TLS connection to rank 1; forwards plaintext. */
  private static final class Relay implements AutoCloseable {
    private final SSLServerSocket server;
    private final List<Socket> sockets = Collections.synchronizedList(new ArrayList<>());
    private final List<Thread> threads = Collections.synchronizedList(new ArrayList<>());

    Relay(SSLContext ctx, InetSocketAddress target, AtomicInteger relayed) throws IOException {
      server =
          (SSLServerSocket)
              ctx.getServerSocketFactory()
                  .createServerSocket(0, 8, InetAddress.getByName("127.0.0.1"));
      server.setNeedClientAuth(true);
      Thread acceptor =
          new Thread(
              () -> {
                try {
                  while (true) {
                    SSLSocket in = (SSLSocket) server.accept();
                    sockets.add(in);
                    in.startHandshake();
                    SSLSocket out =
                        (SSLSocket)
                            ctx.getSocketFactory()
                                .createSocket(target.getAddress(), target.getPort());
                    sockets.add(out);
                    out.startHandshake();
                    relayed.incrementAndGet();
                    pump(in, out);
                    pump(out, in);
                  }
                } catch (IOException e) {
                  // closed
                }
              },
              "test-relay-accept");
      acceptor.setDaemon(true);
      acceptor.start();
      threads.add(acceptor);
    }

    int port() {
      return server.getLocalPort();
    }

    private void pump(Socket from, Socket to) {
      Thread t =
          new Thread(
              () -> {
                byte[] buf = new byte[64 * 1024];
                try (InputStream in = from.getInputStream();
                    OutputStream out = to.getOutputStream()) {
                  for (int n; (n = in.read(buf)) >= 0; ) {
                    out.write(buf, 0, n);
                    out.flush();
                  }
                } catch (IOException e) {
                  // one side went away
                } finally {
                  closeQuietly(from);
                  closeQuietly(to);
                }
              },
              "test-relay-pump");
      t.setDaemon(true);
      t.start();
      threads.add(t);
    }

    @Override
    public void close() throws Exception {
      server.close();
      for (Socket s : new ArrayList<>(sockets)) {
        closeQuietly(s);
      }
      for (Thread t : new ArrayList<>(threads)) {
        t.join(5000);
      }
    }

    private static void closeQuietly(Socket s) {
      try {
        s.close();
      } catch (IOException e) {
        // already closed
      }
    }
  }

  private static KeyStore generate(Path dir, String alias) throws Exception {
    Path keystore = dir.resolve(alias + ".p12");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    Process p =
        new ProcessBuilder(
                keytool,
                "-genkeypair",
                "-alias",
                alias,
                "-keyalg",
                "EC",
                "-groupname",
                "secp256r1",
                "-dname",
                "CN=" + alias,
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
    return ks;
  }

  private static SSLContext context(KeyStore key, KeyStore trust) throws Exception {
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(key, "changeit".toCharArray());
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    return ctx;
  }
}
