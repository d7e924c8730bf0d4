package dev.sparktrainer.collective;

import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.channels.SocketChannel;

/**
 * Forms one rank's place in the ring (Gloo's rendezvous and pair set-up): connects to the right
 * neighbour (rank + 1), retrying with exponential backoff while it is not listening yet, while a
 * {@link RingAcceptor} accepts the left neighbour (rank - 1) on the {@link RingListener}. Both
 * links are authenticated ({@link Handshake}) and then agree on their transport ({@link
 * ShmNegotiation}).
 */
final class RingConnector {
  /** Both authenticated links of a formed ring, and how many strangers the listener dropped. */
  static final class Links {
    final Link left;
    final Link right;
    final int rejectedConnections;

    Links(Link left, Link right, int rejectedConnections) {
      this.left = left;
      this.right = right;
      this.rejectedConnections = rejectedConnections;
    }

    /** Closes both links at once (the ring could not be used after all). */
    void abort() {
      left.abort();
      right.abort();
    }
  }

  private final RingConfig c;

  RingConnector(RingConfig config) {
    this.c = config;
  }

  /**
   * Forms the ring (N > 1) within the connect timeout, and closes the listener: no one else may
   * connect later.
   *
   * @throws CollectiveException naming the neighbour that could not be reached or authenticated
   */
  Links connect() {
    int rank = c.rank;
    int size = c.size();
    int leftRank = Math.floorMod(rank - 1, size);
    int rightRank = Math.floorMod(rank + 1, size);
    long deadline = System.nanoTime() + c.connectTimeout.toNanos();
    if (c.shm.enabled) {
      ShmNegotiation.sweepStale(c.shm.directory);
    }
    RingAcceptor acceptor = new RingAcceptor(c, leftRank, deadline);
    Thread acceptThread = new Thread(acceptor, Communicator.threadName(rank, "accept"));
    acceptThread.setDaemon(true);
    acceptThread.start();
    Link right = null;
    boolean formed = false;
    try {
      right = connectRight(rightRank, deadline);
      acceptThread.join(Link.millisLeft(deadline) + 1000);
      if (acceptThread.isAlive()) {
        throw new CollectiveException(
            c.prefix()
                + "no authenticated connection from rank "
                + leftRank
                + " at "
                + c.peers.get(leftRank)
                + " within "
                + c.connectTimeout.toMillis()
                + " ms",
            rank,
            leftRank,
            c.peers.get(leftRank),
            "connect",
            null);
      }
      if (acceptor.error != null) {
        throw acceptor.error;
      }
      Links links = new Links(acceptor.link, right, acceptor.rejected());
      formed = true;
      return links;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CollectiveException(
          "rank " + rank + " of " + size + ": interrupted while forming the ring",
          rank,
          -1,
          null,
          "connect",
          e);
    } finally {
      c.listener.close(); // no one else may connect later
      acceptor.stop(); // ends a still-running accept loop
      if (!formed) {
        if (right != null) {
          right.abort();
        }
        try {
          acceptThread.join(10_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        Link accepted = acceptor.link;
        if (accepted != null) {
          accepted.abort();
        }
      }
    }
  }

  /** Connections closed by the acceptor during authentication before the caller gives up. */
  static final int MAX_REFUSALS = 3;

  private Link connectRight(int rightRank, long deadline) throws InterruptedException {
    String address = c.peers.get(rightRank);
    InetSocketAddress unresolved = PeerAddress.parse(address);
    long backoffMillis = 10;
    IOException last = null;
    int attempts = 0;
    int refusals = 0;
    while (true) {
      long ms = Link.millisLeft(deadline);
      if (ms == 0) {
        throw new CollectiveException(
            c.prefix()
                + "cannot connect to rank "
                + rightRank
                + " at "
                + address
                + " within "
                + c.connectTimeout.toMillis()
                + " ms ("
                + attempts
                + " attempts"
                + (last == null ? "" : ", last: " + last)
                + ")",
            c.rank,
            rightRank,
            address,
            "connect",
            last);
      }
      SocketChannel ch = null;
      try {
        attempts++;
        InetSocketAddress target =
            new InetSocketAddress(unresolved.getHostString(), unresolved.getPort());
        ch = SocketChannel.open();
        ch.socket().connect(target, (int) Math.min(Integer.MAX_VALUE, ms));
      } catch (ConnectException | NoRouteToHostException | SocketTimeoutException e) {
        Communicator.closeQuietly(ch);
        last = e;
        long sleep = Math.min(backoffMillis, Link.millisLeft(deadline));
        if (sleep > 0) {
          Thread.sleep(sleep);
        }
        backoffMillis = Math.min(backoffMillis * 2, 1000);
        continue;
      } catch (IOException | RuntimeException e) {
        Communicator.closeQuietly(ch);
        throw new CollectiveException(
            c.prefix() + "cannot connect to rank " + rightRank + " at " + address + ": " + e,
            c.rank,
            rightRank,
            address,
            "connect",
            e);
      }
      Link link = null;
      // The whole setup by the connect deadline, enforced by closing the socket: whoever answers at
      // the neighbour's address could drip a TLS record past any read timeout.
      SetupDeadline setup = SetupDeadline.arm(ch, deadline);
      try {
        try {
          link = openLink(c, ch, true, rightRank, address, deadline);
          Handshake.client(link, c.secret, c.rank, rightRank, c.size(), deadline);
          link = ShmNegotiation.client(link, c.shm, c.secret.jobId(), c.rank, c.size(), deadline);
        } catch (IOException e) {
          setup.check("the connection's setup");
          throw e;
        } finally {
          setup.close();
        }
        setup.check("the connection's setup");
        return link;
      } catch (IOException | RuntimeException e) {
        if (link != null) {
          link.abort();
        } else {
          Communicator.closeQuietly(ch);
        }
        // The acceptor drops a caller whose HELLO is late (its pre-authentication deadline): on an
        // overloaded host that can be an honest, slow peer. Try again a few times before calling it
        // a
        // refusal; a wrong secret or TLS mismatch is refused every time and still fails here.
        if (e instanceof EOFException
            && ++refusals < MAX_REFUSALS
            && Link.millisLeft(deadline) > 0) {
          last = (EOFException) e;
          Thread.sleep(Math.min(backoffMillis, Link.millisLeft(deadline)));
          backoffMillis = Math.min(backoffMillis * 2, 1000);
          continue;
        }
        String why =
            e instanceof EOFException
                ? "it closed the connection during authentication (wrong job secret, TLS mismatch,"
                    + " or a different peers list?)"
                : e.getMessage();
        throw new CollectiveException(
            c.prefix()
                + "authentication with rank "
                + rightRank
                + " at "
                + address
                + " failed: "
                + why,
            c.rank,
            rightRank,
            address,
            "connect",
            e);
      }
    }
  }

  /** A connected socket as a link: plain TCP, or TLS when the configuration has a context. */
  static Link openLink(
      RingConfig c, SocketChannel ch, boolean client, int peerRank, String address, long deadline)
      throws IOException {
    ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
    if (c.sslContext != null) {
      return TlsLink.open(
          ch, c.sslContext, client, c.tlsNeedClientAuth, peerRank, address, deadline);
    }
    return new ChannelLink(ch, peerRank, address);
  }
}
