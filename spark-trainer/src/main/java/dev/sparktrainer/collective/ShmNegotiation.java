package dev.sparktrainer.collective;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Map;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Upgrades a freshly authenticated link to shared memory when both ends agree, right after the
 * {@link Handshake}, on the same link and within the same deadline. Both ends always take part, so
 * they never disagree about the transport:
 *
 * <pre>
 * client -> server  OFFER   magic version type length [nonce(16) path(UTF-8)]   (length 0: no offer)
 * server -> client  ANSWER  magic version type accepted(1) reasonLength(2) reason  (only after an offer)
 * </pre>
 *
 * The client (the rank that connected) offers only over a plain link to a peer whose address is on
 * this host, with shared memory enabled and a segment created in the directory. The server accepts
 * only if it has shared memory enabled too and can open that file and find the client's nonce in it
 * (the same file, not a namesake in another container's {@code /dev/shm}); it then deletes the
 * file's name, and the client deletes it in every case once answered, so nothing outlives the
 * processes.
 *
 * <p>The server opens an offered path only if it is confined to its own segment directory: an
 * absolute, normalized path (no {@code ..}) whose parent's real path is the directory's real path
 * (no symlinked directory on the way), a name of this code's pattern ({@link #NAME}) for this job
 * and for this link (offering rank to this rank), a regular file (not a link, opened with {@code
 * NOFOLLOW_LINKS}) owned by this user. Anything else is declined, logged as a warning naming the
 * path, and the link stays on TCP. Segment names carry the creating process's id, so that a process
 * killed between creating a segment and its answer leaves a name that the next communicator set-up
 * on the host recognises as stale and deletes ({@link #sweepStale}).
 */
final class ShmNegotiation {
  static final short OFFER = 5;
  static final short ANSWER = 6;
  static final int MAX_OFFER_BYTES = ShmLink.NONCE_BYTES + 4096;
  static final int MAX_REASON_BYTES = 1024;
  static final String FILE_PREFIX = "spark-trainer-ring-";

  /**
   * A segment's name: {@code spark-trainer-ring-<job id>-p<creating pid>-r<from rank>-r<to
   * rank>-<16 random hex digits>}.
   */
  static final Pattern NAME =
      Pattern.compile(
          Pattern.quote(FILE_PREFIX)
              + "([0-9a-f]{1,16})-p([0-9]{1,18})-r([0-9]{1,9})-r([0-9]{1,9})-[0-9a-f]{16}");

  /**
   * Segments younger than this are never swept, even if their pid looks dead: a name lives only for
   * one negotiation, and a /dev/shm shared with another pid namespace (a container) holds live
   * segments whose pids mean nothing here.
   */
  static final Duration STALE_AGE = Duration.ofMinutes(2);

  private static final System.Logger LOG = System.getLogger(Communicator.class.getName());
  private static final SecureRandom RANDOM = new SecureRandom();

  /** The builder's shared-memory settings. */
  static final class Settings {
    final boolean enabled;
    final Path directory;
    final int ringBytes;

    /** Test hook: the path the server opens for an offered path (identity outside tests). */
    final UnaryOperator<Path> serverView;

    Settings(boolean enabled, Path directory, int ringBytes, UnaryOperator<Path> serverView) {
      this.enabled = enabled;
      this.directory = directory;
      this.ringBytes = ringBytes;
      this.serverView = serverView;
    }
  }

  private ShmNegotiation() {}

  /** Client side: offers shared memory if it can; returns the link to use from now on. */
  static Link client(Link link, Settings s, long jobId, int myRank, int worldSize, long deadline)
      throws IOException {
    String route =
        "rank " + myRank + " -> rank " + link.peerRank + " at " + link.peerAddress + ": ";
    String why = null;
    ShmLink.Segment segment = null;
    boolean handedOver = false;
    if (!(link instanceof ChannelLink)) {
      why = "TLS (shared memory is not used with TLS)";
    } else if (!s.enabled) {
      why = "TCP (shared memory is off)";
    } else if (!sameHost(link)) {
      why = "TCP (the peer is on another host)";
    } else if (!Files.isDirectory(s.directory) || !Files.isWritable(s.directory)) {
      why = "TCP (" + s.directory + " is not a writable directory)";
    } else {
      byte[] suffix = new byte[8];
      RANDOM.nextBytes(suffix);
      Path file =
          s.directory.resolve(
              segmentName(jobId, ProcessHandle.current().pid(), myRank, link.peerRank, suffix));
      try {
        segment =
            ShmLink.create(file, s.ringBytes, Math.min(s.ringBytes, ShmLink.REVERSE_CAPACITY));
      } catch (IOException | RuntimeException e) {
        why = "TCP (cannot create a shared memory segment in " + s.directory + ": " + e + ")";
      }
    }
    try {
      byte[] path =
          segment == null ? new byte[0] : segment.path.toString().getBytes(StandardCharsets.UTF_8);
      int length = segment == null ? 0 : ShmLink.NONCE_BYTES + path.length;
      if (length > MAX_OFFER_BYTES) {
        throw new IOException("shared memory path too long: " + segment.path);
      }
      ByteBuffer offer = ByteBuffer.allocate(12 + length);
      offer.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(OFFER).putInt(length);
      if (segment != null) {
        offer.put(segment.nonce).put(path);
      }
      offer.flip();
      link.writeFully(offer, null, deadline);
      if (segment == null) {
        LOG.log(System.Logger.Level.INFO, route + why);
        return link;
      }
      ByteBuffer head = ByteBuffer.allocate(11);
      readFrame(link, head, ANSWER, deadline, "the shared memory answer");
      boolean accepted = head.get() == 1;
      int reasonLength = head.getShort() & 0xffff;
      if (reasonLength > MAX_REASON_BYTES) {
        throw new Handshake.HandshakeException(
            "shared memory answer with a " + reasonLength + "-byte reason");
      }
      ByteBuffer reason = ByteBuffer.allocate(reasonLength);
      link.readFully(reason, deadline);
      if (!accepted) {
        LOG.log(
            System.Logger.Level.INFO,
            route
                + "TCP (the peer declined shared memory: "
                + new String(reason.array(), StandardCharsets.UTF_8)
                + ")");
        return link;
      }
      ShmLink shm =
          ShmLink.creator((ChannelLink) link, segment, describe(s.directory, s.ringBytes));
      handedOver = true;
      LOG.log(
          System.Logger.Level.INFO, route + "shared memory (same host; " + shm.description() + ")");
      return shm;
    } finally {
      if (segment != null) {
        deleteName(segment.path);
        if (!handedOver) {
          ShmLink.unmap(segment.mapping); // no link uses it: free its memory now
        }
      }
    }
  }

  static String segmentName(long jobId, long pid, int fromRank, int toRank, byte[] suffix) {
    return FILE_PREFIX
        + Long.toHexString(jobId)
        + "-p"
        + pid
        + "-r"
        + fromRank
        + "-r"
        + toRank
        + "-"
        + HexFormat.of().formatHex(suffix);
  }

  /** Server side: reads the client's offer and answers it; returns the link to use from now on. */
  static Link server(Link link, Settings s, long jobId, int myRank, long deadline)
      throws IOException {
    String route =
        "rank " + myRank + " <- rank " + link.peerRank + " at " + link.peerAddress + ": ";
    ByteBuffer head = ByteBuffer.allocate(12);
    readFrame(link, head, OFFER, deadline, "the shared memory offer");
    int length = head.getInt();
    if (length == 0) {
      LOG.log(System.Logger.Level.INFO, route + link.transport() + " (no shared memory offered)");
      return link;
    }
    if (length < ShmLink.NONCE_BYTES || length > MAX_OFFER_BYTES) {
      throw new Handshake.HandshakeException("shared memory offer of " + length + " bytes");
    }
    ByteBuffer body = ByteBuffer.allocate(length);
    link.readFully(body, deadline);
    body.flip();
    byte[] nonce = new byte[ShmLink.NONCE_BYTES];
    body.get(nonce);
    String offered = StandardCharsets.UTF_8.decode(body).toString();
    String why = null;
    boolean suspicious = false;
    ShmLink shm = null;
    if (!(link instanceof ChannelLink)) {
      why = "rank " + myRank + " uses TLS";
    } else if (!s.enabled) {
      why = "shared memory is off on rank " + myRank;
    } else {
      try {
        Path path;
        try {
          path = confine(offered, s, jobId, link.peerRank, myRank);
        } catch (IOException | InvalidPathException e) {
          suspicious = true;
          throw e;
        }
        MappedByteBuffer mapping = ShmLink.open(path, nonce);
        deleteName(path); // both ends hold the mapping now; the name is no longer needed
        try {
          shm =
              ShmLink.acceptor(
                  (ChannelLink) link, mapping, describe(path.getParent(), mapping.getLong(8)));
        } catch (IOException | RuntimeException e) {
          ShmLink.unmap(mapping);
          throw e;
        }
      } catch (IOException | InvalidPathException e) {
        why = "rank " + myRank + " cannot use " + offered + ": " + e.getMessage();
      }
    }
    byte[] reason = why == null ? new byte[0] : truncate(why.getBytes(StandardCharsets.UTF_8));
    ByteBuffer answer = ByteBuffer.allocate(11 + reason.length);
    answer.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(ANSWER);
    answer.put((byte) (shm != null ? 1 : 0)).putShort((short) reason.length).put(reason).flip();
    try {
      link.writeFully(answer, null, deadline);
    } catch (IOException | RuntimeException e) {
      if (shm != null) {
        shm.abort();
      }
      throw e;
    }
    if (shm == null) {
      LOG.log(
          suspicious ? System.Logger.Level.WARNING : System.Logger.Level.INFO,
          route + link.transport() + " (declined shared memory: " + why + ")");
      return link;
    }
    LOG.log(
        System.Logger.Level.INFO, route + "shared memory (same host; " + shm.description() + ")");
    return shm;
  }

  /**
   * The file to open for an {@code offered} path, confined to this rank's segment directory (see
   * the class comment); throws naming what is wrong otherwise.
   */
  static Path confine(String offered, Settings s, long jobId, int fromRank, int toRank)
      throws IOException {
    Path path = s.serverView.apply(Path.of(offered));
    if (!path.isAbsolute() || !path.equals(path.normalize()) || path.getFileName() == null) {
      throw new IOException("not an absolute, normalized path (no '.' or '..')");
    }
    String name = path.getFileName().toString();
    Matcher m = NAME.matcher(name);
    if (!m.matches()) {
      throw new IOException(
          "not a shared memory segment's name ("
              + FILE_PREFIX
              + "<job>-p<pid>-r<from>-r<to>-<random>)");
    }
    if (!m.group(1).equals(Long.toHexString(jobId))
        || !m.group(3).equals(Integer.toString(fromRank))
        || !m.group(4).equals(Integer.toString(toRank))) {
      throw new IOException(
          "a segment of another job or link (expected job "
              + Long.toHexString(jobId)
              + ", rank "
              + fromRank
              + " to rank "
              + toRank
              + ")");
    }
    Path directory;
    Path parent;
    try {
      directory = s.directory.toRealPath();
      parent = path.getParent().toRealPath();
    } catch (IOException e) {
      throw new IOException(
          "outside this rank's segment directory " + s.directory + " (" + e + ")", e);
    }
    if (!parent.equals(directory)) {
      throw new IOException(
          "outside this rank's segment directory "
              + directory
              + " (its directory is really "
              + parent
              + ")");
    }
    Path file = directory.resolve(name);
    Map<String, Object> attrs =
        Files.readAttributes(file, "unix:uid,isRegularFile", LinkOption.NOFOLLOW_LINKS);
    if (!Boolean.TRUE.equals(attrs.get("isRegularFile"))) {
      throw new IOException("not a regular file (a link?)");
    }
    Integer uid = currentUid();
    if (uid == null || !uid.equals(attrs.get("uid"))) {
      throw new IOException(
          "owned by uid " + attrs.get("uid") + ", not by this process's uid " + uid);
    }
    return file;
  }

  /** This process's user id (Linux: the owner of /proc/self), or null where that cannot be read. */
  static Integer currentUid() {
    try {
      return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * Deletes segments in {@code directory} left by processes that died between creating them and the
   * peer's answer (a {@code kill -9} at the wrong moment): only names of this code's {@link #NAME}
   * pattern, regular files owned by this user, whose creating process is not alive ({@link
   * ProcessHandle#of}) and that are older than {@link #STALE_AGE}. Best effort: never throws;
   * returns how many it deleted, each logged.
   */
  static int sweepStale(Path directory) {
    if (!Files.isDirectory(directory)) {
      return 0;
    }
    Integer uid = currentUid();
    if (uid == null) {
      return 0;
    }
    int swept = 0;
    FileTime cutoff = FileTime.from(Instant.now().minus(STALE_AGE));
    try (DirectoryStream<Path> files = Files.newDirectoryStream(directory, FILE_PREFIX + "*")) {
      for (Path file : files) {
        Matcher m = NAME.matcher(file.getFileName().toString());
        if (!m.matches()) {
          continue;
        }
        long pid = Long.parseLong(m.group(2));
        if (ProcessHandle.of(pid).isPresent()) {
          continue;
        }
        try {
          Map<String, Object> attrs =
              Files.readAttributes(
                  file, "unix:uid,isRegularFile,lastModifiedTime", LinkOption.NOFOLLOW_LINKS);
          if (!Boolean.TRUE.equals(attrs.get("isRegularFile"))
              || !uid.equals(attrs.get("uid"))
              || ((FileTime) attrs.get("lastModifiedTime")).compareTo(cutoff) > 0) {
            continue;
          }
          if (Files.deleteIfExists(file)) {
            swept++;
            LOG.log(
                System.Logger.Level.INFO,
                "deleted the stale shared memory segment "
                    + file
                    + " (its creating process "
                    + pid
                    + " is gone)");
          }
        } catch (IOException | RuntimeException e) {
          LOG.log(
              System.Logger.Level.WARNING,
              "cannot sweep the stale shared memory segment " + file + ": " + e);
        }
      }
    } catch (IOException | RuntimeException e) {
      LOG.log(
          System.Logger.Level.WARNING,
          "cannot look for stale shared memory segments in " + directory + ": " + e);
    }
    return swept;
  }

  /** True if the peer's address is a loopback address or one of this host's interface addresses. */
  static boolean sameHost(Link link) {
    try {
      InetAddress peer = ((InetSocketAddress) link.channel().getRemoteAddress()).getAddress();
      return peer.isLoopbackAddress() || NetworkInterface.getByInetAddress(peer) != null;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  private static void readFrame(Link link, ByteBuffer buf, short type, long deadline, String what)
      throws IOException {
    link.readFully(buf, deadline);
    buf.flip();
    int magic = buf.getInt();
    short version = buf.getShort();
    short actual = buf.getShort();
    if (magic != Wire.MAGIC || version != Wire.VERSION || actual != type) {
      throw new Handshake.HandshakeException(
          "expected "
              + what
              + " (type "
              + type
              + " of protocol version "
              + Wire.VERSION
              + "), got magic 0x"
              + Integer.toHexString(magic)
              + " version "
              + version
              + " type "
              + actual);
    }
  }

  private static String describe(Path directory, long ringBytes) {
    return (ringBytes >= (1 << 20) && ringBytes % (1 << 20) == 0
            ? (ringBytes >> 20) + " MiB"
            : (ringBytes >> 10) + " KiB")
        + " ring in "
        + directory;
  }

  private static byte[] truncate(byte[] b) {
    return b.length <= MAX_REASON_BYTES ? b : Arrays.copyOf(b, MAX_REASON_BYTES);
  }

  private static void deleteName(Path path) {
    try {
      Files.deleteIfExists(path);
    } catch (IOException e) {
      LOG.log(
          System.Logger.Level.WARNING, "cannot delete the shared memory file " + path + ": " + e);
    }
  }
}
