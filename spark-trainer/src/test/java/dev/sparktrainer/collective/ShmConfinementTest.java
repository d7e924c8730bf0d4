package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The path a peer offers for shared memory is opened only inside this rank's own segment directory,
 * under the name this code gives segments; segments left behind by killed processes are swept.
 */
class ShmConfinementTest {
  @TempDir Path shmDir;
  @TempDir Path elsewhere;
  private final JobSecret secret = JobSecret.generate();
  private final List<String> logged = Collections.synchronizedList(new ArrayList<>());
  private final Logger jul = Logger.getLogger(Communicator.class.getName());
  private final Handler capture =
      new Handler() {
        @Override
        public void publish(LogRecord record) {
          logged.add(record.getLevel() + " " + record.getMessage());
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };
  private final List<Link> links = new ArrayList<>();
  private List<Communicator> comms;

  @BeforeEach
  void captureLogs() {
    jul.addHandler(capture);
  }

  @AfterEach
  void cleanUp() {
    jul.removeHandler(capture);
    links.forEach(Link::abort);
    Rings.closeAll(comms);
  }

  /** A segment name as this code makes them: job, creating process, ranks, random suffix. */
  private String name(long jobId, long pid) {
    return ShmNegotiation.FILE_PREFIX
        + Long.toHexString(jobId)
        + "-p"
        + pid
        + "-r0-r1-0123456789abcdef";
  }

  private String name() {
    return name(secret.jobId(), ProcessHandle.current().pid());
  }

  /** What the accepting rank answered, and the link it went on with. */
  private static final class Answer {
    boolean accepted;
    String reason;
    Link link;
  }

  /**
   * Rank 1 (segments in shmDir) answers an offer of {@code path} from rank 0 over a loopback pair.
   */
  private Answer offer(String path, byte[] nonce) throws Exception {
    try (ServerSocketChannel server = ServerSocketChannel.open()) {
      server.bind(new InetSocketAddress("127.0.0.1", 0));
      SocketChannel client = SocketChannel.open(server.getLocalAddress());
      SocketChannel accepted = server.accept();
      ChannelLink serverSide = new ChannelLink(accepted, 0, "127.0.0.1:1");
      links.add(serverSide);
      ChannelLink clientSide = new ChannelLink(client, 1, "127.0.0.1:2");
      links.add(clientSide);
      ShmNegotiation.Settings settings = new ShmNegotiation.Settings(true, shmDir, 1 << 16, p -> p);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      CompletableFuture<Link> result =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return ShmNegotiation.server(serverSide, settings, secret.jobId(), 1, deadline);
                } catch (IOException e) {
                  throw new UncheckedIOException(e);
                }
              });
      byte[] p = path.getBytes(StandardCharsets.UTF_8);
      ByteBuffer frame = ByteBuffer.allocate(12 + nonce.length + p.length);
      frame
          .putInt(Wire.MAGIC)
          .putShort(Wire.VERSION)
          .putShort(ShmNegotiation.OFFER)
          .putInt(nonce.length + p.length);
      frame.put(nonce).put(p).flip();
      clientSide.writeFully(frame, null, deadline);
      ByteBuffer head = ByteBuffer.allocate(11);
      clientSide.readFully(head, deadline);
      head.flip();
      head.position(8);
      Answer a = new Answer();
      a.accepted = head.get() == 1;
      ByteBuffer reason = ByteBuffer.allocate(head.getShort() & 0xffff);
      clientSide.readFully(reason, deadline);
      a.reason = new String(reason.array(), StandardCharsets.UTF_8);
      a.link = result.get(10, TimeUnit.SECONDS);
      links.add(a.link);
      return a;
    }
  }

  private void assertRefused(String offered, Path shouldSurvive) throws Exception {
    ShmLink.Segment target = null;
    if (shouldSurvive != null && !Files.exists(shouldSurvive, LinkOption.NOFOLLOW_LINKS)) {
      target = ShmLink.create(shouldSurvive, 4096, 4096);
    }
    byte[] nonce = target != null ? target.nonce : new byte[ShmLink.NONCE_BYTES];
    Answer a = offer(offered, nonce);
    assertThat(a.accepted).as("offer of %s accepted (%s)", offered, a.reason).isFalse();
    assertThat(a.link).as("the link stays on TCP").isInstanceOf(ChannelLink.class);
    assertThat(a.link.transport()).isEqualTo(LinkTransport.TCP);
    assertThat(a.reason).contains(offered);
    assertThat(logged)
        .as("a warning naming the offered path")
        .anySatisfy(m -> assertThat(m).startsWith("WARNING").contains(offered));
    if (shouldSurvive != null) {
      assertThat(shouldSurvive).as("the file the offer pointed at is left alone").exists();
    }
    logged.clear();
  }

  @Test
  void aSegmentInTheDirectoryUnderTheRightNameIsAccepted() throws Exception {
    Path file = shmDir.resolve(name());
    ShmLink.Segment segment = ShmLink.create(file, 4096, 4096);
    try {
      Answer a = offer(file.toString(), segment.nonce);
      assertThat(a.accepted).as(a.reason).isTrue();
      assertThat(a.link.transport()).isEqualTo(LinkTransport.SHARED_MEMORY);
      assertThat(file).as("the acceptor deletes the name once mapped").doesNotExist();
    } finally {
      ShmLink.unmap(segment.mapping);
    }
  }

  @Test
  void aValidSegmentOutsideTheDirectoryIsRefusedAndNotDeleted() throws Exception {
    Path outside = elsewhere.resolve(name());
    assertRefused(outside.toString(), outside);
  }

  @Test
  void dotDotOutOfTheDirectoryIsRefused() throws Exception {
    Path outside = elsewhere.resolve(name());
    String offered = shmDir + "/../" + elsewhere.getFileName() + "/" + name();
    assertThat(shmDir.getParent()).isEqualTo(elsewhere.getParent());
    assertRefused(offered, outside);
  }

  @Test
  void aSymlinkedDirectoryInsideTheDirectoryIsRefused() throws Exception {
    Files.createSymbolicLink(shmDir.resolve("sub"), elsewhere);
    Path outside = elsewhere.resolve(name());
    assertRefused(shmDir.resolve("sub").resolve(name()).toString(), outside);
  }

  @Test
  void aSymlinkedSegmentNameIsRefused() throws Exception {
    Path outside = elsewhere.resolve(name(secret.jobId(), 1));
    ShmLink.Segment real = ShmLink.create(outside, 4096, 4096);
    ShmLink.unmap(real.mapping);
    Path link = Files.createSymbolicLink(shmDir.resolve(name()), outside);
    Answer a = offer(link.toString(), real.nonce);
    assertThat(a.accepted).as(a.reason).isFalse();
    assertThat(a.link.transport()).isEqualTo(LinkTransport.TCP);
    assertThat(outside).exists();
  }

  @Test
  void systemFilesAndForeignNamesAreRefused() throws Exception {
    assertRefused("/etc/passwd", null);
    assertRefused("relative/" + name(), null);
    Path notOurName = shmDir.resolve("not-a-ring-segment");
    assertRefused(notOurName.toString(), notOurName);
    Path otherJob = shmDir.resolve(name(secret.jobId() ^ 1, ProcessHandle.current().pid()));
    assertRefused(otherJob.toString(), otherJob);
  }

  @Test
  void staleSegmentsOfDeadProcessesAreSweptByTheNextSetUp() throws Exception {
    Process p = new ProcessBuilder("true").start();
    assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
    long dead = p.pid();
    assertThat(ProcessHandle.of(dead)).isEmpty();
    long live = ProcessHandle.current().pid();
    long otherJob = JobSecret.generate().jobId();
    FileTime old = FileTime.from(Instant.now().minus(Duration.ofHours(1)));
    Path staleDead = touch(shmDir.resolve(name(otherJob, dead)), old);
    Path staleLive = touch(shmDir.resolve(name(otherJob, live)), old);
    Path recentDead =
        touch(shmDir.resolve(name(otherJob, dead).replace("-r0-r1-", "-r1-r2-")), null);
    Path foreign = touch(shmDir.resolve("spark-trainer-ring-notes-p" + dead), old);
    Path foreignOwner = null;
    if (Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"))) {
      foreignOwner = touch(shmDir.resolve(name(otherJob, dead).replace("-r0-r1-", "-r3-r4-")), old);
      Files.setAttribute(foreignOwner, "unix:uid", 65534, LinkOption.NOFOLLOW_LINKS);
      Files.setLastModifiedTime(foreignOwner, old);
    }
    comms = Rings.form(2, b -> b.optSharedMemoryDirectory(shmDir));
    for (Communicator c : comms) {
      assertThat(c.rightTransport()).isEqualTo(LinkTransport.SHARED_MEMORY);
    }
    assertThat(staleDead).as("segment of a dead process").doesNotExist();
    assertThat(staleLive).as("segment of a live process").exists();
    assertThat(recentDead)
        .as("a segment too recent to be stale (another pid namespace could own it)")
        .exists();
    assertThat(foreign).as("not this code's name").exists();
    if (foreignOwner != null) {
      assertThat(foreignOwner).as("another user's file").exists();
    }
    assertThat(logged)
        .anySatisfy(
            m -> assertThat(m).contains("stale").contains(staleDead.getFileName().toString()));
    try (Stream<Path> s = Files.list(shmDir)) {
      for (Path f : s.toList()) {
        Files.delete(f);
      }
    }
  }

  private static Path touch(Path file, FileTime mtime) throws IOException {
    Files.write(file, new byte[8192]);
    if (mtime != null) {
      Files.setLastModifiedTime(file, mtime);
    }
    return file;
  }
}
