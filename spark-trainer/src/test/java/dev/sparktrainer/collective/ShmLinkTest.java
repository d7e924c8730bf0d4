package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The shared-memory link alone: two ends over a real mapped file and a real loopback socket. */
class ShmLinkTest {
  @TempDir Path dir;
  private ShmLink creator;
  private ShmLink acceptor;

  @AfterEach
  void close() {
    if (creator != null) {
      creator.abort();
    }
    if (acceptor != null) {
      acceptor.abort();
    }
  }

  /** creator = rank 0 at "host-a:1", acceptor = rank 1 at "host-b:2". */
  private void connect(int forward, int reverse) throws IOException {
    try (ServerSocketChannel server = ServerSocketChannel.open()) {
      server.bind(new InetSocketAddress("127.0.0.1", 0));
      SocketChannel a = SocketChannel.open(server.getLocalAddress());
      SocketChannel b = server.accept();
      Path file = dir.resolve("segment");
      ShmLink.Segment segment = ShmLink.create(file, forward, reverse);
      assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file)))
          .isEqualTo("rw-------");
      assertThat(Files.size(file)).isEqualTo(ShmLink.fileBytes(forward, reverse));
      creator = ShmLink.creator(new ChannelLink(a, 1, "host-b:2"), segment, "test");
      acceptor =
          ShmLink.acceptor(
              new ChannelLink(b, 0, "host-a:1"), ShmLink.open(file, segment.nonce), "test");
      Files.delete(file); // the mappings outlive the name
    }
  }

  private static long far() {
    return System.nanoTime() + Duration.ofSeconds(30).toNanos();
  }

  @ParameterizedTest(name = "ring of {0} bytes")
  @ValueSource(ints = {4096, 65536})
  void bytesArriveIntactAcrossWrapAroundInBothDirections(int capacity) throws Exception {
    connect(capacity, 4096);
    long total = 6L << 20;
    for (boolean forward : new boolean[] {true, false}) {
      ShmLink writer = forward ? creator : acceptor;
      ShmLink reader = forward ? acceptor : creator;
      AtomicReference<Throwable> writeError = new AtomicReference<>();
      Thread t =
          new Thread(
              () -> {
                try {
                  SplittableRandom sizes = new SplittableRandom(1);
                  SplittableRandom data = new SplittableRandom(2);
                  for (long sent = 0; sent < total; ) {
                    // larger than the ring, smaller, split between a header and a payload, heap or
                    // direct
                    int na = (int) Math.min(sizes.nextInt(0, 64), total - sent);
                    int nb = (int) Math.min(sizes.nextInt(1, 3 * capacity), total - sent - na);
                    ByteBuffer a = ByteBuffer.allocate(na);
                    ByteBuffer b =
                        sizes.nextBoolean()
                            ? ByteBuffer.allocateDirect(nb)
                            : ByteBuffer.allocate(nb);
                    fill(a, data);
                    fill(b, data);
                    writer.writeFully(a, nb == 0 && sizes.nextBoolean() ? null : b, far());
                    assertThat(a.hasRemaining() || b.hasRemaining()).isFalse();
                    sent += na + nb;
                  }
                } catch (Throwable e) {
                  writeError.set(e);
                }
              });
      t.start();
      SplittableRandom sizes = new SplittableRandom(3);
      SplittableRandom data = new SplittableRandom(2);
      ByteBuffer expected = ByteBuffer.allocate(4 * capacity);
      for (long received = 0; received < total; ) {
        int n = (int) Math.min(sizes.nextInt(1, 4 * capacity), total - received);
        ByteBuffer dst =
            sizes.nextBoolean() ? ByteBuffer.allocateDirect(n + 7) : ByteBuffer.allocate(n + 7);
        dst.position(7);
        reader.readFully(dst, far());
        assertThat(dst.position()).isEqualTo(n + 7);
        expected.clear().limit(n);
        fill(expected, data);
        dst.position(7);
        assertThat(dst).as("bytes %d..%d", received, received + n).isEqualTo(expected);
        received += n;
      }
      t.join(30_000);
      assertThat(writeError.get()).isNull();
    }
  }

  private static void fill(ByteBuffer b, SplittableRandom data) {
    while (b.hasRemaining()) {
      b.put((byte) data.nextInt());
    }
    b.flip();
  }

  @Test
  void abortWakesABlockedReaderAndABlockedWriter() throws Exception {
    connect(4096, 4096);
    creator.writeFully(
        ByteBuffer.allocate(4096), null, far()); // the acceptor never reads: the ring is full
    AtomicReference<Throwable> readFailure = new AtomicReference<>();
    AtomicReference<Throwable> writeFailure = new AtomicReference<>();
    Thread reader =
        new Thread(
            () ->
                readFailure.set(attempt(() -> creator.readFully(ByteBuffer.allocate(10), far()))));
    Thread writer =
        new Thread(
            () ->
                writeFailure.set(
                    attempt(() -> creator.writeFully(ByteBuffer.allocate(10), null, far()))));
    reader.start();
    writer.start();
    Rings.await(
        "both threads asleep",
        Duration.ofSeconds(10),
        () -> creator.readSleeps > 0 && creator.writeSleeps > 0);
    long start = System.nanoTime();
    creator.abort();
    reader.join(20_000);
    writer.join(20_000);
    assertThat(reader.isAlive() || writer.isAlive()).isFalse();
    // Woken by the abort, not by their deadline (30 s away): the exceptions below say so; the
    // bound, half of that deadline, leaves a loaded machine seconds to schedule the two threads.
    assertThat((System.nanoTime() - start) / 1e9).as("seconds to wake").isLessThan(15);
    assertThat(readFailure.get()).isInstanceOf(AsynchronousCloseException.class);
    assertThat(writeFailure.get()).isInstanceOf(AsynchronousCloseException.class);
    assertThat(creator.channel().isOpen()).isFalse();
    assertThatThrownBy(() -> creator.readFully(ByteBuffer.allocate(1), far()))
        .isInstanceOf(AsynchronousCloseException.class);
    assertThat(creator.unmapped()).as("unmapped once the last thread left").isTrue();
    assertThat(acceptor.unmapped()).isFalse();
    acceptor.abort();
    assertThat(acceptor.unmapped()).as("unmapped at once when idle").isTrue();
    assertThat(SharedMemoryTest.mappingsOf(dir)).isEmpty();
  }

  @Test
  void aBlockedReaderNoticesThatThePeerWentAway() throws Exception {
    connect(4096, 4096);
    creator.writeFully(ByteBuffer.allocate(100), null, far());
    AtomicReference<Throwable> failure = new AtomicReference<>();
    ByteBuffer dst = ByteBuffer.allocate(101);
    Thread reader = new Thread(() -> failure.set(attempt(() -> acceptor.readFully(dst, far()))));
    reader.start();
    Rings.await("the reader asleep", Duration.ofSeconds(10), () -> acceptor.readSleeps > 0);
    long start = System.nanoTime();
    creator.abort(); // as when its process dies: the kernel closes its socket
    reader.join(20_000);
    assertThat(reader.isAlive()).isFalse();
    // By the end of stream (EOFException below), not by the deadline 30 s away.
    assertThat((System.nanoTime() - start) / 1e9).as("seconds to notice").isLessThan(15);
    assertThat(failure.get())
        .isInstanceOf(EOFException.class)
        .hasMessageContaining("rank 0 at host-a:1");
    assertThat(dst.position()).as("the bytes sent before are delivered").isEqualTo(100);
  }

  @Test
  void deadlinesFailWithTheirPeerNamed() throws Exception {
    connect(4096, 4096);
    long start = System.nanoTime();
    assertThatThrownBy(
            () -> acceptor.readFully(ByteBuffer.allocate(1), System.nanoTime() + 300_000_000L))
        .isInstanceOf(SocketTimeoutException.class)
        .hasMessageContaining("waiting for data from rank 0 at host-a:1");
    assertThat((System.nanoTime() - start) / 1e9).isBetween(0.25, 3.0);
    assertThatThrownBy(
            () ->
                creator.writeFully(
                    ByteBuffer.allocate(4097), null, System.nanoTime() + 300_000_000L))
        .isInstanceOf(SocketTimeoutException.class)
        .hasMessageContaining("sending to rank 1 at host-b:2");
  }

  @Test
  void aFileWithoutTheNonceIsRefused() throws Exception {
    Path file = dir.resolve("segment");
    ShmLink.Segment segment = ShmLink.create(file, 4096, 4096);
    byte[] other = segment.nonce.clone();
    other[0] ^= 1;
    assertThatThrownBy(() -> ShmLink.open(file, other))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("nonce");
    Path garbage = dir.resolve("garbage");
    Files.write(garbage, new byte[3 * 4096]);
    assertThatThrownBy(() -> ShmLink.open(garbage, segment.nonce)).isInstanceOf(IOException.class);
    assertThatThrownBy(() -> ShmLink.open(dir.resolve("missing"), segment.nonce))
        .isInstanceOf(IOException.class);
    assertThatThrownBy(() -> ShmLink.create(file, 4096, 4096))
        .isInstanceOf(IOException.class); // never reuses a name
  }

  private interface Io {
    void run() throws Exception;
  }

  private static Throwable attempt(Io io) {
    try {
      io.run();
      return null;
    } catch (Throwable e) {
      return e;
    }
  }
}
