package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.management.ThreadMXBean;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class AllReduceTest {
  private List<Communicator> comms;

  @AfterEach
  void closeRing() {
    Rings.closeAll(comms);
    if (comms != null) {
      Rings.assertClosed(comms);
    }
    Rings.assertNoCommunicatorThreads();
  }

  /** Default path selection: small messages on the latency path, large ones on the ring. */
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 5, 6, 7, 8})
  void everyTypeOpAndSizeMatchesTheClosedFormOnEveryRank(int n) {
    comms = Rings.form(n, b -> {});
    int large = (3 << 20) / 4 + 3; // several MB, not divisible by any n in 2..8
    for (ElementType type : ElementType.values()) {
      for (ReduceOp op : ReduceOp.values()) {
        for (int count : new int[] {0, 1, n + 1, 1001}) {
          check(n, type, op, count);
        }
      }
    }
    check(n, ElementType.FLOAT32, ReduceOp.SUM, large);
    check(n, ElementType.FLOAT32, ReduceOp.MEAN, large);
    check(n, ElementType.FLOAT64, ReduceOp.MIN, large / 2);
    check(n, ElementType.INT64, ReduceOp.MAX, large / 2);
  }

  /**
   * Everything through the ring, in many small chunks: segments shorter than a chunk, empty ones.
   */
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3, 5, 8})
  void ringPathWithTinyChunks(int n) {
    comms = Rings.form(n, b -> b.optChunkBytes(1024).optSmallMessageBytes(0));
    for (ElementType type : ElementType.values()) {
      for (ReduceOp op : ReduceOp.values()) {
        for (int count : new int[] {0, 1, n - 1, 7, 1001, 10_007}) {
          check(n, type, op, count);
        }
      }
    }
  }

  private void check(int n, ElementType type, ReduceOp op, int count) {
    List<byte[]> results = Rings.onEachOk(comms, c -> Values.allReduceArray(c, type, op, count));
    byte[] expected = Values.expected(type, op, n, count);
    for (int r = 0; r < n; r++) {
      Values.assertSameBytes(
          n + " ranks, " + type + " " + op + " x" + count + ", rank " + r,
          expected,
          results.get(r),
          type);
    }
  }

  /**
   * Values whose float sum depends on the order (1e8 + 1 - 1e8 != 1e8 - 1e8 + 1): every rank must
   * hold the same bits, those of the documented order (segment k accumulated from rank k onwards on
   * the ring, rank order 0..N-1 on the small path).
   */
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {3, 5, 8})
  void orderSensitiveSumsAreBitIdenticalAndFollowTheDocumentedOrder(int n) {
    int count = 4099;
    comms = Rings.form(n, b -> b.optChunkBytes(1024).optSmallMessageBytes(1024));
    for (int small = 0; small < 2; small++) {
      int elements = small == 1 ? 100 : count; // 400 bytes: small path; 16 KB: ring
      List<float[]> results =
          Rings.onEachOk(
              comms,
              c -> {
                float[] a = new float[elements];
                for (int i = 0; i < elements; i++) {
                  a[i] = tricky(c.rank(), i);
                }
                c.allReduce(a, ReduceOp.SUM);
                return a;
              });
      int q = elements / n;
      int rem = elements % n;
      int differsFromRankOrder = 0;
      for (int i = 0; i < elements; i++) {
        int first = 0;
        if (small == 0) {
          while (!(i >= RingAllReduce.segmentStart(first, q, rem)
              && i
                  < RingAllReduce.segmentStart(first, q, rem)
                      + RingAllReduce.segmentLength(first, q, rem))) {
            first++;
          }
        }
        float acc = tricky(first, i);
        for (int j = 1; j < n; j++) {
          acc = acc + tricky((first + j) % n, i);
        }
        float rankOrder = tricky(0, i);
        for (int r = 1; r < n; r++) {
          rankOrder += tricky(r, i);
        }
        if (Float.floatToRawIntBits(rankOrder) != Float.floatToRawIntBits(acc)) {
          differsFromRankOrder++;
        }
        for (int r = 0; r < n; r++) {
          assertThat(Float.floatToRawIntBits(results.get(r)[i]))
              .as("rank %d element %d (small path %s)", r, i, small == 1)
              .isEqualTo(Float.floatToRawIntBits(acc));
        }
      }
      if (small == 0) {
        // The data really is order-sensitive, so the bit-equality above could have failed.
        assertThat(differsFromRankOrder).isGreaterThan(0);
      }
    }
  }

  private static float tricky(int r, int i) {
    switch ((r * 7 + i) % 4) {
      case 0:
        return 1e8f;
      case 1:
        return -1e8f;
      case 2:
        return 1.0f + r * 0.25f;
      default:
        return 3.0e-3f * (i % 17);
    }
  }

  /** Reduced-precision transport: FP32 accumulation, 16-bit wire, identical bits everywhere. */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"BF16", "FP16"})
  void reducedPrecisionWireIsDeterministicAndClose(String precision) {
    WirePrecision wire = WirePrecision.valueOf(precision);
    int n = 4;
    int count = 5003;
    comms =
        Rings.form(n, b -> b.optChunkBytes(1024).optSmallMessageBytes(0).optWirePrecision(wire));
    for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.MEAN, ReduceOp.MAX}) {
      List<float[]> results =
          Rings.onEachOk(
              comms,
              c -> {
                float[] a = new float[count];
                for (int i = 0; i < count; i++) {
                  a[i] = smooth(c.rank(), i);
                }
                c.allReduce(a, op);
                return a;
              });
      int q = count / n;
      int rem = count % n;
      int k = 0;
      for (int i = 0; i < count; i++) {
        while (i
            >= RingAllReduce.segmentStart(k, q, rem) + RingAllReduce.segmentLength(k, q, rem)) {
          k++;
        }
        // Emulate: each hop rounds the partial to the wire format, adds in FP32; the owner rounds.
        float acc = smooth(k, i);
        double exact = smooth(k, i);
        for (int j = 1; j < n; j++) {
          float partial = HalfFloats.decode(HalfFloats.encode(acc, wire), wire);
          float local = smooth((k + j) % n, i);
          acc = op == ReduceOp.MAX ? Math.max(local, partial) : local + partial;
          exact = op == ReduceOp.MAX ? Math.max(exact, local) : exact + local;
        }
        if (op == ReduceOp.MEAN) {
          acc = acc / n;
          exact = exact / n;
        }
        acc = HalfFloats.decode(HalfFloats.encode(acc, wire), wire);
        for (int r = 0; r < n; r++) {
          assertThat(Float.floatToRawIntBits(results.get(r)[i]))
              .as("%s %s rank %d element %d", wire, op, r, i)
              .isEqualTo(Float.floatToRawIntBits(acc));
        }
        double tolerance = (wire == WirePrecision.BF16 ? 0x1p-8 : 0x1p-11) * 4 * n * 3;
        assertThat(Math.abs(acc - exact)).isLessThanOrEqualTo(tolerance);
      }
    }
  }

  /**
   * One buffer reduced region by region, its position and limit moved between calls (as the trainer
   * reduces its gradient arena bucket by bucket), in FP32 and BF16: each region as if alone.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"FP32", "BF16"})
  void oneBufferReducedRegionByRegion(String precision) {
    WirePrecision wire = WirePrecision.valueOf(precision);
    int n = 3;
    int[] regions = {1000, 70_001, 5, 40_000}; // floats: small-message and ring paths, odd sizes
    comms = Rings.form(n, b -> b.optChunkBytes(4096).optWirePrecision(wire));
    List<float[]> results =
        Rings.onEachOk(
            comms,
            c -> {
              int total = Arrays.stream(regions).sum();
              ByteBuffer buf = ByteBuffer.allocateDirect(total * 4).order(ByteOrder.LITTLE_ENDIAN);
              for (int i = 0; i < total; i++) {
                buf.putFloat(i * 4, smooth(c.rank(), i));
              }
              ByteBuffer view = buf.duplicate().order(ByteOrder.LITTLE_ENDIAN);
              int at = 0;
              for (int r : regions) {
                view.limit((at + r) * 4).position(at * 4);
                c.allReduce(view, ElementType.FLOAT32, ReduceOp.MEAN);
                at += r;
              }
              float[] out = new float[total];
              buf.asFloatBuffer().get(out);
              return out;
            });
    for (int r = 1; r < n; r++) {
      assertThat(results.get(r)).as("rank %d equals rank 0", r).containsExactly(results.get(0));
    }
    double tolerance = wire == WirePrecision.BF16 ? 0.05 : 1e-5;
    for (int i = 0; i < results.get(0).length; i++) {
      double exact = 0;
      for (int k = 0; k < n; k++) {
        exact += smooth(k, i);
      }
      assertThat((double) results.get(0)[i])
          .as("element %d", i)
          .isCloseTo(exact / n, Offset.offset(tolerance));
    }
  }

  private static float smooth(int r, int i) {
    return (float) (3 * Math.sin(i * 0.37 + r));
  }

  /**
   * The ByteBuffer API reduces position..limit in place and leaves position, limit and the rest
   * alone.
   */
  @Test
  void directBufferBetweenPositionAndLimitWithoutCopy() {
    int n = 3;
    int count = 300_001; // ring path
    comms = Rings.form(n, b -> {});
    List<ByteBuffer> results =
        Rings.onEachOk(
            comms,
            c -> {
              ByteBuffer buf =
                  ByteBuffer.allocateDirect(16 + count * 4 + 16).order(ByteOrder.LITTLE_ENDIAN);
              for (int i = 0; i < buf.capacity(); i++) {
                buf.put(i, (byte) 0x5a);
              }
              buf.position(16).limit(16 + count * 4);
              buf.put(16, Values.input(ElementType.FLOAT32, c.rank(), count));
              c.allReduce(buf, ElementType.FLOAT32, ReduceOp.SUM);
              assertThat(buf.position()).isEqualTo(16);
              assertThat(buf.limit()).isEqualTo(16 + count * 4);
              return buf;
            });
    byte[] expected = Values.expected(ElementType.FLOAT32, ReduceOp.SUM, n, count);
    for (ByteBuffer buf : results) {
      byte[] got = new byte[count * 4];
      buf.get(16, got);
      buf = buf.duplicate().clear();
      Values.assertSameBytes("direct buffer", expected, got, ElementType.FLOAT32);
      for (int i : new int[] {0, 15, 16 + count * 4, buf.capacity() - 1}) {
        assertThat(buf.get(i)).as("byte %d outside position..limit", i).isEqualTo((byte) 0x5a);
      }
    }
  }

  /**
   * On plain links operations up to {@link FrameChannel#CALLER_DRIVEN_MAX_BYTES} are written by the
   * caller's thread, larger ones by the sender thread: both, on both sides of the threshold, with
   * segments that span several chunks.
   */
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3})
  void callerDrivenAndThreadedWritersGiveTheSameBits(int n) {
    comms = Rings.form(n, b -> b.optChunkBytes(256 * 1024));
    int floats = (int) (FrameChannel.CALLER_DRIVEN_MAX_BYTES / 4);
    for (int count : new int[] {floats - 1, floats, floats + 1, 2 * floats + 5}) {
      check(n, ElementType.FLOAT32, ReduceOp.MEAN, count);
    }
    check(n, ElementType.FLOAT64, ReduceOp.SUM, floats / 2 + 1);
    check(n, ElementType.INT64, ReduceOp.MIN, floats / 2 + 1);
    check(n, ElementType.FLOAT32, ReduceOp.MAX, 1001); // and back to the caller's thread
  }

  /**
   * Buffers whose elements do not start at a multiple of 8 bytes, heap and direct, on the small
   * path and the ring: the kernels' typed views follow the buffer's phase.
   */
  @Test
  void unalignedAndHeapBuffers() {
    int n = 3;
    comms = Rings.form(n, b -> b.optChunkBytes(4096).optSmallMessageBytes(1024));
    for (boolean direct : new boolean[] {true, false}) {
      for (int offset : new int[] {3, 4, 12}) {
        for (ElementType type : ElementType.values()) {
          for (int count : new int[] {7, 10_001}) {
            List<ByteBuffer> results =
                Rings.onEachOk(
                    comms,
                    c -> {
                      int bytes = count * type.bytes();
                      ByteBuffer buf =
                          direct
                              ? ByteBuffer.allocateDirect(offset + bytes)
                              : ByteBuffer.allocate(offset + bytes);
                      buf.position(offset);
                      buf.put(offset, Values.input(type, c.rank(), count));
                      c.allReduce(buf, type, ReduceOp.SUM);
                      c.allReduce(buf, type, ReduceOp.MAX); // the same buffer again: cached views
                      return buf;
                    });
            byte[] expected = Values.expected(type, ReduceOp.SUM, n, count);
            for (int r = 0; r < n; r++) {
              byte[] got = new byte[count * type.bytes()];
              results.get(r).get(offset, got);
              Values.assertSameBytes(
                  (direct ? "direct" : "heap")
                      + " buffer at offset "
                      + offset
                      + ", "
                      + type
                      + " x"
                      + count
                      + ", rank "
                      + r,
                  expected,
                  got,
                  type);
            }
          }
        }
      }
    }
  }

  /**
   * The steady-state per-step path allocates nothing, on the caller's thread nor on the sender
   * thread: small path, caller-driven ring and threaded ring. The one allocation allowed is the
   * JDK's: its epoll selector boxes the descriptor of each ready key (16 bytes once descriptors
   * exceed 127, as they do in a test JVM with many jars open), at most two keys per wait.
   */
  @Test
  void steadyStateAllocatesNothing() {
    ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    Assumptions.assumeTrue(threads.isThreadAllocatedMemorySupported());
    threads.setThreadAllocatedMemoryEnabled(true);
    comms = Rings.form(2, b -> b.optChunkBytes(64 * 1024));
    int threaded = (int) (FrameChannel.CALLER_DRIVEN_MAX_BYTES / 4) + 1024;
    for (int count : new int[] {1000, 300_000, threaded}) {
      List<Long> allocated =
          Rings.onEachOk(
              comms,
              c -> {
                ByteBuffer buf =
                    ByteBuffer.allocateDirect(count * 4).order(ByteOrder.LITTLE_ENDIAN);
                float[] array = new float[count];
                long[] ids = {Thread.currentThread().getId(), c.senderThread().getId()};
                for (int it = 0;
                    it < 150;
                    it++) { // warm up: buffers, views, JIT (compiled code allocates less)
                  c.allReduce(buf, ElementType.FLOAT32, ReduceOp.MEAN);
                  c.allReduce(array, ReduceOp.SUM);
                }
                long waits = c.selectorWaits();
                long[] before = threads.getThreadAllocatedBytes(ids);
                for (int it = 0; it < 50; it++) {
                  c.allReduce(buf, ElementType.FLOAT32, ReduceOp.MEAN);
                  c.allReduce(array, ReduceOp.SUM);
                }
                long[] after = threads.getThreadAllocatedBytes(ids);
                long jdk = 2 * 16 * (c.selectorWaits() - waits);
                return (after[0] - before[0]) + (after[1] - before[1]) - jdk;
              });
      // Beyond the selector's boxes, allowed: a few hundred stray bytes (the measurement's own
      // arrays). Not allowed: anything per operation or per frame, which over 100 operations would
      // be kilobytes.
      assertThat(allocated)
          .as(
              "bytes allocated by 100 all-reduces of %d floats, per rank, beyond the JDK selector's",
              count)
          .allSatisfy(b -> assertThat(b).isLessThan(1024));
    }
  }

  @Test
  void arraySliceLeavesTheRestAlone() {
    comms = Rings.form(2, b -> {});
    List<float[]> results =
        Rings.onEachOk(
            comms,
            c -> {
              float[] a = {9, 1, 2, 3, 9};
              c.allReduce(a, 1, 3, ReduceOp.SUM);
              return a;
            });
    for (float[] a : results) {
      assertThat(a).containsExactly(9, 2, 4, 6, 9);
    }
  }

  @Test
  void manyOperationsInARowReuseTheRing() {
    comms = Rings.form(4, b -> b.optChunkBytes(4096));
    List<Integer> done =
        Rings.onEachOk(
            comms,
            c -> {
              List<Integer> sizes = new ArrayList<>();
              for (int it = 0; it < 200; it++) {
                int count = (it * 37) % 20_000;
                float[] a = new float[count];
                Arrays.fill(a, c.rank() + 1);
                c.allReduce(a, ReduceOp.SUM);
                for (float v : a) {
                  if (v != 10f) {
                    throw new AssertionError("iteration " + it + ": " + v);
                  }
                }
                sizes.add(count);
              }
              return sizes.size();
            });
    assertThat(done).containsOnly(200);
  }
}
