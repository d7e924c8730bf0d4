package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Accepts connections on the {@link RingListener} until the left neighbour authenticates; drops and
 * logs everyone else. Runs on its own thread while the {@link RingConnector} connects to the right.
 *
 * <p>One selector thread accepts and holds each new connection until its first bytes arrive: a
 * caller that sends nothing within {@link #PRE_AUTH_TIMEOUT} is dropped there, having cost no
 * thread. Callers that spoke are authenticated concurrently by at most {@link #HANDSHAKE_THREADS}
 * threads; each must complete its HELLO within {@link #PRE_AUTH_TIMEOUT} of its link being up
 * (after the TLS handshake with TLS), and the rest of the handshake within the handshake timeout:
 * deadlines enforced by closing the socket ({@link SetupDeadline}), so a caller that drips its
 * bytes (a TLS record announced, then a byte a second) is dropped at the deadline, not when it
 * stops. At most {@link #MAX_UNAUTHENTICATED} callers are held at once; beyond that the
 * longest-waiting silent one is dropped. So strangers queued ahead of the neighbour, idle or
 * half-spoken, delay it by about a second, not by a handshake timeout each.
 */
final class RingAcceptor implements Runnable {
  /**
   * How long a new connection to the listener may stay silent, and then take to complete its HELLO
   * once its link is up, before it is dropped (the handshake timeout if that is shorter). A ring
   * peer sends its HELLO as soon as it has connected.
   */
  static final Duration PRE_AUTH_TIMEOUT = Duration.ofSeconds(1);

  /** Connections authenticated at once while the ring forms. */
  static final int HANDSHAKE_THREADS = 4;

  /** Unauthenticated connections held at once while the ring forms. */
  static final int MAX_UNAUTHENTICATED = 64;

  /** Rejected connections logged one by one; the rest are counted in one line. */
  static final int MAX_LOGGED_REJECTIONS = 10;

  /** The communicator's logger: operators find the ring's security events under one name. */
  private static final System.Logger LOG = System.getLogger(Communicator.class.getName());

  private final RingConfig c;
  private final int leftRank;
  private final String leftAddress;
  private final String prefix;
  private final long deadline;
  private final long preAuthNanos;
  volatile Link link;
  volatile CollectiveException error;
  private final AtomicInteger rejected = new AtomicInteger();

  /** Connections being authenticated, queued or running (closed when the acceptor ends). */
  private final Set<SocketChannel> authenticating = ConcurrentHashMap.newKeySet();

  /** Connections that have not sent anything yet, oldest first; the selector thread's only. */
  private final ArrayDeque<Silent> silent = new ArrayDeque<>();

  private volatile Selector selector;
  private boolean stopped; // guarded by this

  /** A connection waiting for its first bytes. */
  private static final class Silent {
    final SocketChannel ch;
    final Object remote;
    final long expires;
    SelectionKey key;

    Silent(SocketChannel ch, Object remote, long expires) {
      this.ch = ch;
      this.remote = remote;
      this.expires = expires;
    }
  }

  RingAcceptor(RingConfig config, int leftRank, long deadline) {
    this.c = config;
    this.leftRank = leftRank;
    this.leftAddress = config.peers.get(leftRank);
    this.prefix = config.prefix();
    this.deadline = deadline;
    this.preAuthNanos = Math.min(PRE_AUTH_TIMEOUT.toNanos(), config.handshakeTimeout.toNanos());
  }

  int rejected() {
    return rejected.get();
  }

  /** Ends the accept loop soon (the ring formed or failed elsewhere). */
  void stop() {
    synchronized (this) {
      stopped = true;
    }
    Selector s = selector;
    if (s != null) {
      s.wakeup();
    }
  }

  private synchronized boolean isStopped() {
    return stopped;
  }

  @Override
  public void run() {
    ServerSocketChannel server = c.listener.channel();
    ThreadPoolExecutor pool = null;
    try (Selector sel = Selector.open()) {
      selector = sel;
      server.configureBlocking(false);
      server.register(sel, SelectionKey.OP_ACCEPT);
      pool =
          new ThreadPoolExecutor(
              HANDSHAKE_THREADS,
              HANDSHAKE_THREADS,
              1,
              TimeUnit.SECONDS,
              new LinkedBlockingQueue<>(),
              task -> {
                Thread t = new Thread(task, Communicator.threadName(c.rank, "handshake"));
                t.setDaemon(true);
                return t;
              });
      pool.allowCoreThreadTimeOut(true);
      List<Silent> spoke = new ArrayList<>();
      while (link == null) {
        if (isStopped() || !server.isOpen()) {
          error =
              new CollectiveException(
                  prefix
                      + "stopped waiting for rank "
                      + leftRank
                      + " at "
                      + leftAddress
                      + ": listener closed",
                  c.rank,
                  leftRank,
                  leftAddress,
                  "connect",
                  null);
          return;
        }
        long now = System.nanoTime();
        if (now - deadline >= 0) {
          error =
              new CollectiveException(
                  prefix
                      + "no authenticated connection from rank "
                      + leftRank
                      + " at "
                      + leftAddress
                      + " within "
                      + c.connectTimeout.toMillis()
                      + " ms ("
                      + rejected.get()
                      + " other connection(s) rejected)",
                  c.rank,
                  leftRank,
                  leftAddress,
                  "connect",
                  null);
          return;
        }
        while (!silent.isEmpty() && now - silent.peekFirst().expires >= 0) {
          Silent gone = silent.pollFirst();
          gone.key.cancel();
          drop(gone.ch, gone.remote, "it sent nothing within " + preAuthNanos / 1_000_000 + " ms");
        }
        long wake = silent.isEmpty() ? deadline : Math.min(deadline, silent.peekFirst().expires);
        sel.select(Math.max(1, Link.millisLeft(wake)));
        // Connections that spoke leave this selector before a handshake thread takes them (a TLS
        // link switches its channel to blocking mode, which needs it deregistered).
        while (collect(sel, server, spoke)) {
          sel.selectNow();
        }
        for (Silent s : spoke) {
          authenticating.add(s.ch);
          pool.execute(() -> authenticate(s.ch, s.remote));
        }
        spoke.clear();
      }
    } catch (ClosedChannelException e) {
      error =
          new CollectiveException(
              prefix
                  + "stopped waiting for rank "
                  + leftRank
                  + " at "
                  + leftAddress
                  + ": listener closed",
              c.rank,
              leftRank,
              leftAddress,
              "connect",
              e);
    } catch (IOException | RuntimeException e) {
      error =
          new CollectiveException(
              prefix + "accepting rank " + leftRank + " failed: " + e,
              c.rank,
              leftRank,
              leftAddress,
              "connect",
              e);
    } finally {
      stop();
      String why = link != null ? "the ring formed without it" : "the listener stopped";
      for (Silent s : silent) {
        drop(s.ch, s.remote, why + " (it had sent nothing)");
      }
      silent.clear();
      if (pool != null) {
        pool.shutdownNow();
        for (SocketChannel ch : authenticating) {
          Communicator.closeQuietly(ch); // ends handshakes still running
        }
        try {
          if (!pool.awaitTermination(10, TimeUnit.SECONDS)) {
            LOG.log(
                System.Logger.Level.WARNING, prefix + "handshake threads did not end within 10 s");
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      int suppressed = rejected.get() - MAX_LOGGED_REJECTIONS;
      if (suppressed > 0) {
        LOG.log(
            System.Logger.Level.WARNING,
            prefix
                + "dropped "
                + suppressed
                + " more unauthenticated connection(s) while waiting for rank "
                + leftRank
                + " (not logged one by one)");
      }
    }
  }

  /**
   * Handles the selected keys: accepts new connections, and moves those that spoke from the
   * selector to {@code spoke}. True if it cancelled keys (the caller deregisters them).
   */
  private boolean collect(Selector sel, ServerSocketChannel server, List<Silent> spoke)
      throws IOException {
    boolean cancelled = false;
    boolean accept = false;
    for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext(); ) {
      SelectionKey k = it.next();
      it.remove();
      if (!k.isValid()) {
        continue;
      }
      if (k.isAcceptable()) {
        accept = true;
      } else if (k.isReadable()) {
        Silent s = (Silent) k.attachment();
        k.cancel();
        cancelled = true;
        silent.remove(s);
        spoke.add(s);
      }
    }
    if (accept) {
      for (int i = 0; i < MAX_UNAUTHENTICATED; i++) {
        SocketChannel ch = server.accept();
        if (ch == null) {
          break;
        }
        Object remote = ch.socket().getRemoteSocketAddress();
        if (silent.size() + spoke.size() + authenticating.size() >= MAX_UNAUTHENTICATED) {
          Silent oldest = silent.pollFirst();
          if (oldest != null) {
            oldest.key.cancel();
            cancelled = true;
            drop(
                oldest.ch,
                oldest.remote,
                "more than "
                    + MAX_UNAUTHENTICATED
                    + " unauthenticated connections at once (it was the longest silent)");
          } else {
            drop(
                ch,
                remote,
                "more than " + MAX_UNAUTHENTICATED + " unauthenticated connections at once");
            continue;
          }
        }
        try {
          ch.configureBlocking(false);
          Silent s = new Silent(ch, remote, System.nanoTime() + preAuthNanos);
          s.key = ch.register(sel, SelectionKey.OP_READ, s);
          silent.addLast(s);
        } catch (IOException e) {
          drop(ch, remote, e.toString());
        }
      }
    }
    return cancelled;
  }

  /** A handshake thread's work: the caller is the left neighbour, or it is dropped. */
  private void authenticate(SocketChannel ch, Object remote) {
    Link candidate = null;
    try {
      if (isStopped()) {
        drop(ch, remote, "the ring formed before it authenticated");
        return;
      }
      long handshakeDeadline = Math.min(deadline, System.nanoTime() + c.handshakeTimeout.toNanos());
      // One deadline for the whole setup (TLS handshake, HELLO, the rest), enforced by closing the
      // socket: per-read timeouts cannot bound a peer that drips its bytes.
      try (SetupDeadline setup = SetupDeadline.arm(ch, handshakeDeadline)) {
        try {
          candidate =
              RingConnector.openLink(c, ch, false, leftRank, leftAddress, handshakeDeadline);
          long helloDeadline = System.nanoTime() + preAuthNanos;
          Handshake.server(
              candidate,
              c.secret,
              c.rank,
              leftRank,
              c.size(),
              helloDeadline,
              handshakeDeadline,
              setup);
          candidate =
              ShmNegotiation.server(candidate, c.shm, c.secret.jobId(), c.rank, handshakeDeadline);
        } catch (IOException e) {
          setup.check("the connection's setup");
          throw e;
        }
        setup.check("the connection's setup");
      }
      synchronized (this) {
        if (link == null && !stopped) {
          authenticating.remove(ch); // before it is published: the acceptor closes what is left
          link = candidate;
          candidate = null;
        }
      }
      if (candidate != null) {
        candidate.abort();
        drop(null, remote, "the acceptor stopped while it authenticated");
      }
      Selector s = selector;
      if (s != null) {
        s.wakeup();
      }
    } catch (IOException | RuntimeException e) {
      if (candidate != null) {
        candidate.abort();
      }
      drop(ch, remote, e.getMessage() == null ? e.toString() : e.getMessage());
    } finally {
      authenticating.remove(ch);
    }
  }

  /** Closes a stranger's connection, counts it, and logs it (the first few one by one). */
  private void drop(SocketChannel ch, Object remote, String why) {
    if (ch != null) {
      Communicator.closeQuietly(ch);
    }
    if (rejected.incrementAndGet() <= MAX_LOGGED_REJECTIONS) {
      LOG.log(
          System.Logger.Level.WARNING,
          prefix
              + "dropped an unauthenticated connection from "
              + remote
              + " while waiting for rank "
              + leftRank
              + ": "
              + why);
    }
  }
}
