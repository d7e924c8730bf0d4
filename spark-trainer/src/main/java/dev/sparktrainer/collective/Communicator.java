package dev.sparktrainer.collective;

import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.function.UnaryOperator;
import javax.net.ssl.SSLContext;

/**
 * One rank's end of an authenticated TCP ring, and the collectives over it. Links to neighbours on
 * the same host carry their data through shared memory unless {@link Builder#optSharedMemory} says
 * otherwise or TLS is on ({@link #rightTransport()}, {@link #leftTransport()}).
 *
 * <p>Why this file is long: it is the collective layer's public API, and nearly all of it is
 * documented public surface: each collective's overloads (float, double and long arrays, ranges,
 * ByteBuffers) and the nested {@link Builder}, one documented method per setting. The Builder stays
 * nested because {@code Communicator.Builder} is a public type name that callers declare; what is
 * not API already lives in other classes ({@link OperationGuard}, {@link RingConnector}, {@link
 * FrameChannel} and the algorithm classes).
 *
 * <p>Built once per training attempt with {@link #builder()}; {@link Builder#build()} connects to
 * the right neighbour (rank + 1) and accepts the left neighbour (rank - 1) on the {@link
 * RingListener}, both authenticated with the {@link JobSecret}. Afterwards the ring and its buffers
 * are reused by every operation: the steady-state per-step path allocates nothing.
 *
 * <p>All ranks must call the same operations in the same order with buffers of the same size; a
 * mismatch is detected from the frame headers and fails with a clear error. Every operation has a
 * deadline ({@link Builder#optOperationTimeout(Duration)}); any failure throws {@link
 * CollectiveException} naming this rank, the peer and the operation, and closes this communicator
 * (its sockets too, so the other ranks fail fast instead of waiting for their deadlines).
 *
 * <p>Not thread-safe: one operation at a time. {@link #close()} may be called from any thread.
 * Buffers hold their elements little-endian.
 *
 * <p>The work is split as in Gloo: {@link RingConnector} forms the ring, {@link FrameChannel} moves
 * and checks frames, and one class per algorithm ({@link RingAllReduce}, {@link SmallAllReduce},
 * {@link RingBroadcast}, {@link RingAllGather}, {@link RingBarrier}) runs against a {@link
 * RingContext}. This class is the API: it checks arguments and runs each operation under its {@link
 * OperationGuard}, which keeps the one-operation-at-a-time and deadline bookkeeping and turns every
 * failure into one {@link CollectiveException}.
 */
public final class Communicator implements AutoCloseable {
  /** Every thread a communicator starts has a name beginning with this. */
  public static final String THREAD_NAME_PREFIX = "collective-";

