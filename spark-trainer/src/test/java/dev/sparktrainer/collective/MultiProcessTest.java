package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Ranks as separate JVM processes, rendezvous through the parent. */
class MultiProcessTest {
  private static final List<String> JVM =
      List.of("-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto");

  @TempDir Path shmDir;

  @ParameterizedTest(name = "{0} processes")
  @ValueSource(ints = {2, 3})
  void everyProcessComputesTheClosedFormWithIdenticalBits(int n) throws Exception {
    try (ProcessRing ring =
        ProcessRing.launch(n, RankMain.class, JVM, List.of("verify", shmDir.toString()))) {
      List<String> digests = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        // processes on one host: every link through shared memory
        assertThat(ring.awaitLine(r, l -> l.startsWith("TRANSPORT "), Duration.ofSeconds(60)))
            .isEqualTo("TRANSPORT SHARED_MEMORY SHARED_MEMORY");
      }
      for (int r = 0; r < n; r++) {
        digests.add(
            ring.awaitLine(
                r,
                l -> l.startsWith("DIGEST ") || l.startsWith("MISMATCH"),
                Duration.ofSeconds(90)));
      }
      int[] codes = ring.awaitExit(Duration.ofSeconds(30));
      for (int r = 0; r < n; r++) {
        assertThat(codes[r]).as("rank %d exit; output:%n%s", r, ring.transcript(r)).isZero();
        assertThat(ring.transcript(r)).doesNotContain("MISMATCH").contains("THREADS []");
      }
      assertThat(digests)
          .allSatisfy(d -> assertThat(d).startsWith("DIGEST "))
          .containsOnly(digests.get(0));
    }
    assertThat(filesIn(shmDir)).isEmpty();
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"shm", "tcp"})
  void aProcessKilledMidOperationFailsTheOthersPromptly(String transport) throws Exception {
    int n = 3;
    String arg = transport.equals("tcp") ? "tcp" : shmDir.toString();
    String expected =
        transport.equals("tcp") ? "TRANSPORT TCP TCP" : "TRANSPORT SHARED_MEMORY SHARED_MEMORY";
    try (ProcessRing ring = ProcessRing.launch(n, RankMain.class, JVM, List.of("loop", arg))) {
      for (int r = 0; r < n; r++) {
        assertThat(ring.awaitLine(r, l -> l.startsWith("TRANSPORT "), Duration.ofSeconds(60)))
            .isEqualTo(expected);
        ring.awaitLine(r, l -> l.equals("ITER 2"), Duration.ofSeconds(60));
      }
      long killed = System.nanoTime();
      ring.processes.get(1).destroyForcibly(); // SIGKILL: no shutdown hook, no close
      List<String> failures = new ArrayList<>();
      for (int r : new int[] {0, 2}) {
        String failed = ring.awaitLine(r, l -> l.startsWith("FAILED "), Duration.ofSeconds(25));
        failures.add(failed);
        assertThat(failed).contains("rank " + r + " of 3").contains("allReduce");
      }
      // operation timeout is 30 s: the failure must come from the dead sockets, not from a deadline
      assertThat((System.nanoTime() - killed) / 1e9)
          .as("seconds until both survivors failed")
          .isLessThan(10);
      assertThat(failures).anySatisfy(f -> assertThat(f).contains("rank 1 at "));
      int[] codes = ring.awaitExit(Duration.ofSeconds(20));
      assertThat(codes[0]).isEqualTo(3);
      assertThat(codes[2]).isEqualTo(3);
      assertThat(ring.transcript(0)).contains("THREADS []");
      assertThat(ring.transcript(2)).contains("THREADS []");
    }
    assertThat(filesIn(shmDir)).as("shared memory files left after a kill -9").isEmpty();
  }

  private static List<Path> filesIn(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.toList();
    }
  }
}
