package dev.sparktrainer.device;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import java.util.Collections;
import java.util.Iterator;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The training source across an epoch boundary, with the prefetch-to-device slot on. */
class PrefetchedSourceTest {
  /**
   * An epoch's batches: the first comes at once, the second blocks until released and ignores
   * interrupts meanwhile (a reader stuck in native code); it says whether a thread is inside.
   */
  private static final class Epoch implements Iterator<Batch> {
    final NDManager manager = NDManager.newBaseManager();
    final CountDownLatch inside = new CountDownLatch(1);
    final CountDownLatch interrupted = new CountDownLatch(1);
    final CountDownLatch release = new CountDownLatch(1);
    final AtomicInteger made = new AtomicInteger();
    final AtomicInteger closed = new AtomicInteger();
    volatile boolean in;

    @Override
    public boolean hasNext() {
      return true;
    }

    @Override
    public Batch next() {
      in = true;
      try {
        if (made.get() > 0) {
          inside.countDown();
          while (true) {
            try {
              if (release.await(10, TimeUnit.MILLISECONDS)) {
                break;
              }
            } catch (InterruptedException e) {
              interrupted.countDown(); // ignored
            }
          }
        }
        made.incrementAndGet();
        NDManager m = manager.newSubManager();
        return new Batch(
            m,
            new NDList(m.create(new float[] {1})),
            m.create(new float[] {1}),
            1,
            closed::incrementAndGet,
            true);
      } finally {
        in = false;
      }
    }
  }

  /**
   * The next epoch's stream is opened (which closes the last one's, in a real source) only once the
   * last epoch's prefetch thread has left it: here that thread is still blocked in the last epoch's
   * source when the boundary comes, and leaves it only after close() interrupted it.
   */
  @Test
  void theNextEpochOpensOnlyOnceThePrefetchLeftTheLastOne() throws Exception {
    Epoch first = new Epoch();
    AtomicBoolean openedUnderIt = new AtomicBoolean();
    AtomicBoolean opened = new AtomicBoolean();
    Thread releaser =
        new Thread(
            () -> {
              try {
                first.interrupted.await();
                first.release.countDown();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            });
    try (PrefetchedSource train = new PrefetchedSource()) {
      Iterator<Batch> it = train.ahead(() -> first, true, 0);
      it.next().close();
      assertThat(first.inside.await(10, TimeUnit.SECONDS)).as("prefetching batch 2").isTrue();
      releaser.start();
      Iterator<Batch> second =
          train.ahead(
              () -> {
                opened.set(true);
                openedUnderIt.set(first.in);
                return Collections.emptyIterator();
              },
              true,
              0);
      assertThat(second.hasNext()).isFalse();
    } finally {
      first.release.countDown();
      releaser.join(TimeUnit.SECONDS.toMillis(10));
    }
    assertThat(opened).as("the next epoch was opened").isTrue();
    assertThat(openedUnderIt)
        .as("opened while the prefetch thread was still in the last epoch's source")
        .isFalse();
    assertThat(first.closed.get())
        .as("every batch of the last epoch closed")
        .isEqualTo(first.made.get());
    first.manager.close();
  }
}
