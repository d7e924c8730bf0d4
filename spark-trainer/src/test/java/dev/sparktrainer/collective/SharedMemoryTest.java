package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Rings whose same-host neighbours exchange data through shared memory, against TCP rings. */
class SharedMemoryTest {
  /** The segments' directory, private to each test so that leftovers are seen. */
  @TempDir Path shmDir;

  @TempDir Path elsewhere;
  private List<Communicator> comms;
  private List<Communicator> tcp;

  @AfterEach
  void closeRings() throws IOException {
    Rings.closeAll(comms);
    Rings.closeAll(tcp);
    for (List<Communicator> ring : Arrays.asList(comms, tcp)) {
      if (ring != null) {
        Rings.assertClosed(ring);
      }
    }
    Rings.assertNoCommunicatorThreads();
    assertThat(filesIn(shmDir)).as("files left in the shared memory directory").isEmpty();
    assertThat(mappingsOf(shmDir))
        .as("segments still mapped after close (their memory is not freed)")
        .isEmpty();
  }

  /** This process's mappings of files that were in {@code dir} (Linux; empty elsewhere). */
  static List<String> mappingsOf(Path dir) throws IOException {
    Path maps = Path.of("/proc/self/maps");
    if (!Files.isReadable(maps)) {
      return List.of();
    }
    String prefix = dir.toString() + "/";
    return Files.readAllLines(maps).stream().filter(l -> l.contains(prefix)).toList();
  }

