package dev.sparktrainer.train.loop;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.sparktrainer.checkpoint.CheckpointState;
import dev.sparktrainer.checkpoint.CheckpointStore;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongConsumer;
import java.util.function.Predicate;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The testing-only {@link FaultInjection}: each fault hits only its rank, step and attempt. */
class FaultInjectionTest {
  @TempDir Path tmp;

  @Test
  void noneInjectsNothingAndIsWhatABuilderStartsFrom() {
    FaultInjection none = FaultInjection.NONE;
    assertThatCode(
            () -> {
              for (int rank = 0; rank < 4; rank++) {
                none.failAfterStep(rank, 0, 0);
                none.failAfterStep(rank, -1, 0);
                none.pauseBeforeStep(rank);
                none.pauseBeforeRing(rank, 0, 2);
                none.beforeCheckpointRename().accept(rank);
              }
            })
        .doesNotThrowAnyException();
    assertThat(none.diverges(0)).isFalse();
    assertThat(FaultInjection.installed()).isSameAs(FaultInjection.NONE);
  }

  @Test
  void aFailureHitsItsRankAndStepInTheFirstAttemptOnly() {
    FaultInjection f = FaultInjection.NONE.withFailure(1, 30).withDivergence(2);
    assertThatThrownBy(() -> f.failAfterStep(1, 30, 0))
        .isInstanceOf(InjectedFailure.class)
        .hasMessageContaining("rank 1")
        .hasMessageContaining("step 30");
    assertThatCode(
            () -> {
              f.failAfterStep(1, 30, 1);
              f.failAfterStep(0, 30, 0);
              f.failAfterStep(1, 29, 0);
            })
        .doesNotThrowAnyException();
    assertThat(f.diverges(2)).isTrue();
    assertThat(f.diverges(1)).isFalse();
  }

  @Test
  void itTravelsWithTheJobConfiguration() throws Exception {
    FaultInjection f =
        FaultInjection.NONE.withRingConnectDelay(1, 45000).withCheckpointRenameDelay(20, 4000);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(f);
    }
    try (ObjectInputStream in =
        new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
      assertThat(in.readObject()).isEqualTo(f);
    }
  }

  @Test
  void theRenameDelayHoldsOnlyItsStepAndAnInterruptLeavesNoCheckpoint() throws Exception {
    CheckpointStore plain = new CheckpointStore(tmp.toUri().toString(), new Configuration(), 5);
    // Another step is not held: with step 3 held for a minute, step 2's write (the first one, with
    // Hadoop's start-up in it) still ends well within half of that.
    CheckpointStore holdsStep3 =
        plain.withBeforeRename(
            FaultInjection.NONE.withCheckpointRenameDelay(3, 60_000).beforeCheckpointRename());
    assertTimeoutPreemptively(
        Duration.ofSeconds(30),
        () -> holdsStep3.write(new CheckpointState(2, new byte[0], List.of())),
        "the write of step 2, with a delay for step 3");
    assertThat(plain.steps()).containsExactly(2L);
    // Its own step is held for (at least) the delay, then written.
    CheckpointStore store =
        plain.withBeforeRename(
            FaultInjection.NONE.withCheckpointRenameDelay(3, 400).beforeCheckpointRename());
    long t0 = System.nanoTime();
    store.write(new CheckpointState(3, new byte[0], List.of()));
    long delayed = System.nanoTime() - t0;
    assertThat(delayed).isGreaterThanOrEqualTo(400_000_000L);
    assertThat(store.latest()).get().extracting(CheckpointState::step).isEqualTo(3L);

    LongConsumer delay =
        FaultInjection.NONE.withCheckpointRenameDelay(4, 60_000).beforeCheckpointRename();
    CountDownLatch held = new CountDownLatch(1);
    CheckpointStore slow =
        store.withBeforeRename(
            step -> {
              held.countDown();
              delay.accept(step);
            });
    // Interrupted while held (how Spark kills a task): the write fails and leaves no checkpoint.
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread writer =
        new Thread(
            () -> {
              try {
                slow.write(new CheckpointState(4, new byte[0], List.of()));
              } catch (Throwable t) {
                failure.set(t);
              }
            });
    writer.start();
    assertThat(held.await(30, TimeUnit.SECONDS))
        .as("the writer of step 4 held within 30 s")
        .isTrue();
    assertThat(hasFile(n -> n.startsWith("_tmp-4-"))).isTrue();
    writer.interrupt();
    writer.join(30_000);
    assertThat(writer.isAlive()).isFalse();
    assertThat(failure.get())
        .isInstanceOf(InterruptedIOException.class)
        .hasMessageContaining("step 4");
    assertThat(hasFile(n -> n.startsWith("_tmp-4-") || n.endsWith("4.bin"))).isFalse();
  }

  private boolean hasFile(Predicate<String> name) throws IOException {
    try (Stream<Path> files = Files.list(tmp)) {
      return files.map(p -> p.getFileName().toString()).anyMatch(name);
    }
  }
}
