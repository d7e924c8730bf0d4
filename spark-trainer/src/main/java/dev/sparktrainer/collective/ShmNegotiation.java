package dev.sparktrainer.collective;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.function.UnaryOperator;

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
 * (the same file, not a namesake in another container's {@code /dev/shm}); it then deletes the file's
 * name, and the client deletes it in every case once answered, so nothing outlives the processes.
 */
final class ShmNegotiation {
  static final short OFFER = 5;
  static final short ANSWER = 6;
  static final int MAX_OFFER_BYTES = ShmLink.NONCE_BYTES + 4096;
  static final int MAX_REASON_BYTES = 1024;
  static final String FILE_PREFIX = "spark-trainer-ring-";

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
    String route = "rank " + myRank + " -> rank " + link.peerRank + " at " + link.peerAddress + ": ";
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
              FILE_PREFIX + Long.toHexString(jobId) + "-r" + myRank + "-r" + link.peerRank + "-"
                  + HexFormat.of().formatHex(suffix));
      try {
        segment = ShmLink.create(file, s.ringBytes, Math.min(s.ringBytes, ShmLink.REVERSE_CAPACITY));
      } catch (IOException | RuntimeException e) {
        why = "TCP (cannot create a shared memory segment in " + s.directory + ": " + e + ")";
      }
    }
    try {
      byte[] path = segment == null ? new byte[0] : segment.path.toString().getBytes(StandardCharsets.UTF_8);
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
        throw new Handshake.HandshakeException("shared memory answer with a " + reasonLength + "-byte reason");
      }
      ByteBuffer reason = ByteBuffer.allocate(reasonLength);
      link.readFully(reason, deadline);
      if (!accepted) {
        LOG.log(
            System.Logger.Level.INFO,
            route + "TCP (the peer declined shared memory: "
                + new String(reason.array(), StandardCharsets.UTF_8) + ")");
        return link;
      }
      ShmLink shm = ShmLink.creator((ChannelLink) link, segment, describe(s.directory, s.ringBytes));
      handedOver = true;
      LOG.log(System.Logger.Level.INFO, route + "shared memory (same host; " + shm.description() + ")");
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

  /** Server side: reads the client's offer and answers it; returns the link to use from now on. */
  static Link server(Link link, Settings s, int myRank, long deadline) throws IOException {
    String route = "rank " + myRank + " <- rank " + link.peerRank + " at " + link.peerAddress + ": ";
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
    ShmLink shm = null;
    if (!(link instanceof ChannelLink)) {
      why = "rank " + myRank + " uses TLS";
    } else if (!s.enabled) {
      why = "shared memory is off on rank " + myRank;
    } else {
      try {
        Path path = s.serverView.apply(Path.of(offered));
        MappedByteBuffer mapping = ShmLink.open(path, nonce);
        deleteName(path); // both ends hold the mapping now; the name is no longer needed
        try {
          shm = ShmLink.acceptor((ChannelLink) link, mapping, describe(path.getParent(), mapping.getLong(8)));
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
      LOG.log(System.Logger.Level.INFO, route + link.transport() + " (declined shared memory: " + why + ")");
      return link;
    }
    LOG.log(System.Logger.Level.INFO, route + "shared memory (same host; " + shm.description() + ")");
    return shm;
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
          "expected " + what + " (type " + type + " of protocol version " + Wire.VERSION + "), got magic 0x"
              + Integer.toHexString(magic) + " version " + version + " type " + actual);
    }
  }

  private static String describe(Path directory, long ringBytes) {
    return (ringBytes >= (1 << 20) && ringBytes % (1 << 20) == 0 ? (ringBytes >> 20) + " MiB" : (ringBytes >> 10) + " KiB")
        + " ring in " + directory;
  }

  private static byte[] truncate(byte[] b) {
    return b.length <= MAX_REASON_BYTES ? b : java.util.Arrays.copyOf(b, MAX_REASON_BYTES);
  }

  private static void deleteName(Path path) {
    try {
      Files.deleteIfExists(path);
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "cannot delete the shared memory file " + path + ": " + e);
    }
  }
}
