package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Dead, stalled and misbehaving peers: always an exception naming ranks, peer and operation, never
 * a hang.
 */
class FaultsTest {
  private List<Communicator> comms;

  @AfterEach
  void closeRing() {
    Rings.closeAll(comms);
    if (comms != null) {
      Rings.assertClosed(comms);
    }
    Rings.assertNoCommunicatorThreads();
  }

  @Test
  void peerWhoseSocketsCloseMidOperation() throws Exception {
    int n = 3;
    comms =
        Rings.form(n, b -> b.optChunkBytes(64 * 1024).optOperationTimeout(Duration.ofSeconds(30)));
    Communicator victim = comms.get(1);
    Thread killer =
        new Thread(
            () -> {
              Rings.await(
                  "rank 1 in the middle of an all-reduce",
                  Duration.ofSeconds(30),
                  () -> victim.framesReceived() >= 5);
              victim.leftLink().abort(); // the sockets vanish, as when the executor dies
              victim.rightLink().abort();
            });
    killer.start();
    long start = System.nanoTime();
    List<Rings.Outcome<Object>> outcomes =
        Rings.onEach(
            comms,
            c -> {
              float[] a = new float[1 << 20];
              for (int it = 0; it < 1000; it++) {
                c.allReduce(a, ReduceOp.SUM);
              }
              return null;
            });
    killer.join(10_000);
    for (Rings.Outcome<Object> o : outcomes) {
      assertThat(o.error).isInstanceOf(CollectiveException.class).hasMessageContaining("allReduce");
      assertThat((o.endNanos - start) / 1e9).as("seconds to fail").isLessThan(20);
    }
    // The first neighbour to notice blames the victim; the other may instead see that neighbour
    // close its sockets (failure spreads around the ring by design, so nobody waits for a
    // deadline).
    assertThat(outcomes.get(0).error).hasMessageContaining("rank 0 of 3");
    assertThat(outcomes.get(2).error).hasMessageContaining("rank 2 of 3");
    assertThat(List.of(outcomes.get(0).error, outcomes.get(2).error))
        .anySatisfy(
            e -> {
              assertThat(e).hasMessageContaining("rank 1 at " + victim.peers().get(1));
              assertThat(((CollectiveException) e).peerRank()).isEqualTo(1);
              assertThat(((CollectiveException) e).operation()).isEqualTo("allReduce");
            });
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3})
  void peerThatStopsReadingAndSending(int n) {
    Duration timeout = Duration.ofMillis(1500);
    comms = Rings.form(n, b -> b.optOperationTimeout(timeout));
    CountDownLatch release = new CountDownLatch(1);
    long start = System.nanoTime();
    List<Rings.Outcome<Object>> outcomes =
        Rings.onEach(
            comms,
            c -> {
              if (c.rank() == 1) {
                // Wedged: alive, sockets open, but not consuming or producing anything.
                release.await(30, TimeUnit.SECONDS);
                return null;
              }
              try {
                c.allReduce(new float[8 << 20], ReduceOp.SUM);
              } finally {
                if (c.rank() == 0) {
                  release.countDown();
                }
              }
              return null;
            });
    for (int r = 0; r < n; r++) {
      if (r == 1) {
        continue;
      }
      Throwable e = outcomes.get(r).error;
      assertThat(e)
          .isInstanceOf(CollectiveException.class)
          .hasMessageContaining("rank " + r + " of " + n)
          .hasMessageContaining("allReduce")
          .hasMessageContaining("rank 1 at " + comms.get(0).peers().get(1));
      double seconds = (outcomes.get(r).endNanos - start) / 1e9;
      assertThat(seconds).as("seconds to fail").isLessThan(timeout.toMillis() / 1000.0 + 5);
    }
    assertThat(outcomes.get(0).error.getMessage())
        .containsAnyOf("timed out", "closed by", "connection lost");
  }

  @Test
  void unreachablePeerFailsTheConnectWithinTheTimeout() {
    RingListener mine = RingListener.bind("127.0.0.1");
    RingListener deaf = RingListener.bind("127.0.0.1"); // listens, never accepts or answers
    RingListener gone = RingListener.bind("127.0.0.1");
    String goneAddress = gone.address();
    gone.close(); // nothing listens there any more
    try {
      for (String peer : new String[] {deaf.address(), goneAddress}) {
        long start = System.nanoTime();
        RingListener listener = RingListener.bind("127.0.0.1");
        assertThatThrownBy(
                () ->
                    Communicator.builder()
                        .setRank(0)
                        .setPeers(List.of(listener.address(), peer))
                        .setSecret(JobSecret.generate())
                        .setListener(listener)
                        .optConnectTimeout(Duration.ofMillis(1000))
                        .build())
            .isInstanceOf(CollectiveException.class)
            .hasMessageContaining("rank 0 of 2")
            .hasMessageContaining("rank 1 at " + peer)
            .satisfies(e -> assertThat(((CollectiveException) e).operation()).isEqualTo("connect"));
        assertThat((System.nanoTime() - start) / 1e9).isLessThan(5);
        assertThat(listener.isOpen()).isFalse();
      }
    } finally {
      mine.close();
      deaf.close();
    }
  }

  /** A peer that authenticates correctly, then sends a crafted frame. */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"garbage", "sequence", "job", "length", "operation", "version"})
  void malformedFramesFailFastWithAClearError(String kind) throws Exception {
    JobSecret secret = JobSecret.generate();
    RingListener l0 = RingListener.bind("127.0.0.1");
    RingListener l1 = RingListener.bind("127.0.0.1");
    List<String> peers = List.of(l0.address(), l1.address());
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    Link toRank0 = null;
    Link fromRank0 = null;
    try {
      List<Rings.Outcome<Object>> built =
          Rings.runEach(
              2,
              r -> {
                if (r == 0) {
                  return Communicator.builder()
                      .setRank(0)
                      .setPeers(peers)
                      .setSecret(secret)
                      .setListener(l0)
                      .optOperationTimeout(Duration.ofSeconds(20))
                      .build();
                }
                SocketChannel out =
                    SocketChannel.open(new InetSocketAddress("127.0.0.1", l0.port()));
                Link a = new ChannelLink(out, 0, l0.address());
                Handshake.client(a, secret, 1, 0, 2, deadline);
                ByteBuffer noOffer = ByteBuffer.allocate(12);
                noOffer
                    .putInt(Wire.MAGIC)
                    .putShort(Wire.VERSION)
                    .putShort(ShmNegotiation.OFFER)
                    .putInt(0)
                    .flip();
                a.writeFully(noOffer, null, deadline); // this fake peer speaks TCP only
                l1.channel().configureBlocking(true);
                Link b = new ChannelLink(l1.channel().accept(), 0, l0.address());
                Handshake.server(b, secret, 1, 0, 2, deadline, deadline);
                assertThat(
                        ShmNegotiation.server(
                            b,
                            new ShmNegotiation.Settings(false, null, 0, p -> p),
                            secret.jobId(),
                            1,
                            deadline))
                    .isSameAs(b); // declines rank 0's offer
                return new Link[] {a, b};
              });
      assertThat(built.get(0).error).isNull();
      assertThat(built.get(1).error).isNull();
      Communicator c0 = (Communicator) built.get(0).value;
      comms = List.of(c0);
      toRank0 = ((Link[]) built.get(1).value)[0];
      fromRank0 = ((Link[]) built.get(1).value)[1];

      int tag =
          Wire.reduceTag(
              Wire.OP_SMALL_ALL_REDUCE, ElementType.FLOAT32, ReduceOp.SUM, WirePrecision.FP32);
      ByteBuffer h = ByteBuffer.allocate(Wire.HEADER_BYTES);
      Wire.putHeader(h, secret.jobId(), 0, tag, 4000);
      String expected;
      switch (kind) {
        case "garbage":
          h = ByteBuffer.wrap("GET / HTTP/1.1\r\nHost: x\r\n\r\n12345".getBytes());
          expected = "bad magic";
          break;
        case "sequence":
          Wire.putHeader(h, secret.jobId(), 7, tag, 4000);
          expected = "out-of-sequence frame #7, expected #0";
          break;
        case "job":
          Wire.putHeader(h, secret.jobId() + 1, 0, tag, 4000);
          expected = "foreign job";
          break;
        case "length":
          Wire.putHeader(h, secret.jobId(), 0, tag, 1 << 30);
          expected = "frame payload of 1073741824 bytes, expected 4000";
          break;
        case "operation":
          Wire.putHeader(h, secret.jobId(), 0, Wire.broadcastTag(0), 4000);
          expected = "got broadcast from root 0";
          break;
        default:
          h.putShort(4, (short) 99);
          expected = "protocol version 99";
      }
      toRank0.writeFully(h, ByteBuffer.allocate(4000), deadline);
      long start = System.nanoTime();
      assertThatThrownBy(() -> c0.allReduce(new float[1000], ReduceOp.SUM))
          .isInstanceOf(CollectiveException.class)
          .hasMessageContaining("rank 0 of 2, allReduce #1")
          .hasMessageContaining("protocol error from rank 1 at " + l1.address())
          .hasMessageContaining(expected)
          .satisfies(e -> assertThat(((CollectiveException) e).peerRank()).isEqualTo(1));
      assertThat((System.nanoTime() - start) / 1e9).as("seconds to fail").isLessThan(5);
      assertThat(c0.isClosed()).isTrue();
      assertThatThrownBy(() -> c0.barrier())
          .isInstanceOf(CollectiveException.class)
          .hasMessageContaining("broken by an earlier failure");
      // rank 0 closed its sockets: the fake peer sees the end of the stream
      ByteBuffer rest = ByteBuffer.allocate(1 << 20);
      Link fake = fromRank0;
      assertThatThrownBy(
              () -> fake.readFully(rest, System.nanoTime() + Duration.ofSeconds(5).toNanos()))
          .isInstanceOf(IOException.class);
    } finally {
      if (toRank0 != null) {
        toRank0.abort();
      }
      if (fromRank0 != null) {
        fromRank0.abort();
      }
      l0.close();
      l1.close();
    }
  }

  @Test
  void closeIsIdempotentAndEndsARunningOperation() {
    comms = Rings.form(2, b -> {});
    Communicator c0 = comms.get(0);
    Thread closer =
        new Thread(
            () -> {
              Rings.await("rank 0 inside allReduce", Duration.ofSeconds(10), c0::inOperation);
              c0.close();
              c0.close();
            });
    // rank 1 never joins this operation; rank 0 waits until it is closed from another thread
    closer.start();
    assertThatThrownBy(() -> c0.allReduce(new float[10 << 20], ReduceOp.SUM))
        .isInstanceOf(CollectiveException.class)
        .hasMessageContaining("rank 0 of 2")
        .hasMessageContaining("closed during the operation");
    assertThatThrownBy(() -> c0.barrier()).isInstanceOf(RuntimeException.class);
    comms.get(1).close();
    comms.get(1).close();
  }
}