  private static List<Path> filesIn(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.toList();
    }
  }

  private static void assertTransports(List<Communicator> ring, LinkTransport expected) {
    for (Communicator c : ring) {
      assertThat(c.rightTransport())
          .as("rank %d -> rank %d", c.rank(), (c.rank() + 1) % ring.size())
          .isEqualTo(expected);
      assertThat(c.leftTransport()).as("rank %d <- its left", c.rank()).isEqualTo(expected);
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3})
  void resultsAreBitIdenticalToTcp(int n) throws IOException {
    comms = Rings.form(n, b -> b.optSharedMemoryDirectory(shmDir).optChunkBytes(256 * 1024));
    tcp = Rings.form(n, b -> b.optSharedMemory(false).optChunkBytes(256 * 1024));
    assertTransports(comms, LinkTransport.SHARED_MEMORY);
    assertTransports(tcp, LinkTransport.TCP);
    assertThat(filesIn(shmDir)).as("names deleted once both ends mapped the files").isEmpty();
    assertThat(mappingsOf(shmDir))
        .as("mapped twice per link (both ends in this JVM)")
        .hasSize(2 * n);
    long seed = 42;
    for (ElementType type : ElementType.values()) {
      for (ReduceOp op : ReduceOp.values()) {
        for (int count : new int[] {0, 1, n + 1, 1001, 40_000, 300_007}) {
          compare(n, type, op, count, seed++);
        }
      }
    }
    // several MB: many chunks, more than the 4 MiB ring holds at once
    compare(n, ElementType.FLOAT32, ReduceOp.SUM, (5 << 20) / 4 + 1, seed++);
    compare(n, ElementType.FLOAT32, ReduceOp.MEAN, (5 << 20) / 4 + 1, seed++);
    // the other collectives
    List<Object> viaShm = Rings.onEachOk(comms, SharedMemoryTest::otherCollectives);
    List<Object> viaTcp = Rings.onEachOk(tcp, SharedMemoryTest::otherCollectives);
    assertThat(viaShm).isEqualTo(viaTcp);
  }

  /** Random inputs (so float sums depend on the order of additions), the same on both rings. */
  private void compare(int n, ElementType type, ReduceOp op, int count, long seed) {
    List<byte[]> a = Rings.onEachOk(comms, c -> reduceRandom(c, type, op, count, seed));
    List<byte[]> b = Rings.onEachOk(tcp, c -> reduceRandom(c, type, op, count, seed));
    String what = type + " " + op + " " + count + " elements, " + n + " ranks";
    for (int r = 0; r < n; r++) {
      assertThat(a.get(r)).as("%s: rank %d, shared memory vs TCP", what, r).isEqualTo(b.get(r));
      assertThat(a.get(r)).as("%s: rank %d vs rank 0", what, r).isEqualTo(a.get(0));
    }
  }

  private static byte[] reduceRandom(
      Communicator c, ElementType type, ReduceOp op, int count, long seed) {
    SplittableRandom random = new SplittableRandom(seed * 31 + c.rank());
    ByteBuffer buf = ByteBuffer.allocateDirect(count * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < count; i++) {
      switch (type) {
        case FLOAT32:
          buf.putFloat((float) random.nextGaussian() * (1 + random.nextInt(1000)));
          break;
        case FLOAT64:
          buf.putDouble(random.nextGaussian() * (1 + random.nextInt(1000)));
          break;
        default:
          buf.putLong(random.nextLong());
      }
    }
    buf.flip();
    c.allReduce(buf, type, op);
    byte[] out = new byte[buf.remaining()];
    buf.get(out);
    return out;
  }

  private static Object otherCollectives(Communicator c) {
    List<Object> out = new ArrayList<>();
    float[] b = new float[100_003];
    if (c.rank() == c.size() - 1) {
      for (int i = 0; i < b.length; i++) {
        b[i] = i * 0.5f;
      }
    }
    c.broadcast(b, c.size() - 1);
    out.add(Arrays.hashCode(b));
    for (byte[] g : c.allGather(new byte[c.rank() * 70_001 + 3])) {
      out.add(g.length);
    }
    c.barrier();
    return out;
  }

  @Test
  void switchedOffItIsTcp() {
    comms = Rings.form(3, b -> b.optSharedMemory(false).optSharedMemoryDirectory(shmDir));
    assertTransports(comms, LinkTransport.TCP);
    checkWorks(comms);
  }

  @Test
  void switchedOffOnOneRankOnlyItsTwoLinksAreTcp() {
    // rank 1 declines rank 0's offer and offers nothing to rank 2; rank 2 -> rank 0 is unaffected
    comms = Rings.formEach(3, (r, b) -> b.optSharedMemoryDirectory(shmDir).optSharedMemory(r != 1));
    assertThat(comms.get(0).rightTransport()).isEqualTo(LinkTransport.TCP);
    assertThat(comms.get(1).leftTransport()).isEqualTo(LinkTransport.TCP);
    assertThat(comms.get(1).rightTransport()).isEqualTo(LinkTransport.TCP);
    assertThat(comms.get(2).leftTransport()).isEqualTo(LinkTransport.TCP);
    assertThat(comms.get(2).rightTransport()).isEqualTo(LinkTransport.SHARED_MEMORY);
    assertThat(comms.get(0).leftTransport()).isEqualTo(LinkTransport.SHARED_MEMORY);
    checkWorks(comms);
  }

  /**
   * Rank r's segment directory when the two ranks are on "different hosts": their own /dev/shm
   * each.
   */
  private Path dirOf(int rank) {
    return rank == 0 ? shmDir : elsewhere;
  }

  @Test
  void aPeerThatCannotOpenTheFileFallsBackToTcp() {
    // each accepting rank looks in its own directory, as a rank in another container would
    comms =
        Rings.formEach(
            2,
            (r, b) ->
                b.optSharedMemoryDirectory(dirOf(r))
                    .sharedMemoryServerView(p -> dirOf(r).resolve(p.getFileName())));
    assertTransports(comms, LinkTransport.TCP);
    checkWorks(comms);
  }

  @Test
  void aNamesakeFileWithoutTheNonceIsNotUsed() throws IOException {
    // another host's /dev/shm could hold a file of that name: the nonce tells them apart
    List<Path> namesakes = new CopyOnWriteArrayList<>();
    comms =
        Rings.formEach(
            2,
            (r, b) ->
                b.optSharedMemoryDirectory(dirOf(r))
                    .sharedMemoryServerView(
                        p -> {
                          Path namesake = dirOf(r).resolve(p.getFileName());
                          try {
                            Files.write(namesake, new byte[(int) Files.size(p)]);
                          } catch (IOException e) {
                            throw new UncheckedIOException(e);
                          }
                          namesakes.add(namesake);
                          return namesake;
                        }));
    assertTransports(comms, LinkTransport.TCP);
    assertThat(namesakes).hasSize(2);
    for (Path namesake : namesakes) {
      assertThat(namesake).as("a namesake that failed the nonce check is not deleted").exists();
      Files.delete(namesake);
    }
    checkWorks(comms);
  }

  @Test
  void anUnusableDirectoryMeansTcp() {
    comms = Rings.form(2, b -> b.optSharedMemoryDirectory(shmDir.resolve("missing")));
    assertTransports(comms, LinkTransport.TCP);
    checkWorks(comms);
  }

  @Test
  void aSmallRingCarriesLargeOperations() {
    comms =
        Rings.form(
            3,
            b ->
                b.optSharedMemoryDirectory(shmDir)
                    .optSharedMemoryBytes(4096)
                    .optChunkBytes(64 * 1024));
    assertTransports(comms, LinkTransport.SHARED_MEMORY);
    checkWorks(comms);
  }

  @Test
  void invalidRingSizeIsRejected() {
    RingListener l = RingListener.bind("127.0.0.1");
    try {
      assertThatThrownBy(
              () ->
                  Communicator.builder()
                      .setRank(0)
                      .setPeers(List.of(l.address(), "127.0.0.1:1"))
                      .setSecret(JobSecret.generate())
                      .setListener(l)
                      .optSharedMemoryBytes(3 << 20)
                      .build())
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("Invalid shared memory ring size 3145728");
    } finally {
      l.close();
    }
  }

  @Test
  void closingMidOperationFailsThePeerPromptly() {
    comms =
        Rings.form(
            2, b -> b.optSharedMemoryDirectory(shmDir).optOperationTimeout(Duration.ofSeconds(30)));
    assertTransports(comms, LinkTransport.SHARED_MEMORY);
    Communicator survivor = comms.get(0);
    long start = System.nanoTime();
    List<Rings.Outcome<Object>> outcomes =
        Rings.onEach(
            comms,
            c -> {
              if (c.rank() == 1) {
                c.close(); // never joins: its end of both links goes away
                return null;
              }
              c.allReduce(new float[1 << 20], ReduceOp.SUM);
              return null;
            });
    assertThat(outcomes.get(0).error)
        .isInstanceOf(CollectiveException.class)
        .hasMessageContaining("rank 0 of 2")
        .hasMessageContaining("rank 1 at " + survivor.peers().get(1));
    assertThat((outcomes.get(0).endNanos - start) / 1e9).as("seconds to fail").isLessThan(5);
  }

  private static void checkWorks(List<Communicator> ring) {
    int n = ring.size();
    for (int count : new int[] {1, 1001, 1_000_003}) {
      List<byte[]> got =
          Rings.onEachOk(
              ring, c -> Values.allReduceArray(c, ElementType.FLOAT32, ReduceOp.SUM, count));
      byte[] expected = Values.expected(ElementType.FLOAT32, ReduceOp.SUM, n, count);
      for (byte[] g : got) {
        Values.assertSameBytes(count + " elements", expected, g, ElementType.FLOAT32);
      }
    }
  }
}
