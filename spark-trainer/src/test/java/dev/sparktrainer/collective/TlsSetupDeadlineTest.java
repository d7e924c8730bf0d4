package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Path;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A stranger that completes the TLS handshake (client authentication off, or a holder of the ring's
 * certificate) and then announces an application-data record and drips it a byte at a time: every
 * socket read under the acceptor's {@code SSLSocket} read gets a byte within its timeout, and the
 * record (16 KB) would take about an hour. The connection's setup has one deadline, enforced by
 * closing the socket, so as many such strangers as there are handshake threads cannot stop the ring
 * from forming.
 */
class TlsSetupDeadlineTest {
  private List<Communicator> comms;
  private final List<Socket> strangers = new ArrayList<>();

  @AfterEach
  void cleanUp() throws IOException {
    Rings.closeAll(comms);
    for (Socket s : strangers) {
      s.close();
    }
    Rings.assertNoCommunicatorThreads();
  }

  @Test
  void strangersDrippingAfterTheTlsHandshakeAreDroppedAtTheSetupDeadline(@TempDir Path dir)
      throws Exception {
    SSLContext tls = SecurityTest.selfSignedContext(dir);
    SSLContext trustAll = SSLContext.getInstance("TLS");
    trustAll.init(null, new TrustManager[] {new TrustAll()}, null);
    int dripping = RingAcceptor.HANDSHAKE_THREADS;
    RingListener l0 = RingListener.bind("127.0.0.1");
    RingListener l1 = RingListener.bind("127.0.0.1");
    List<String> peers = List.of(l0.address(), l1.address());
    JobSecret secret = JobSecret.generate();
    InetSocketAddress target = new InetSocketAddress("127.0.0.1", l1.port());
    List<OutputStream> raw = new CopyOnWriteArrayList<>();
    ScheduledExecutorService drip = Executors.newSingleThreadScheduledExecutor();
    // Each stranger drips from the moment it has announced its record.
    drip.scheduleAtFixedRate(
        () -> {
          for (OutputStream out : raw) {
            try {
              out.write(7);
              out.flush();
            } catch (IOException | RuntimeException closed) {
              // dropped by the acceptor: what the test wants
            }
          }
        },
        200,
        200,
        TimeUnit.MILLISECONDS);
    List<Rings.Outcome<Communicator>> outcomes;
    try {
      outcomes =
          Rings.runEach(
              2,
              r -> {
                if (r == 0) {
                  // Rank 1's acceptor is up: the strangers take every handshake thread (their TLS
                  // handshakes complete, their records drip) before the neighbour connects.
                  for (int i = 0; i < dripping; i++) {
                    Socket plain = new Socket();
                    strangers.add(plain);
                    plain.connect(target, 10_000);
                    SSLSocket ssl =
                        (SSLSocket)
                            trustAll
                                .getSocketFactory()
                                .createSocket(plain, "127.0.0.1", target.getPort(), false);
                    ssl.setSoTimeout(30_000);
                    ssl.startHandshake(); // completes: client authentication is off
                    OutputStream out = plain.getOutputStream();
                    // An application-data record of 16,384 bytes announced (type 23, TLS 1.2),
                    // written past the TLS layer onto the socket itself.
                    out.write(new byte[] {23, 3, 3, 0x40, 0});
                    out.flush();
                    raw.add(out);
                  }
                }
                return Communicator.builder()
                    .setRank(r)
                    .setPeers(peers)
                    .setSecret(secret)
                    .setListener(r == 0 ? l0 : l1)
                    .optSslContext(tls)
                    .optTlsNeedClientAuth(false)
                    // Long enough that only a deadline enforced by closing the socket lets the
                    // ring form: a read timeout alone never fires while bytes keep coming.
                    .optConnectTimeout(Duration.ofSeconds(40))
                    .optHandshakeTimeout(Duration.ofSeconds(60))
                    .build();
              });
    } finally {
      drip.shutdownNow();
      assertThat(drip.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
    }
    comms = new ArrayList<>();
    for (Rings.Outcome<Communicator> o : outcomes) {
      if (o.value != null) {
        comms.add(o.value);
      }
    }
    for (Rings.Outcome<Communicator> o : outcomes) {
      assertThat(o.error).as("a rank forming the ring").isNull();
    }
    assertThat(raw).as("strangers that completed the TLS handshake").hasSize(dripping);
    assertThat(comms.get(1).rejectedConnections()).isEqualTo(dripping);
    for (Socket s : strangers) {
      // What the server's TLS layer sent after the handshake (session tickets), then the end.
      s.setSoTimeout(10_000);
      int read;
      long bytes = 0;
      try {
        while ((read = s.getInputStream().read()) >= 0 && ++bytes < 65_536) {
          // drain
        }
      } catch (IOException reset) {
        read = -1;
      }
      assertThat(read).as("a stranger's connection is closed").isEqualTo(-1);
    }
    Rings.assertAllReduceSums(comms);
  }

  /**
   * The same on the connecting side: whoever answers at the right neighbour's address (a stale
   * address taken by another process) completes the TLS handshake and drips a record. The rank's
   * setup ends at the connect deadline and its socket is closed then, not an hour later.
   */
  @Test
  void aDrippingServerAtTheNeighboursAddressIsLeftAtTheConnectDeadline(@TempDir Path dir)
      throws Exception {
    SSLContext tls = SecurityTest.selfSignedContext(dir);
    RingListener l0 = RingListener.bind("127.0.0.1");
    try (java.net.ServerSocket fake =
        new java.net.ServerSocket(0, 4, java.net.InetAddress.getByName("127.0.0.1"))) {
      List<String> peers = List.of(l0.address(), "127.0.0.1:" + fake.getLocalPort());
      java.util.concurrent.CompletableFuture<Socket> served =
          new java.util.concurrent.CompletableFuture<>();
      Thread server =
          new Thread(
              () -> {
                try {
                  Socket raw = fake.accept();
                  SSLSocket ssl =
                      (SSLSocket)
                          tls.getSocketFactory()
                              .createSocket(raw, "127.0.0.1", raw.getPort(), false);
                  ssl.setUseClientMode(false);
                  ssl.setNeedClientAuth(false);
                  ssl.startHandshake();
                  OutputStream out = raw.getOutputStream();
                  out.write(new byte[] {23, 3, 3, 0x40, 0}); // a 16 KB record announced
                  out.flush();
                  served.complete(raw);
                  while (!raw.isClosed()) {
                    out.write(7);
                    out.flush();
                    Thread.sleep(200);
                  }
                } catch (IOException | InterruptedException e) {
                  served.completeExceptionally(e);
                }
              },
              "fake-neighbour");
      server.setDaemon(true);
      server.start();
      long t0 = System.nanoTime();
      // On its own thread: a rank held by the dripping server would not return for an hour.
      java.util.concurrent.CompletableFuture<Throwable> formed =
          java.util.concurrent.CompletableFuture.supplyAsync(
              () -> {
                try (Communicator c =
                    Communicator.builder()
                        .setRank(0)
                        .setPeers(peers)
                        .setSecret(JobSecret.generate())
                        .setListener(l0)
                        .optSslContext(tls)
                        .optConnectTimeout(Duration.ofSeconds(4))
                        .optHandshakeTimeout(Duration.ofSeconds(60))
                        .build()) {
                  return null; // cannot form: no left neighbour, and the right one is not a rank
                } catch (CollectiveException e) {
                  return e;
                }
              });
      Throwable failed = formed.get(60, TimeUnit.SECONDS);
      assertThat(failed).as("the ring cannot form").isNotNull();
      Socket raw = served.get(30, TimeUnit.SECONDS);
      raw.setSoTimeout(20_000);
      int read;
      try {
        do {
          read = raw.getInputStream().read();
        } while (read >= 0);
      } catch (IOException reset) {
        read = -1;
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      assertThat(read).as("the rank closed its connection to the dripping server").isEqualTo(-1);
      assertThat(seconds).as("seconds until it did (connect deadline 4 s)").isLessThan(20);
      raw.close();
    }
  }

  /** The stranger trusts any server: it only wants a handshake. */
  private static final class TrustAll implements X509TrustManager {
    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType) {}

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType) {}

    @Override
    public X509Certificate[] getAcceptedIssuers() {
      return new X509Certificate[0];
    }
  }
}
