package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Ring formation with strangers queued on a listener ahead of the real neighbour, under the
 * production timeouts (60 s to form the ring, 10 s per handshake): they must not hold the door.
 */
class HandshakeFloodTest {
  private List<Communicator> comms;
  private final List<SocketChannel> strangers = new ArrayList<>();

  @AfterEach
  void cleanUp() throws IOException {
    Rings.closeAll(comms);
    for (SocketChannel s : strangers) {
      s.close();
    }
    Rings.assertNoCommunicatorThreads();
  }

  @Test
  void idleAndHalfSpokenConnectionsAheadOfTheNeighbourDoNotStopTheRing() throws Exception {
    int idle = 12;
    int halfHellos = 3;
    long[] start = new long[1];
    comms =
        Rings.form(
            3,
            b ->
                b.optConnectTimeout(Communicator.DEFAULT_CONNECT_TIMEOUT)
                    .optHandshakeTimeout(Communicator.DEFAULT_HANDSHAKE_TIMEOUT),
            listeners -> {
              InetSocketAddress target =
                  new InetSocketAddress("127.0.0.1", listeners.get(1).port());
              try {
                for (int i = 0; i < idle; i++) {
                  strangers.add(SocketChannel.open(target)); // connects, then says nothing
                }
                for (int i = 0; i < halfHellos; i++) {
                  SocketChannel s = SocketChannel.open(target);
                  strangers.add(s);
                  // the first 8 bytes of a HELLO (magic, version, type), then silence
                  ByteBuffer head = ByteBuffer.allocate(8);
                  head.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(Handshake.HELLO).flip();
                  s.write(head);
                }
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
              start[0] = System.nanoTime();
            });
    double seconds = (System.nanoTime() - start[0]) / 1e9;
    assertThat(seconds)
        .as("seconds to form the ring behind %d strangers", idle + halfHellos)
        .isLessThan(5);
    assertRejected(comms.get(1), idle + halfHellos);
    assertThat(comms.get(0).rejectedConnections()).isZero();
    // every stranger was disconnected
    for (SocketChannel s : strangers) {
      s.configureBlocking(true);
      s.socket().setSoTimeout(5000);
      int read;
      try {
        read = s.socket().getInputStream().read();
      } catch (IOException reset) {
        read = -1;
      }
      assertThat(read).as("a stranger's connection is closed").isEqualTo(-1);
    }
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

  /**
   * With TLS on: more strangers than handshake threads, each sending a TLS record header and then
   * one byte every 100 ms (every read within its timeout, the record never complete). Each is
   * dropped at its handshake deadline however it drips, so the neighbour gets a thread and the ring
   * forms well within the connect timeout.
   */
  @Test
  void drippingTlsStrangersDoNotStopATlsRing(@TempDir Path dir) throws Exception {
    SSLContext tls = SecurityTest.selfSignedContext(dir);
    int dripping = 2 * RingAcceptor.HANDSHAKE_THREADS;
    long[] start = new long[1];
    ScheduledExecutorService drip = Executors.newSingleThreadScheduledExecutor();
    try {
      comms =
          Rings.form(
              3,
              b ->
                  b.optSslContext(tls)
                      .optConnectTimeout(Duration.ofSeconds(30))
                      .optHandshakeTimeout(Duration.ofSeconds(2)),
              listeners -> {
                InetSocketAddress target =
                    new InetSocketAddress("127.0.0.1", listeners.get(1).port());
                try {
                  for (int i = 0; i < dripping; i++) {
                    SocketChannel s = SocketChannel.open(target);
                    strangers.add(s);
                    // A handshake record of 512 bytes announced: content type 22, TLS 1.0.
                    s.write(ByteBuffer.wrap(new byte[] {22, 3, 1, 2, 0}));
                  }
                } catch (IOException e) {
                  throw new UncheckedIOException(e);
                }
                drip.scheduleAtFixedRate(
                    () -> {
                      for (SocketChannel s : strangers) {
                        try {
                          s.write(ByteBuffer.wrap(new byte[] {1}));
                        } catch (IOException | RuntimeException closed) {
                          // dropped by the acceptor: what the test wants
                        }
                      }
                    },
                    100,
                    100,
                    TimeUnit.MILLISECONDS);
                start[0] = System.nanoTime();
              });
    } finally {
      drip.shutdownNow();
      assertThat(drip.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
    }
    double seconds = (System.nanoTime() - start[0]) / 1e9;
    assertThat(seconds)
        .as("seconds to form the TLS ring behind %d dripping strangers", dripping)
        .isLessThan(15);
    assertRejected(comms.get(1), dripping);
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
  void strangersArrivingWhileTheNeighbourIsLateAreDroppedWithinTheirShortDeadline()
      throws Exception {
    // The neighbour (rank 0) starts late; meanwhile 20 idle connections come and go: each is
    // dropped about a second (RingAcceptor.PRE_AUTH_TIMEOUT) after it connected, not at the
    // handshake timeout (10 s), and none is still open when rank 0 arrives. The bound lies between
    // the two with seconds to spare on either side: a loaded machine may add some to the second.
    RingListener l0 = RingListener.bind("127.0.0.1");
    RingListener l1 = RingListener.bind("127.0.0.1");
    List<String> peers = List.of(l0.address(), l1.address());
    JobSecret secret = JobSecret.generate();
    InetSocketAddress target = new InetSocketAddress("127.0.0.1", l1.port());
    List<Rings.Outcome<Communicator>> outcomes =
        Rings.runEach(
            2,
            r -> {
              if (r == 0) {
                for (int i = 0; i < 20; i++) {
                  strangers.add(SocketChannel.open(target));
                }
                long opened = System.nanoTime();
                for (SocketChannel s : strangers) {
                  s.socket().setSoTimeout(9000); // below the handshake timeout
                  assertThat(s.socket().getInputStream().read()).isEqualTo(-1);
                }
                assertThat((System.nanoTime() - opened) / 1e9)
                    .as("seconds until all were dropped")
                    .isLessThan(
                        (RingAcceptor.PRE_AUTH_TIMEOUT.toMillis()
                                + Communicator.DEFAULT_HANDSHAKE_TIMEOUT.toMillis())
                            / 2e3);
              }
              return Communicator.builder()
                  .setRank(r)
                  .setPeers(peers)
                  .setSecret(secret)
                  .setListener(r == 0 ? l0 : l1)
                  .build();
            });
    comms = new ArrayList<>();
    for (Rings.Outcome<Communicator> o : outcomes) {
      if (o.value != null) {
        comms.add(o.value);
      }
    }
    for (Rings.Outcome<Communicator> o : outcomes) {
      assertThat(o.error).isNull();
    }
    assertRejected(comms.get(1), 20);
  }

  /**
   * {@code c} rejects exactly {@code n} connections. The ring may form while the last strangers
   * still hold their handshake threads (the neighbour got one as soon as the first were dropped, on
   * a loaded machine before the rest): each is still dropped at its own deadline, soon after, so
   * the count is awaited (20 s at most) before it is compared.
   */
  private static void assertRejected(Communicator c, int n) throws InterruptedException {
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (c.rejectedConnections() < n && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    assertThat(c.rejectedConnections()).isEqualTo(n);
  }
}
