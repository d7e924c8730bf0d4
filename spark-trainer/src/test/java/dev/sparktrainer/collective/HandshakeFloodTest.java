package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

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
    assertThat(comms.get(1).rejectedConnections()).isEqualTo(idle + halfHellos);
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

  @Test
  void strangersArrivingWhileTheNeighbourIsLateAreDroppedWithinTheirShortDeadline()
      throws Exception {
    // The neighbour (rank 0) starts 3 s late; meanwhile 20 idle connections come and go: each is
    // dropped about a second after it connected, not 10 s, and none is still open when rank 0
    // arrives.
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
                  s.socket().setSoTimeout(4000);
                  assertThat(s.socket().getInputStream().read()).isEqualTo(-1);
                }
                assertThat((System.nanoTime() - opened) / 1e9)
                    .as("seconds until all were dropped")
                    .isLessThan(2.5);
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
    assertThat(comms.get(1).rejectedConnections()).isEqualTo(20);
  }
}
