package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.Batch;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The prefetch-to-device slot: order, one batch ahead while the consumer holds one, failures. */
class DevicePrefetchTest {

  /** A source of {@code n} batches counting what it made and closed. */
  private static final class Source implements Iterator<Batch> {
    final NDManager manager = NDManager.newBaseManager();
    final int n;
    final AtomicInteger made = new AtomicInteger();
    final AtomicInteger closed = new AtomicInteger();
    final List<String> threads = new ArrayList<>();
    volatile RuntimeException failAt3;

    Source(int n) {
      this.n = n;
    }

    @Override
    public boolean hasNext() {
      return made.get() < n;
    }

    @Override
    public Batch next() {
      int i = made.getAndIncrement();
      synchronized (threads) {
        threads.add(Thread.currentThread().getName());
      }
      if (i == 3 && failAt3 != null) {
        throw failAt3;
      }
      NDManager m = manager.newSubManager();
      return new Batch(
          m,
          new ai.djl.ndarray.NDList(m.create(new float[] {i})),
          m.create(new float[] {i}),
          i + 1,
          closed::incrementAndGet,
          true);
    }
  }

  @Test
  void deliversEveryBatchInOrderAndMakesTheNextWhileOneIsHeld() throws Exception {
    Source source = new Source(5);
    try (DevicePrefetch p = new DevicePrefetch(source, "prefetch-test")) {
      int expect = 0;
      while (p.hasNext()) {
        try (Batch b = p.next()) {
          assertThat(b.size()).isEqualTo(expect + 1);
          // While the consumer holds batch i, the slot makes batch i + 1 on its own thread.
          if (expect + 1 < 5) {
            int want = expect + 2;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (source.made.get() < want && System.nanoTime() < deadline) {
              Thread.onSpinWait();
            }
            assertThat(source.made.get()).as("made ahead of batch " + expect).isEqualTo(want);
          }
        }
        expect++;
      }
      assertThat(expect).isEqualTo(5);
    } finally {
      source.manager.close();
    }
    assertThat(source.closed.get()).isEqualTo(5);
    assertThat(source.threads).allMatch(t -> t.equals("prefetch-test"));
  }

  @Test
  void aSourceFailureReachesTheConsumerAsThrown() {
    Source source = new Source(6);
    source.failAt3 =
        new UncheckedIOException(
            "file f.tfrecord at offset 12: corrupt", new java.io.IOException("corrupt"));
    try (DevicePrefetch p = new DevicePrefetch(source, "prefetch-test")) {
      for (int i = 0; i < 3; i++) {
        p.next().close();
      }
      assertThatThrownBy(p::next)
          .isInstanceOf(UncheckedIOException.class)
          .hasMessageContaining("f.tfrecord at offset 12");
    } finally {
      source.manager.close();
    }
  }

  @Test
  void closeClosesTheBatchMadeAheadAndStopsTheThread() throws Exception {
    // Many times: the close races the slot's thread at every stage of its fetch.
    for (int round = 0; round < 200; round++) {
      Source source = new Source(10);
      DevicePrefetch p = new DevicePrefetch(source, "prefetch-close-test");
      for (int i = 0; i < round % 3; i++) {
        p.next().close();
      }
      p.close();
      // close() returns once the slot's thread is done with the source: nothing it made is open.
      assertThat(source.closed.get())
          .as("round " + round + ": every batch made was closed")
          .isEqualTo(source.made.get());
      source.manager.close();
    }
    CountDownLatch gone = new CountDownLatch(1);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      boolean alive =
          Thread.getAllStackTraces().keySet().stream()
              .anyMatch(t -> t.getName().equals("prefetch-close-test"));
      if (!alive) {
        gone.countDown();
        break;
      }
      Thread.onSpinWait();
    }
    assertThat(gone.getCount()).as("the slot's thread ended").isZero();
  }
}
