package dev.sparktrainer.collective;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.function.UnaryOperator;
import javax.net.ssl.SSLContext;

/**
 * A {@link Communicator.Builder}'s settings, validated: what the {@link RingConnector} forms the
 * ring with and the communicator runs with. Immutable.
 */
final class RingConfig {
  final int rank;
  final List<String> peers;
  final JobSecret secret;
  final RingListener listener;
  final Duration connectTimeout;
  final Duration operationTimeout;
  final Duration handshakeTimeout;
  final int chunkBytes;
  final int smallMessageBytes;
  final WirePrecision wirePrecision;
  final SSLContext sslContext;
  final boolean tlsNeedClientAuth;
  final ShmNegotiation.Settings shm;

  /**
   * @throws IllegalArgumentException naming the first invalid setting
   */
  RingConfig(
      int rank,
      List<String> peers,
      JobSecret secret,
      RingListener listener,
      Duration connectTimeout,
      Duration operationTimeout,
      Duration handshakeTimeout,
      int chunkBytes,
      int smallMessageBytes,
      WirePrecision wirePrecision,
      SSLContext sslContext,
      boolean tlsNeedClientAuth,
      boolean sharedMemory,
      Path sharedMemoryDirectory,
      int sharedMemoryBytes,
      UnaryOperator<Path> sharedMemoryServerView) {
    if (peers == null || peers.isEmpty()) {
      throw new IllegalArgumentException(
          "Invalid peers: setPeers with every rank's host:port is required");
    }
    for (String p : peers) {
      PeerAddress.parse(p);
    }
    if (rank < 0 || rank >= peers.size()) {
      throw new IllegalArgumentException(
          "Invalid rank "
              + rank
              + ": expected 0.."
              + (peers.size() - 1)
              + " ("
              + peers.size()
              + " peers)");
    }
    Objects.requireNonNull(secret, "secret: setSecret is required");
    if (peers.size() > 1) {
      if (listener == null) {
        throw new IllegalArgumentException(
            "Invalid listener: setListener is required with more than one rank");
      }
      if (!listener.isOpen()) {
        throw new IllegalArgumentException("Invalid listener " + listener + ": it is closed");
      }
      if (!listener.address().equals(peers.get(rank))) {
        throw new IllegalArgumentException(
            "Invalid peers: peers["
                + rank
                + "] is '"
                + peers.get(rank)
                + "' but this rank's listener is at '"
                + listener.address()
                + "'");
      }
    }
    checkPositive("connectTimeout", connectTimeout);
    checkPositive("operationTimeout", operationTimeout);
    checkPositive("handshakeTimeout", handshakeTimeout);
    if (chunkBytes < 1024 || chunkBytes > (64 << 20) || chunkBytes % 8 != 0) {
      throw new IllegalArgumentException(
          "Invalid chunkBytes " + chunkBytes + ": expected a multiple of 8 in 1024..67108864");
    }
    if (smallMessageBytes < 0 || smallMessageBytes > (16 << 20)) {
      throw new IllegalArgumentException(
          "Invalid smallMessageBytes " + smallMessageBytes + ": expected 0..16777216");
    }
    Objects.requireNonNull(wirePrecision, "wirePrecision");
    Objects.requireNonNull(sharedMemoryDirectory, "sharedMemoryDirectory");
    ShmLink.checkCapacity(sharedMemoryBytes);
    this.rank = rank;
    this.peers = peers;
    this.secret = secret;
    this.listener = listener;
    this.connectTimeout = connectTimeout;
    this.operationTimeout = operationTimeout;
    this.handshakeTimeout = handshakeTimeout;
    this.chunkBytes = chunkBytes;
    this.smallMessageBytes = smallMessageBytes;
    this.wirePrecision = wirePrecision;
    this.sslContext = sslContext;
    this.tlsNeedClientAuth = tlsNeedClientAuth;
    this.shm =
        new ShmNegotiation.Settings(
            sharedMemory, sharedMemoryDirectory, sharedMemoryBytes, sharedMemoryServerView);
  }

  private static void checkPositive(String name, Duration d) {
    if (d == null || d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(
          "Invalid " + name + " " + d + ": expected a positive duration");
    }
  }

  int size() {
    return peers.size();
  }

  /** "rank R of N: ", the start of every message about this rank. */
  String prefix() {
    return "rank " + rank + " of " + peers.size() + ": ";
  }
}
