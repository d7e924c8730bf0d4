package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class CollectivesTest {
  private List<Communicator> comms;

  @AfterEach
  void closeRing() {
    Rings.closeAll(comms);
    Rings.assertNoCommunicatorThreads();
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 5, 8})
  void broadcastFromEveryRootEveryTypeAndSize(int n) {
    comms = Rings.form(n, b -> b.optChunkBytes(4096));
    for (int root = 0; root < n; root++) {
      int rt = root;
      for (int count : new int[] {0, 1, n + 1, 10_001, 300_001}) {
        List<Object[]> got =
            Rings.onEachOk(
                comms,
                c -> {
                  float[] f = new float[count];
                  double[] d = new double[count];
                  long[] l = new long[count];
                  for (int i = 0; i < count; i++) {
                    f[i] = Values.f32(c.rank(), i);
                    d[i] = Values.f64(c.rank(), i);
                    l[i] = Values.i64(c.rank(), i);
                  }
                  c.broadcast(f, rt);
                  c.broadcast(d, rt);
                  c.broadcast(l, rt);
                  return new Object[] {f, d, l};
                });
        for (int r = 0; r < n; r++) {
          float[] f = (float[]) got.get(r)[0];
          double[] d = (double[]) got.get(r)[1];
          long[] l = (long[]) got.get(r)[2];
          for (int i = 0; i < count; i++) {
            if (f[i] != Values.f32(rt, i)
                || d[i] != Values.f64(rt, i)
                || l[i] != Values.i64(rt, i)) {
              throw new AssertionError(
                  "broadcast root "
                      + rt
                      + " x"
                      + count
                      + ": rank "
                      + r
                      + " element "
                      + i
                      + " differs");
            }
          }
        }
      }
    }
  }

  @Test
  void broadcastDirectBufferAndBytes() {
    int n = 4;
    comms = Rings.form(n, b -> b.optChunkBytes(1024));
    List<Object[]> got =
        Rings.onEachOk(
            comms,
            c -> {
              ByteBuffer buf = ByteBuffer.allocateDirect(10_000).order(ByteOrder.LITTLE_ENDIAN);
              for (int i = 0; i < buf.capacity(); i++) {
                buf.put(i, (byte) (c.rank() * 31 + i));
              }
              buf.position(3).limit(9_000);
              c.broadcast(buf, 2);
              assertThat(buf.position()).isEqualTo(3);
              byte[] text = c.rank() == 1 ? "hello from rank one".getBytes() : null;
              byte[] recv = c.broadcastBytes(text, 1);
              byte[] empty = c.broadcastBytes(c.rank() == 3 ? new byte[0] : null, 3);
              return new Object[] {buf, recv, empty};
            });
    for (int r = 0; r < n; r++) {
      ByteBuffer buf = ((ByteBuffer) got.get(r)[0]).duplicate().clear();
      for (int i = 0; i < buf.capacity(); i++) {
        int src = i >= 3 && i < 9_000 ? 2 : r;
        assertThat(buf.get(i)).as("rank %d byte %d", r, i).isEqualTo((byte) (src * 31 + i));
      }
      assertThat(new String((byte[]) got.get(r)[1])).isEqualTo("hello from rank one");
      assertThat((byte[]) got.get(r)[2]).isEmpty();
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 6})
  void allGatherOfVariableLengths(int n) {
    comms = Rings.form(n, b -> b.optChunkBytes(1024));
    List<List<byte[]>> got =
        Rings.onEachOk(
            comms,
            c -> {
              List<List<byte[]>> rounds = new ArrayList<>();
              for (int round = 0; round < 3; round++) {
                rounds.add(c.allGather(block(c.rank(), round)));
              }
              List<byte[]> flat = new ArrayList<>();
              rounds.forEach(flat::addAll);
              return flat;
            });
    for (int r = 0; r < n; r++) {
      for (int round = 0; round < 3; round++) {
        for (int k = 0; k < n; k++) {
          assertThat(got.get(r).get(round * n + k))
              .as("rank %d round %d block of rank %d", r, round, k)
              .isEqualTo(block(k, round));
        }
      }
    }
  }

  /** Rank k's block in a round: lengths 0, small, and several chunks; differs per rank. */
  private static byte[] block(int k, int round) {
    int length = (k + round) % 3 == 0 ? 0 : (k * 2_503 + round * 777) % 5_000 + 1;
    byte[] b = new byte[length];
    for (int i = 0; i < length; i++) {
      b[i] = (byte) (k * 13 + round * 7 + i);
    }
    return b;
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 5})
  void barrierReturnsOnlyWhenEveryRankArrived(int n) {
    comms = Rings.form(n, b -> {});
    AtomicInteger arrived = new AtomicInteger();
    List<Integer> seen =
        Rings.onEachOk(
            comms,
            c -> {
              int min = Integer.MAX_VALUE;
              for (int round = 1; round <= 20; round++) {
                arrived.incrementAndGet();
                c.barrier();
                min = Math.min(min, arrived.get() - (round - 1) * n);
                c.barrier(); // nobody starts the next round before everyone has looked
              }
              return min;
            });
    assertThat(seen).containsOnly(n);
  }

  @Test
  void mismatchedCollectivesFailClearlyInsteadOfCorruptingData() {
    comms = Rings.form(2, b -> {});
    List<Rings.Outcome<Object>> outcomes =
        Rings.onEach(
            comms,
            c -> {
              if (c.rank() == 0) {
                c.allReduce(new float[100], ReduceOp.SUM);
              } else {
                c.broadcast(new float[100], 1);
              }
              return null;
            });
    assertThat(outcomes.get(0).error)
        .isInstanceOf(CollectiveException.class)
        .hasMessageContaining("rank 0 of 2")
        .hasMessageContaining("protocol error from rank 1")
        .hasMessageContaining("got broadcast from root 1");
  }

  @Test
  void mismatchedLengthsFailClearly() {
    comms = Rings.form(2, b -> {});
    List<Rings.Outcome<Object>> outcomes =
        Rings.onEach(
            comms,
            c -> {
              c.allReduce(new float[c.rank() == 0 ? 100 : 101], ReduceOp.SUM);
              return null;
            });
    assertThat(outcomes)
        .anySatisfy(
            o ->
                assertThat(o.error)
                    .isInstanceOf(CollectiveException.class)
                    .hasMessageContaining("same size")
                    // whichever rank reads the other's frame first names both sizes
                    .hasMessageFindingMatch(
                        "payload of (400 bytes, expected 404|404 bytes, expected 400)"));
  }

  @Test
  void invalidArgumentsLeaveTheRingUsable() {
    comms = Rings.form(2, b -> {});
    Communicator c0 = comms.get(0);
    assertThatThrownBy(() -> c0.broadcast(new float[1], 2))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Invalid root 2");
    assertThatThrownBy(
            () -> c0.allReduce(ByteBuffer.allocateDirect(6), ElementType.FLOAT32, ReduceOp.SUM))
        .isInstanceOf(IllegalArgumentException.class);
    List<float[]> got =
        Rings.onEachOk(
            comms,
            c -> {
              float[] a = {1, 2};
              c.allReduce(a, ReduceOp.MAX);
              return a;
            });
    assertThat(got).allSatisfy(a -> assertThat(a).containsExactly(1, 2));
  }

  @Test
  void fusionBufferPacksManyArraysIntoFewCollectives() {
    int n = 3;
    comms = Rings.form(n, b -> b.optChunkBytes(1024).optSmallMessageBytes(512));
    int[] lengths = {0, 1, 7, 300, 0, 2_000, 1_024, 5, 3_333, 1};
    int total = Arrays.stream(lengths).sum();
    List<Object[]> got =
        Rings.onEachOk(
            comms,
            c -> {
              FusionBuffer fusion =
                  FusionBuffer.builder().setCommunicator(c).optCapacityBytes(4096).build();
              List<float[]> arrays = new ArrayList<>();
              List<ByteBuffer> buffers = new ArrayList<>();
              int base = 0;
              for (int len : lengths) {
                float[] a = new float[len];
                ByteBuffer b =
                    ByteBuffer.allocateDirect(len * 8 + 8).order(ByteOrder.LITTLE_ENDIAN);
                b.position(8);
                for (int i = 0; i < len; i++) {
                  a[i] = Values.f32(c.rank(), base + i);
                  b.putDouble(8 + i * 8, Values.f64(c.rank(), base + i));
                }
                base += len;
                arrays.add(a);
                buffers.add(b);
              }
              fusion.allReduce(arrays, ReduceOp.SUM);
              int floatBuckets = fusion.lastBucketCount();
              fusion.allReduceBuffers(buffers, ElementType.FLOAT64, ReduceOp.MEAN);
              return new Object[] {arrays, buffers, floatBuckets, fusion.lastBucketCount()};
            });
    byte[] f32 = Values.expected(ElementType.FLOAT32, ReduceOp.SUM, n, total);
    byte[] f64 = Values.expected(ElementType.FLOAT64, ReduceOp.MEAN, n, total);
    for (Object[] r : got) {
      @SuppressWarnings("unchecked")
      List<float[]> arrays = (List<float[]>) r[0];
      @SuppressWarnings("unchecked")
      List<ByteBuffer> buffers = (List<ByteBuffer>) r[1];
      ByteBuffer fa = ByteBuffer.allocate(total * 4).order(ByteOrder.LITTLE_ENDIAN);
      ByteBuffer da = ByteBuffer.allocate(total * 8).order(ByteOrder.LITTLE_ENDIAN);
      for (int j = 0; j < lengths.length; j++) {
        for (float v : arrays.get(j)) {
          fa.putFloat(v);
        }
        ByteBuffer b = buffers.get(j);
        assertThat(b.position()).isEqualTo(8);
        for (int i = 0; i < lengths[j]; i++) {
          da.putDouble(b.getDouble(8 + i * 8));
        }
      }
      Values.assertSameBytes("fused float32", f32, fa.array(), ElementType.FLOAT32);
      Values.assertSameBytes("fused float64", f64, da.array(), ElementType.FLOAT64);
      assertThat((int) r[2]).isEqualTo((total * 4 + 4095) / 4096);
      assertThat((int) r[3]).isEqualTo((total * 8 + 4095) / 4096);
    }
  }
}