  static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(60);
  static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(120);
  static final Duration DEFAULT_HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);
  static final int DEFAULT_CHUNK_BYTES = 1024 * 1024;
  static final int DEFAULT_SMALL_MESSAGE_BYTES = 64 * 1024;
  static final int DEFAULT_SHARED_MEMORY_BYTES = 4 << 20;
  static final Path DEFAULT_SHARED_MEMORY_DIRECTORY = Path.of("/dev/shm");

  private final int rank;
  private final int size;
  private final List<String> peers;
  private final int smallMessageBytes;
  private final int rejectedConnections;
  private final Link left;
  private final Link right;

  /** Null with one rank. */
  private final FrameChannel channel;

  private final Operands operands = new Operands();
  private final RingAllReduce ringAllReduce;
  private final SmallAllReduce smallAllReduce;
  private final RingBroadcast broadcast;
  private final RingAllGather allGather;
  private final RingBarrier barrier;

  /** One operation at a time, its deadline, its failure, and closing ({@link OperationGuard}). */
  private final OperationGuard guard;

  /** With one rank {@code links} is null. */
  private Communicator(RingConfig config, RingConnector.Links links) {
    this.rank = config.rank;
    this.size = config.size();
    this.peers = config.peers;
    long operationTimeoutNanos = config.operationTimeout.toNanos();
    this.smallMessageBytes = config.smallMessageBytes;
    this.rejectedConnections = links == null ? 0 : links.rejectedConnections;
    this.left = links == null ? null : links.left;
    this.right = links == null ? null : links.right;
    this.channel =
        links == null
            ? null
            : new FrameChannel(
                rank, left, right, config.secret.jobId(), config.chunkBytes, operationTimeoutNanos);
    this.guard = new OperationGuard(rank, size, operationTimeoutNanos, channel, left, right);
    RingContext ctx = new RingContext(rank, size, config.chunkBytes, channel);
    this.ringAllReduce = new RingAllReduce(ctx, config.wirePrecision);
    this.allGather = new RingAllGather(ctx);
    this.smallAllReduce = new SmallAllReduce(ctx, allGather);
    this.broadcast = new RingBroadcast(ctx);
    this.barrier = new RingBarrier(ctx, smallAllReduce);
    if (channel != null) {
      channel
          .start(); // last: a failure above leaves no thread behind (the builder aborts the links)
    }
  }

  /**
   * A builder: {@code setRank}, {@code setPeers}, {@code setSecret} and (N > 1) {@code
   * setListener}.
   */
  public static Builder builder() {
    return new Builder();
  }

  /** This rank, 0..size-1. */
  public int rank() {
    return rank;
  }

  /** The number of ranks. */
  public int size() {
    return size;
  }

  /**
   * Collective operations this rank has begun: the ring's sequence number. Every rank runs the same
   * operations in the same order, so between operations it is the same on every rank (for checks
   * and tests of what ran where).
   */
  public long operations() {
    return guard.operationsBegun();
  }

  /** Every rank's address, indexed by rank. */
  public List<String> peers() {
    return peers;
  }

  /**
   * How data travels to the right neighbour (rank + 1): {@link LinkTransport#SHARED_MEMORY} when it
   * runs on this host and both ends allow it, else TCP or TLS. Null with one rank.
   */
  public LinkTransport rightTransport() {
    return right == null ? null : right.transport();
  }

  /** How data arrives from the left neighbour (rank - 1); see {@link #rightTransport()}. */
  public LinkTransport leftTransport() {
    return left == null ? null : left.transport();
  }

  // ---------------------------------------------------------------------------------------------
  // all-reduce

  /**
   * Reduces {@code data} element-wise across ranks, in place; every rank ends with identical bits.
   */
  public void allReduce(float[] data, ReduceOp op) {
    allReduce(data, 0, data.length, op);
  }

  /** Reduces {@code data[offset, offset + length)} in place. */
  public void allReduce(float[] data, int offset, int length, ReduceOp op) {
    Objects.checkFromIndexSize(offset, length, data.length);
    allReduceArray(data, offset, length, ElementType.FLOAT32, op);
  }

  /** Reduces {@code data} element-wise across ranks, in place. */
  public void allReduce(double[] data, ReduceOp op) {
    allReduce(data, 0, data.length, op);
  }

  /** Reduces {@code data[offset, offset + length)} in place. */
  public void allReduce(double[] data, int offset, int length, ReduceOp op) {
    Objects.checkFromIndexSize(offset, length, data.length);
    allReduceArray(data, offset, length, ElementType.FLOAT64, op);
  }

  /** Reduces {@code data} element-wise across ranks, in place. */
  public void allReduce(long[] data, ReduceOp op) {
    allReduce(data, 0, data.length, op);
  }

  /** Reduces {@code data[offset, offset + length)} in place. */
  public void allReduce(long[] data, int offset, int length, ReduceOp op) {
    Objects.checkFromIndexSize(offset, length, data.length);
    allReduceArray(data, offset, length, ElementType.INT64, op);
  }

  /** The typed overloads' one path: {@code data} is the array {@code type} names. */
  private void allReduceArray(Object data, int offset, int length, ElementType type, ReduceOp op) {
    guard.begin("allReduce", type, op, length);
    try {
      ByteBuffer work = operands.load(data, offset, length, type);
      reduce(work, 0, length, type, op);
      operands.store(data, offset, length, type);
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  /**
   * Reduces the elements between {@code buffer}'s position and limit in place, without copying them
   * (a direct buffer goes to the socket as is). Position and limit are left unchanged; the byte
   * count must be a multiple of the element size.
   */
  public void allReduce(ByteBuffer buffer, ElementType type, ReduceOp op) {
    Objects.requireNonNull(type, "type");
    int bytes = checkBuffer(buffer);
    if (bytes % type.bytes() != 0) {
      throw new IllegalArgumentException(
          "Invalid buffer: " + bytes + " bytes is not a whole number of " + type + " elements");
    }
    allReduce(buffer, buffer.position(), bytes / type.bytes(), type, op);
  }

  /** {@code count} elements from byte offset {@code offset}, ignoring position and limit. */
  void allReduce(ByteBuffer buffer, int offset, int count, ElementType type, ReduceOp op) {
    guard.begin("allReduce", type, op, count);
    try {
      reduce(buffer, offset, count, type, op);
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  /** Small messages take the latency-optimal path, the rest the bandwidth-optimal ring. */
  private void reduce(ByteBuffer buf, int base, int count, ElementType type, ReduceOp op)
      throws IOException {
    Objects.requireNonNull(op, "op");
    if (size == 1) {
      return; // the sum, min, max and mean of one value is that value
    }
    long bytes = (long) count * type.bytes();
    channel.chooseWriter(bytes);
    if (bytes <= smallMessageBytes) {
      smallAllReduce.run(buf, base, count, type, op, Wire.OP_SMALL_ALL_REDUCE);
    } else {
      Operands.Views v = operands.of(buf);
      ringAllReduce.run(v.send, v.recv, v.reduce.on(buf, base), base, count, type, op);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // broadcast, all-gather, barrier

  /** Replaces {@code data} on every rank with {@code root}'s. All ranks pass the same length. */
  public void broadcast(float[] data, int root) {
    broadcastArray(data, data.length, ElementType.FLOAT32, root);
  }

  /** Replaces {@code data} on every rank with {@code root}'s. All ranks pass the same length. */
  public void broadcast(double[] data, int root) {
    broadcastArray(data, data.length, ElementType.FLOAT64, root);
  }

  /** Replaces {@code data} on every rank with {@code root}'s. All ranks pass the same length. */
  public void broadcast(long[] data, int root) {
    broadcastArray(data, data.length, ElementType.INT64, root);
  }

  /** The typed overloads' one path: {@code data} is the array {@code type} names. */
  private void broadcastArray(Object data, int length, ElementType type, int root) {
    guard.begin("broadcast", type, null, length);
    try {
      checkRoot(root);
      long bytes = (long) type.bytes() * length;
      ByteBuffer work = rank == root ? operands.load(data, 0, length, type) : operands.work(bytes);
      Operands.Views v = operands.of(work);
      broadcast.run(v.send, v.recv, 0, (int) bytes, root);
      if (rank != root) {
        operands.store(data, 0, length, type);
      }
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  /**
   * Replaces the bytes between {@code buffer}'s position and limit with {@code root}'s, without
   * copying. All ranks pass the same number of bytes; position and limit are left unchanged.
   */
  public void broadcast(ByteBuffer buffer, int root) {
    int bytes = checkBuffer(buffer);
    guard.begin("broadcast", null, null, bytes);
    try {
      checkRoot(root);
      Operands.Views v = operands.of(buffer);
      broadcast.run(v.send, v.recv, buffer.position(), bytes, root);
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  /**
   * Broadcasts a byte array of any length from {@code root}: the root passes its data, the others
   * may pass null. Returns the root's bytes on every rank (the root gets its own array back).
   */
  public byte[] broadcastBytes(byte[] data, int root) {
    guard.begin("broadcast", null, null, data == null ? -1 : data.length);
    try {
      checkRoot(root);
      if (rank == root) {
        Objects.requireNonNull(data, "data (required on the root)");
      }
      return broadcast.bytes(data, root);
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  /**
   * Gathers every rank's bytes (any length, may differ per rank) on every rank.
   *
   * @return a list indexed by rank; element {@code rank()} is a copy of {@code data}
   */
  public List<byte[]> allGather(byte[] data) {
    Objects.requireNonNull(data, "data");
    guard.begin("allGather", null, null, data.length);
    try {
      return allGather.run(data);
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  /** Returns when every rank has called {@code barrier()} (N-1 hops). */
  public void barrier() {
    guard.begin("barrier", null, null, 0);
    try {
      barrier.run();
    } catch (IOException | RuntimeException e) {
      throw guard.fail(e);
    } finally {
      guard.end();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // lifecycle

  /**
   * Closes the sockets and stops the sender thread. Idempotent; safe from any thread. An operation
   * running concurrently fails with {@link CollectiveException}.
   */
  @Override
  public void close() {
    guard.close();
  }

  /** True once {@link #close()} was called or an operation failed. */
  public boolean isClosed() {
    return guard.isClosed();
  }

  @Override
  public String toString() {
    return "Communicator[rank " + rank + " of " + size + (isClosed() ? ", closed" : "") + "]";
  }

  /**
   * Connections this rank's listener dropped while forming the ring: callers that did not prove the
   * job secret, including those still silent when the ring formed (the first 10 logged with their
   * remote address and why, the rest counted in one line).
   */
  public int rejectedConnections() {
    return rejectedConnections;
  }

  Link leftLink() {
    return left;
  }

  Link rightLink() {
    return right;
  }

  boolean inOperation() {
    return guard.inOperation();
  }

  long framesReceived() {
    return channel == null ? 0 : channel.framesReceived();
  }

  /** The sender thread (null with one rank), for tests. */
  Thread senderThread() {
    return channel == null ? null : channel.senderThread();
  }

  /**
   * How many times this rank's threads have blocked in a selector (plain and shared-memory links),
   * for tests: the JDK's epoll selector boxes the descriptor of every ready key, 16 bytes each once
   * descriptors exceed 127, so that much allocation per wait is the JDK's, not this package's.
   */
  long selectorWaits() {
    return channel == null ? 0 : channel.selectorWaits();
  }

  private int checkBuffer(ByteBuffer buffer) {
    Objects.requireNonNull(buffer, "buffer");
    if (buffer.isReadOnly()) {
      throw new IllegalArgumentException("Invalid buffer: read-only");
    }
    return buffer.remaining();
  }

  private void checkRoot(int root) {
    if (root < 0 || root >= size) {
      throw new IllegalArgumentException("Invalid root " + root + ": expected 0.." + (size - 1));
    }
  }

  static String threadName(int rank, String role) {
    return THREAD_NAME_PREFIX + "r" + rank + "-" + role;
  }

  static void closeQuietly(Closeable c) {
    if (c != null) {
      try {
        c.close();
      } catch (IOException ignored) {
        // nothing more to release
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // builder

  /**
   * Builds a {@link Communicator}: {@code setX} for required values, {@code optX} for optional
   * ones, validated in {@link #build()}, which connects the ring ({@link RingConnector}).
   */
  public static final class Builder {
    private int rank = -1;
    private List<String> peers;
    private JobSecret secret;
    private RingListener listener;
    private Duration connectTimeout = DEFAULT_CONNECT_TIMEOUT;
    private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;
    private Duration handshakeTimeout = DEFAULT_HANDSHAKE_TIMEOUT;
    private int chunkBytes = DEFAULT_CHUNK_BYTES;
    private int smallMessageBytes = DEFAULT_SMALL_MESSAGE_BYTES;
    private WirePrecision wirePrecision = WirePrecision.FP32;
    private SSLContext sslContext;
    private boolean tlsNeedClientAuth = true;
    private boolean sharedMemory = true;
    private Path sharedMemoryDirectory = DEFAULT_SHARED_MEMORY_DIRECTORY;
    private int sharedMemoryBytes = DEFAULT_SHARED_MEMORY_BYTES;
    private UnaryOperator<Path> sharedMemoryServerView = p -> p;

    private Builder() {}

    /** This rank, 0..peers-1. Required. */
    public Builder setRank(int rank) {
      this.rank = rank;
      return this;
    }

    /** Every rank's {@link RingListener#address()}, indexed by rank. Required. */
    public Builder setPeers(List<String> peers) {
      this.peers = peers == null ? null : List.copyOf(peers);
      return this;
    }

    /** The job's secret, the same on every rank. Required. */
    public Builder setSecret(JobSecret secret) {
      this.secret = secret;
      return this;
    }

    /**
     * This rank's listener, whose address is {@code peers.get(rank)}. Required with more than one
     * rank. The communicator closes it once the left neighbour is connected.
     */
    public Builder setListener(RingListener listener) {
      this.listener = listener;
      return this;
    }

    /**
     * A job's comm group whole: the connect and collective timeouts, the wire precision, TLS and
     * the shared-memory transport (bucket size and overlap are the training step's).
     */
    public Builder optOptions(CommOptions options) {
      return optConnectTimeout(options.connectTimeout())
          .optOperationTimeout(options.operationTimeout())
          .optWirePrecision(options.wirePrecision())
          .optSslContext(options.tls() == null ? null : options.tls().sslContext())
          .optSharedMemory(options.sharedMemory());
    }

    /** Deadline for forming the ring, retries included. Default 60 s. */
    public Builder optConnectTimeout(Duration timeout) {
      this.connectTimeout = timeout;
      return this;
    }

    /** Deadline of every collective operation. Default 120 s. */
    public Builder optOperationTimeout(Duration timeout) {
      this.operationTimeout = timeout;
      return this;
    }

    /**
     * How long one incoming connection may take to authenticate before it is dropped. Default 10 s.
     * Whatever this says, a caller must send its first bytes within 1 s of connecting, and complete
     * its HELLO within 1 s of its link being up; up to 4 callers are authenticated at once.
     */
    public Builder optHandshakeTimeout(Duration timeout) {
      this.handshakeTimeout = timeout;
      return this;
    }

    /** Frame size of the pipelined ring (bytes of data per frame). Default 1 MiB. */
    public Builder optChunkBytes(int chunkBytes) {
      this.chunkBytes = chunkBytes;
      return this;
    }

    /**
     * All-reduces of at most this many bytes take the latency-optimal path (N-1 hops, FP32 wire).
     * Default 64 KiB; 0 sends everything through the ring.
     */
    public Builder optSmallMessageBytes(int smallMessageBytes) {
      this.smallMessageBytes = smallMessageBytes;
      return this;
    }

    /** Wire format of FLOAT32 ring all-reduce payloads. Default {@link WirePrecision#FP32}. */
    public Builder optWirePrecision(WirePrecision wirePrecision) {
      this.wirePrecision = wirePrecision;
      return this;
    }

    /**
     * Run every connection inside TLS with this context (its key managers identify this rank, its
     * trust managers decide which peers to trust). Default: no TLS. The HMAC authentication runs
     * either way.
     */
    public Builder optSslContext(SSLContext sslContext) {
      this.sslContext = sslContext;
      return this;
    }

    /** With TLS, require the connecting peer's certificate too (mutual TLS). Default true. */
    public Builder optTlsNeedClientAuth(boolean needClientAuth) {
      this.tlsNeedClientAuth = needClientAuth;
      return this;
    }

    /**
     * Exchange data with a neighbour on the same host through a memory-mapped file (owner-only, in
     * {@link #optSharedMemoryDirectory}) instead of the TCP socket, which then only carries
     * wake-ups. Used for a link when both ends allow it, the peer's address is on this host,
     * neither end uses TLS, and the peer can open the file this rank created; otherwise the link
     * stays on TCP. Default true.
     */
    public Builder optSharedMemory(boolean sharedMemory) {
      this.sharedMemory = sharedMemory;
      return this;
    }

    /** Where shared-memory files are created (a tmpfs). Default {@code /dev/shm}. */
    public Builder optSharedMemoryDirectory(Path directory) {
      this.sharedMemoryDirectory = directory;
      return this;
    }

    /**
     * Bytes of the shared-memory ring towards the right neighbour: a power of two. Default 4 MiB.
     */
    public Builder optSharedMemoryBytes(int ringBytes) {
      this.sharedMemoryBytes = ringBytes;
      return this;
    }

    /** Test hook: maps the path a peer offers to the path this rank opens (another host's view). */
    Builder sharedMemoryServerView(UnaryOperator<Path> view) {
      this.sharedMemoryServerView = view;
      return this;
    }

    /**
     * Validates the configuration and forms the ring: connects to rank + 1 (retrying with
     * exponential backoff while it is not listening yet) and accepts rank - 1, both authenticated.
     *
     * @throws IllegalArgumentException for an invalid configuration
     * @throws CollectiveException if the ring cannot be formed within the connect timeout
     */
    public Communicator build() {
      RingConfig config =
          new RingConfig(
              rank,
              peers,
              secret,
              listener,
              connectTimeout,
              operationTimeout,
              handshakeTimeout,
              chunkBytes,
              smallMessageBytes,
              wirePrecision,
              sslContext,
              tlsNeedClientAuth,
              sharedMemory,
              sharedMemoryDirectory,
              sharedMemoryBytes,
              sharedMemoryServerView);
      if (config.size() == 1) {
        if (listener != null) {
          listener.close();
        }
        return new Communicator(config, null);
      }
      RingConnector.Links links = new RingConnector(config).connect();
      try {
        return new Communicator(config, links);
      } catch (RuntimeException | Error e) {
        links.abort();
        throw e;
      }
    }
  }
}
