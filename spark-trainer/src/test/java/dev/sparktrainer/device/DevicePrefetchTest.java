package dev.sparktrainer.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import java.io.UncheckedIOException;
import java.time.Duration;
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

  /**
   * A batch the source finishes just as close() begins is closed, never dropped: close() is called
   * the moment the source returns the batch it is making, so it lands before, inside or after the
   * slot hands the batch over (the window where a cancelled fetch's result was dropped).
   */
  @Test
  void closeClosesTheBatchMadeAheadAndStopsTheThread() throws Exception {
    // Many times: the close races the slot's thread at every stage of its fetch.
    for (int round = 0; round < 1000; round++) {
      Source source = new Source(10);
      DevicePrefetch p = new DevicePrefetch(source, "prefetch-close-test");
      for (int i = 0; i < round % 3; i++) {
        p.next().close();
      }
      // the fetch after the last next() (or the first one) returns its batch now, or did
      int want = round % 3 + 1;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (source.made.get() < want && System.nanoTime() < deadline) {
        Thread.onSpinWait();
      }
      // and a little later each round: the close sweeps across the slot's hand-over
      for (int spin = (round * 7) % 97; spin > 0; spin--) {
        Thread.onSpinWait();
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

  /** A source whose next() blocks until released and ignores interrupts while it waits. */
  private static final class StuckSource implements Iterator<Batch> {
    final NDManager manager = NDManager.newBaseManager();
    final CountDownLatch inside = new CountDownLatch(1);
    final CountDownLatch interrupted = new CountDownLatch(1);
    final CountDownLatch release = new CountDownLatch(1);
    final AtomicInteger closed = new AtomicInteger();
    volatile boolean returned;

    @Override
    public boolean hasNext() {
      return true;
    }

    @Override
    public Batch next() {
      inside.countDown();
      while (true) {
        try {
          if (release.await(10, TimeUnit.MILLISECONDS)) {
            break;
          }
        } catch (InterruptedException e) {
          interrupted.countDown(); // ignored: a reader stuck in native code does not see it
        }
      }
      NDManager m = manager.newSubManager();
      Batch b =
          new Batch(
              m,
              new ai.djl.ndarray.NDList(m.create(new float[] {1})),
              m.create(new float[] {1}),
              1,
              closed::incrementAndGet,
              true);
      returned = true;
      return b;
    }
  }

  /**
   * A source that ignores the interrupt and stays in next(): close() does not return normally while
   * the slot's thread is still in the source (the caller would close the source under it); it fails
   * naming the thread. Once the source returns, its batch is closed by the slot's thread.
   */
  @Test
  void closeRefusesToReturnWhileTheSlotIsStillInTheSource() throws Exception {
    StuckSource source = new StuckSource();
    DevicePrefetch p = new DevicePrefetch(source, "prefetch-stuck-test", Duration.ofMillis(300));
    try {
      assertThat(source.inside.await(10, TimeUnit.SECONDS)).as("the slot is in next()").isTrue();
      assertThatThrownBy(p::close)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("prefetch-stuck-test")
          .hasMessageContaining("still in the input pipeline");
      assertThat(source.interrupted.getCount()).as("the slot's thread was interrupted").isZero();
      assertThat(source.returned).as("the source had not returned when close() failed").isFalse();
    } finally {
      source.release.countDown();
    }
    // Released, the source returns a batch nobody will take: the slot's thread closes it and ends.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (source.closed.get() == 0 && System.nanoTime() < deadline) {
      Thread.onSpinWait();
    }
    assertThat(source.closed.get()).as("the late batch was closed").isEqualTo(1);
    p.close(); // now the thread has ended: close() returns
    source.manager.close();
  }
}
