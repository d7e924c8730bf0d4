package dev.sparktrainer.checkpoint;

import static dev.sparktrainer.checkpoint.CheckpointStoreTest.assertSameState;
import static dev.sparktrainer.checkpoint.CheckpointStoreTest.state;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AsyncCheckpointWriterTest {
  private static final Duration DEADLINE = Duration.ofSeconds(30);

  @TempDir Path tmp;

  private static CheckpointStore slowStore(Path dir, long closeMillis) {
    TestFileSystems.Slow.reset(closeMillis);
    String scheme = TestFileSystems.Slow.SCHEME;
    return new CheckpointStore(
        TestFileSystems.uri(scheme, dir),
        TestFileSystems.conf(scheme, TestFileSystems.Slow.class),
        3);
  }

  private static CheckpointStore failingStore(Path dir) {
    String scheme = TestFileSystems.FailingCreate.SCHEME;
    return new CheckpointStore(
        TestFileSystems.uri(scheme, dir),
        TestFileSystems.conf(scheme, TestFileSystems.FailingCreate.class),
        3);
  }

  @Test
  void submitNeverWaitsForASlowStoreOneWriteIsInFlightAndTheNewestWins() throws Exception {
    CheckpointStore store = slowStore(tmp, 0);
    // Every write's close is held until the release below: which snapshots wait, are replaced or
    // are written does not depend on how fast this thread runs.
    TestFileSystems.Slow.hold();
    try (AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store)) {
      try {
        writer.submit(state(1, new byte[] {1}, 100_000, 3));
        await(() -> TestFileSystems.Slow.openWriters.get() == 1); // step 1 in flight, held
        for (long step = 2; step <= 5; step++) {
          CheckpointState snapshot = state(step, new byte[] {(byte) step}, 100_000, 3);
          // A submit that waited for the store would wait for a release that comes only later.
          assertTimeoutPreemptively(
              DEADLINE, () -> writer.submit(snapshot), "submit of step " + step);
        }
        // Steps 2, 3 and 4 each waited behind step 1 and were replaced by the next one.
        assertThat(writer.superseded()).isEqualTo(3);
        assertThat(writer.written()).isZero();
      } finally {
        TestFileSystems.Slow.release();
      }
      writer.awaitIdle();

      assertThat(TestFileSystems.Slow.maxOpenWriters).as("writes in flight at once").hasValue(1);
      assertThat(writer.written()).isEqualTo(2);
      assertThat(writer.superseded()).isEqualTo(3);
      assertThat(writer.failed()).isZero();
      assertThat(store.steps()).containsExactly(1L, 5L);
      assertSameState(store.latest().orElseThrow(), state(5, new byte[] {5}, 100_000, 3));
    }
  }

  @Test
  void anAbortedAttemptCompletesNoCheckpoint() throws Exception {
    CheckpointStore store = slowStore(tmp, 0);
    AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store);
    writer.submit(state(1, new byte[] {1}, 1000));
    writer.awaitIdle();
    TestFileSystems.Slow.hold();
    try {
      writer.submit(state(2, new byte[] {2}, 1000)); // in flight: its close is held
      await(() -> TestFileSystems.Slow.openWriters.get() == 1);
      writer.submit(state(3, new byte[] {3}, 1000)); // waiting behind it
      writer.abort();
    } finally {
      TestFileSystems.Slow.release(); // step 2's close returns after the abort, before its rename
    }
    assertTimeoutPreemptively(DEADLINE, writer::close);
    // The write in flight stopped before its rename and its temporary file is gone; the waiting
    // snapshot was dropped: step 1 is still the newest checkpoint.
    assertThat(store.steps()).containsExactly(1L);
    assertThat(store.latest().orElseThrow().step()).isEqualTo(1);
    try (Stream<Path> files = Files.list(tmp)) {
      assertThat(files.map(f -> f.getFileName().toString())).noneMatch(n -> n.startsWith("_tmp-"));
    }
  }

  @Test
  void aFailedWriteIsReportedByAwaitIdleNamingTheStepAndTheDirectory() throws Exception {
    CheckpointStore store = failingStore(tmp);
    AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store);
    writer.submit(state(7, new byte[0], 10));
    assertThatThrownBy(writer::awaitIdle)
        .isInstanceOf(IOException.class)
        .hasMessageContaining("step 7")
        .hasMessageContaining(store.directory())
        .hasRootCauseMessage(TestFileSystems.FailingCreate.MESSAGE);
    // Reported once: close() neither hangs nor throws it again.
    assertTimeoutPreemptively(DEADLINE, writer::close);
    assertThat(writer.failed()).isEqualTo(1);
  }

  @Test
  void aFailedWriteIsReportedByTheNextSubmit() throws Exception {
    CheckpointStore store = failingStore(tmp);
    AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store);
    writer.submit(state(1, new byte[0], 10));
    await(() -> writer.failed() == 1);

    assertThatThrownBy(() -> writer.submit(state(2, new byte[0], 10)))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("step 1")
        .hasMessageContaining(store.directory())
        .hasRootCauseMessage(TestFileSystems.FailingCreate.MESSAGE);
    assertTimeoutPreemptively(DEADLINE, writer::close);
    assertThat(writer.failed()).as("step 2 was not queued").isEqualTo(1);
  }

  @Test
  void closeReportsAFailureNotReportedYetWithoutHanging() throws Exception {
    CheckpointStore store = failingStore(tmp);
    AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store);
    writer.submit(state(3, new byte[0], 10));
    assertTimeoutPreemptively(
        DEADLINE,
        () ->
            assertThatThrownBy(writer::close)
                .isInstanceOf(IOException.class)
                .hasMessageContaining("step 3")
                .hasMessageContaining(store.directory()));
    assertTimeoutPreemptively(DEADLINE, writer::close); // twice: nothing left to report
    assertThatThrownBy(() -> writer.submit(state(4, new byte[0], 1)))
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void theWriterIsOneDaemonThreadThatCloseStops() throws Exception {
    CheckpointStore store = new CheckpointStore(tmp.toString(), TestFileSystems.rawLocal(), 3);
    List<Thread> before = writerThreads();
    AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store);
    List<Thread> mine = writerThreads();
    mine.removeAll(before);
    assertThat(mine).singleElement().satisfies(t -> assertThat(t.isDaemon()).isTrue());
    writer.submit(state(1, new byte[0], 5));
    writer.close();
    assertThat(mine.get(0).isAlive()).as("alive after close").isFalse();
    assertThat(writer.written()).isEqualTo(1);
    assertThat(store.latest().orElseThrow().step()).isEqualTo(1);
  }

  @Test
  void concurrentSubmitsLoseNothingAndStillWriteOneAtATime() throws Exception {
    CheckpointStore store = slowStore(tmp, 5);
    int threads = 4;
    int each = 25;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try (AsyncCheckpointWriter writer = new AsyncCheckpointWriter(store)) {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int first = t * each;
        done.add(
            pool.submit(
                () -> {
                  for (int i = 0; i < each; i++) {
                    writer.submit(state(first + i, new byte[0], 1000));
                    if (i % 10 == 9) {
                      writer.awaitIdle();
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> f : done) {
        f.get(DEADLINE.toSeconds(), TimeUnit.SECONDS);
      }
      writer.awaitIdle();
      assertThat(writer.written() + writer.superseded()).isEqualTo(threads * each);
      assertThat(writer.failed()).isZero();
      assertThat(TestFileSystems.Slow.maxOpenWriters).as("writes in flight at once").hasValue(1);
    } finally {
      pool.shutdownNow();
    }
    // Whichever was submitted last was written last and verifies, as do the others kept.
    for (long step : store.steps()) {
      assertSameState(store.read(step), state(step, new byte[0], 1000));
    }
  }

  private static List<Thread> writerThreads() {
    List<Thread> out = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().equals("checkpoint-writer") && t.isAlive()) {
        out.add(t);
      }
    }
    return out;
  }

  private static void await(BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime() - deadline).as("waited %s", DEADLINE).isNegative();
      Thread.sleep(10);
    }
  }
}
