package dev.sparktrainer.collective;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ServerSocketChannel;
import java.util.Objects;

/**
 * The listening socket of one rank, opened before the rendezvous so that its address can be
 * published (in Spark: through {@code BarrierTaskContext.allGather}).
 *
 * <p>It binds the advertised address, not every interface, unless {@link
 * Builder#optBindAllInterfaces(boolean)} says so, on an ephemeral port unless one is given. The
 * {@link Communicator} built with it accepts its left neighbour on it and then closes it; until
 * then it may be closed by the caller (idempotent).
 */
public final class RingListener implements AutoCloseable {
  private final ServerSocketChannel server;
  private final String advertisedHost;
  private final int port;
  private final String address;

  private RingListener(ServerSocketChannel server, String advertisedHost, int port) {
    this.server = server;
    this.advertisedHost = advertisedHost;
    this.port = port;
    this.address = PeerAddress.format(advertisedHost, port);
  }

  /** Binds {@code host} (a name or literal address of this machine) on an ephemeral port. */
  public static RingListener bind(String host) {
    return builder().setHost(host).build();
  }

  /** A builder: {@link Builder#setHost(String)} is required. */
  public static Builder builder() {
    return new Builder();
  }

  /** The address peers connect to, {@code host:port} ({@code [ipv6]:port} for IPv6 literals). */
  public String address() {
    return address;
  }

  /** The bound port. */
  public int port() {
    return port;
  }

  /** The advertised host, as given to the builder. */
  public String host() {
    return advertisedHost;
  }

  ServerSocketChannel channel() {
    return server;
  }

  boolean isOpen() {
    return server.isOpen();
  }

  /** Closes the socket. Idempotent. */
  @Override
  public void close() {
    try {
      server.close();
    } catch (IOException e) {
      System.getLogger(RingListener.class.getName())
          .log(
              System.Logger.Level.WARNING,
              "Closing the ring listener on " + address + " failed",
              e);
    }
  }

  @Override
  public String toString() {
    return "RingListener[" + address + (server.isOpen() ? "" : ", closed") + "]";
  }

  /** Builder for {@link RingListener}. */
  public static final class Builder {
    private String host;
    private int port;
    private boolean bindAllInterfaces;
    private int backlog = 64;

    private Builder() {}

    /** The advertised host: this executor's address as peers will reach it. Required. */
    public Builder setHost(String host) {
      this.host = host;
      return this;
    }

    /** A fixed port; default 0, an ephemeral port. */
    public Builder optPort(int port) {
      this.port = port;
      return this;
    }

    /**
     * Bind the wildcard address (every interface) but still advertise {@link #setHost(String)}.
     * Default false: bind only the advertised address.
     */
    public Builder optBindAllInterfaces(boolean bindAllInterfaces) {
      this.bindAllInterfaces = bindAllInterfaces;
      return this;
    }

    /** Pending-connection queue length; default 64. */
    public Builder optBacklog(int backlog) {
      this.backlog = backlog;
      return this;
    }

    /** Binds the socket. */
    public RingListener build() {
      Objects.requireNonNull(host, "host");
      String bare =
          host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
      if (bare.isEmpty()) {
        throw new IllegalArgumentException(
            "Invalid host '': expected this executor's host name or address");
      }
      if (port < 0 || port > 65535) {
        throw new IllegalArgumentException("Invalid port " + port + ": expected 0..65535");
      }
      if (backlog < 1) {
        throw new IllegalArgumentException("Invalid backlog " + backlog + ": expected >= 1");
      }
      ServerSocketChannel server = null;
      try {
        InetSocketAddress bindAddress =
            bindAllInterfaces
                ? new InetSocketAddress(port)
                : new InetSocketAddress(InetAddress.getByName(bare), port);
        server = ServerSocketChannel.open();
        server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
        server.bind(bindAddress, backlog);
        int bound = ((InetSocketAddress) server.getLocalAddress()).getPort();
        return new RingListener(server, bare, bound);
      } catch (IOException e) {
        if (server != null) {
          try {
            server.close();
          } catch (IOException suppressed) {
            e.addSuppressed(suppressed);
          }
        }
        throw new UncheckedIOException(
            "Cannot bind the ring listener on " + (bindAllInterfaces ? "*" : bare) + ":" + port, e);
      }
    }
  }
}
