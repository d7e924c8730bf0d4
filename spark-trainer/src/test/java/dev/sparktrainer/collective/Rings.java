package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/** Test support: N ranks as threads on 127.0.0.1. */
public final class Rings {
  static final Duration TEST_DEADLINE = Duration.ofSeconds(60);

  private Rings() {}

  /** What one rank does. */
  interface RankBody<T> {
    T run(Communicator comm) throws Exception;
  }

  /** A rank's result or failure. */
  static final class Outcome<T> {
    final T value;
    final Throwable error;
    final long endNanos;

    Outcome(T value, Throwable error) {
      this.value = value;
      this.error = error;
      this.endNanos = System.nanoTime();
    }
  }

  /**
   * Forms a ring of {@code n} ranks (each built on its own thread, as the builds wait for each
   * other).
   */
  public static List<Communicator> form(int n, Consumer<Communicator.Builder> config) {
    return form(n, config, listeners -> {});
  }

  /** As {@link #form(int, Consumer)}, running {@code beforeBuild} once the listeners are bound. */
  static List<Communicator> form(
      int n, Consumer<Communicator.Builder> config, Consumer<List<RingListener>> beforeBuild) {
    return form(n, (rank, b) -> config.accept(b), beforeBuild);
  }

  /** As {@link #form(int, Consumer)} with a configuration per rank. */
  static List<Communicator> formEach(int n, BiConsumer<Integer, Communicator.Builder> config) {
    return form(n, config, listeners -> {});
  }

  private static List<Communicator> form(
      int n,
      BiConsumer<Integer, Communicator.Builder> config,
      Consumer<List<RingListener>> beforeBuild) {
    JobSecret secret = JobSecret.generate();
    List<RingListener> listeners = new ArrayList<>();
    List<String> peers = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      RingListener l = RingListener.bind("127.0.0.1");
      listeners.add(l);
      peers.add(l.address());
    }
    beforeBuild.accept(listeners);
    List<Outcome<Communicator>> built =
        runEach(
            n,
            r -> {
              Communicator.Builder b =
                  Communicator.builder()
                      .setRank(r)
                      .setPeers(peers)
                      .setSecret(secret)
                      .setListener(listeners.get(r))
                      .optConnectTimeout(Duration.ofSeconds(20))
                      .optOperationTimeout(Duration.ofSeconds(30));
              config.accept(r, b);
              return b.build();
            });
    List<Communicator> comms = new ArrayList<>();
    Throwable first = null;
    for (Outcome<Communicator> o : built) {
      if (o.error != null) {
        first = first == null ? o.error : first;
      } else {
        comms.add(o.value);
      }
    }
    listeners.forEach(RingListener::close);
    if (first != null) {
      comms.forEach(Communicator::close);
      throw new AssertionError("ring formation failed", first);
    }
    return comms;
  }

  /** Runs {@code body} on every communicator at once; returns the outcomes in rank order. */
  static <T> List<Outcome<T>> onEach(List<Communicator> comms, RankBody<T> body) {
    return runEach(comms.size(), r -> body.run(comms.get(r)));
  }

  /** Like {@link #onEach} but fails the test on any rank's failure. */
  static <T> List<T> onEachOk(List<Communicator> comms, RankBody<T> body) {
    List<Outcome<T>> outcomes = onEach(comms, body);
    List<T> values = new ArrayList<>();
    AssertionError error = null;
    for (int r = 0; r < outcomes.size(); r++) {
      Outcome<T> o = outcomes.get(r);
      if (o.error != null) {
        if (error == null) {
          error = new AssertionError("rank " + r + " failed: " + o.error, o.error);
        } else {
          error.addSuppressed(o.error);
        }
      }
      values.add(o.value);
    }
    if (error != null) {
      throw error;
    }
    return values;
  }

  interface IndexedBody<T> {
    T run(int rank) throws Exception;
  }

  static <T> List<Outcome<T>> runEach(int n, IndexedBody<T> body) {
    AtomicInteger ids = new AtomicInteger();
    ExecutorService pool =
        Executors.newFixedThreadPool(
            n,
            task -> {
              Thread t = new Thread(task, "test-rank-" + ids.getAndIncrement());
              t.setDaemon(true);
              return t;
            });
    try {
      List<Future<T>> futures = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        int rank = r;
        futures.add(pool.submit(() -> body.run(rank)));
      }
      long deadline = System.nanoTime() + TEST_DEADLINE.toNanos();
      List<Outcome<T>> outcomes = new ArrayList<>();
      for (Future<T> f : futures) {
        try {
          outcomes.add(
              new Outcome<>(
                  f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS), null));
        } catch (ExecutionException e) {
          outcomes.add(new Outcome<>(null, e.getCause()));
        } catch (TimeoutException e) {
          throw new AssertionError("a rank did not finish within " + TEST_DEADLINE + " (hang)", e);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new AssertionError(e);
        }
      }
      return outcomes;
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * One all-reduce of {rank, 1} on every rank of a formed ring: each gets {0 + 1 + ... + (n - 1),
   * n}, so the ring carries data end to end.
   */
  static void assertAllReduceSums(List<Communicator> comms) {
    int n = comms.size();
    List<float[]> got =
        onEachOk(
            comms,
            c -> {
              float[] a = {c.rank(), 1};
              c.allReduce(a, ReduceOp.SUM);
              return a;
            });
    assertThat(got).allSatisfy(a -> assertThat(a).containsExactly(n * (n - 1) / 2f, n));
  }

  static void closeAll(List<Communicator> comms) {
    if (comms != null) {
      comms.forEach(Communicator::close);
    }
  }

  /** Waits until {@code condition} holds, failing after {@code timeout}. */
  static void await(String what, Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout + " waiting for " + what);
      }
      Thread.onSpinWait();
      Thread.yield();
    }
  }

  static List<String> liveCommunicatorThreads() {
    List<String> names = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.isAlive() && t.getName().startsWith(Communicator.THREAD_NAME_PREFIX)) {
        names.add(t.getName());
      }
    }
    return names;
  }

  /** No communicator thread is left (threads get a short grace period to exit). */
  static void assertNoCommunicatorThreads() {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (!liveCommunicatorThreads().isEmpty() && System.nanoTime() < deadline) {
      Thread.yield();
    }
    assertThat(liveCommunicatorThreads()).as("communicator threads still alive").isEmpty();
  }

  static void assertClosed(List<Communicator> comms) {
    for (Communicator c : comms) {
      assertThat(c.isClosed()).isTrue();
      if (c.leftLink() != null) {
        assertThat(c.leftLink().channel().isOpen())
            .as("rank %d left socket open", c.rank())
            .isFalse();
        assertThat(c.rightLink().channel().isOpen())
            .as("rank %d right socket open", c.rank())
            .isFalse();
      }
    }
  }
}
