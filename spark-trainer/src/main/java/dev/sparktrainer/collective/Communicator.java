package dev.sparktrainer.collective;

import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.net.ssl.SSLContext;

/**
 * One rank's end of an authenticated TCP ring, and the collectives over it. Links to neighbours on
 * the same host carry their data through shared memory unless {@link Builder#optSharedMemory} says
 * otherwise or TLS is on ({@link #rightTransport()}, {@link #leftTransport()}).
 *
 * <p>Built once per training attempt with {@link #builder()}; {@link Builder#build()} connects to the
 * right neighbour (rank + 1) and accepts the left neighbour (rank - 1) on the {@link RingListener},
 * both authenticated with the {@link JobSecret}. Afterwards the ring and its buffers are reused by
 * every operation: the steady-state per-step path allocates nothing.
 *
 * <p>All ranks must call the same operations in the same order with buffers of the same size; a
 * mismatch is detected from the frame headers and fails with a clear error. Every operation has a
 * deadline ({@link Builder#optOperationTimeout(Duration)}); any failure throws {@link
 * CollectiveException} naming this rank, the peer and the operation, and closes this communicator
 * (its sockets too, so the other ranks fail fast instead of waiting for their deadlines).
 *
 * <p>Not thread-safe: one operation at a time. {@link #close()} may be called from any thread.
 * Buffers hold their elements little-endian.
 */
public final class Communicator implements AutoCloseable {
  /** Every thread a communicator starts has a name beginning with this. */
  public static final String THREAD_NAME_PREFIX = "collective-";

  static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(60);
  static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(120);
  static final Duration DEFAULT_HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);
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
  static final int DEFAULT_CHUNK_BYTES = 1024 * 1024;
  static final int DEFAULT_SMALL_MESSAGE_BYTES = 64 * 1024;
  static final int DEFAULT_SHARED_MEMORY_BYTES = 4 << 20;
  static final java.nio.file.Path DEFAULT_SHARED_MEMORY_DIRECTORY = java.nio.file.Path.of("/dev/shm");

  /**
   * On plain links, operations of up to this many bytes run on the caller's thread alone (no
   * hand-off per frame: latency); larger ones hand the writing to the sender thread, so that copies
   * into and out of the sockets and the reduction run in parallel (throughput).
   */
  static final long CALLER_DRIVEN_MAX_BYTES = 4 << 20;
  /**
   * How long the caller's thread polls for a small frame before it blocks in the selector: a
   * neighbour that is running answers within about the time a blocked thread needs to be woken up.
   * Short, and yielding, because with more ranks than cores a polling rank delays the rank it waits
   * for.
   */
  static final long SPIN_NANOS = 20_000;
  /** Frames up to this size are waited for with {@link #SPIN_NANOS} of polling first. */
  static final int SPIN_MAX_FRAME_BYTES = 64 * 1024;

  private static final System.Logger LOG = System.getLogger(Communicator.class.getName());

  private final int rank;
  private final int size;
  private final List<String> peers;
  private final long jobId;
  private final long operationTimeoutNanos;
  private final int chunkBytes;
  private final int smallMessageBytes;
  private final WirePrecision wirePrecision;
  private final int rejectedConnections;
  private final Link left;
  private final Link right;
  private final Sender sender;

  private final ByteBuffer header = ByteBuffer.allocateDirect(Wire.HEADER_BYTES).order(ByteOrder.BIG_ENDIAN);
  private final ByteBuffer[] recvPair = new ByteBuffer[2];
  /**
   * Both plain links, for the caller's thread to wait on either (it writes queued frames while it
   * waits to receive); null with TLS or N = 1, where a sender thread writes.
   */
  private final Selector duplex;
  private final SelectionKey duplexLeft;
  private final SelectionKey duplexRight;
  /** Waits in {@link #duplex}; for tests. */
  private long duplexWaits;
  private final ByteBuffer stage;
  private final ByteBuffer scalar = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
  private final Reductions.Scratch scratch = new Reductions.Scratch();
  /** Typed views for the kernels, each kept for the buffer it was made for. */
  private final Reductions.View workView = new Reductions.View();
  private final Reductions.View extView = new Reductions.View();
  private final Reductions.View stageView = new Reductions.View();
  private final Reductions.View gatherView = new Reductions.View();
  private final long[] marks;
  private long recvSeq;
  /** {@code recvSeq} for other threads (tests watch progress with it). */
  private volatile long framesReceived;

  private final AtomicBoolean busy = new AtomicBoolean();
  private final Object closeLock = new Object();
  private volatile boolean closed;
  private boolean resourcesReleased;
  private volatile CollectiveException failure;

  // The running operation, for error messages (strings are built only on failure).
  private String opName = "connect";
  private long opIndex;
  private ElementType opType;
  private ReduceOp opReduce;
  private long opCount;
  private long deadline;

  // Reusable buffers and views: created on first need, grown never shrunk.
  private ByteBuffer work;
  private ByteBuffer workSend;
  private ByteBuffer workRecv;
  private FloatBuffer workFloats;
  private DoubleBuffer workDoubles;
  private LongBuffer workLongs;
  private ByteBuffer extOwner;
  private ByteBuffer extSend;
  private ByteBuffer extRecv;
  private ByteBuffer gather;
  private ByteBuffer gatherSend;
  private ByteBuffer gatherRecv;

  private Communicator(Builder b, Link left, Link right, int rejectedConnections) {
    this.rank = b.rank;
    this.size = b.peers.size();
    this.peers = b.peers;
    this.jobId = b.secret.jobId();
    this.operationTimeoutNanos = b.operationTimeout.toNanos();
    this.chunkBytes = b.chunkBytes;
    this.smallMessageBytes = b.smallMessageBytes;
    this.wirePrecision = b.wirePrecision;
    this.rejectedConnections = rejectedConnections;
    this.left = left;
    this.right = right;
    this.stage = ByteBuffer.allocateDirect(size > 1 ? chunkBytes : 8).order(ByteOrder.LITTLE_ENDIAN);
    stageView.on(stage, 0);
    this.marks = new long[size];
    Selector selector = null;
    SelectionKey leftKey = null;
    SelectionKey rightKey = null;
    if (left instanceof ChannelLink && right instanceof ChannelLink) {
      try {
        selector = Selector.open();
        leftKey = left.channel().register(selector, SelectionKey.OP_READ);
        rightKey = right.channel().register(selector, 0);
      } catch (IOException e) {
        // falls back to a sender thread
        closeQuietly(selector);
        selector = null;
        leftKey = null;
        rightKey = null;
      }
    }
    this.duplex = selector;
    this.duplexLeft = leftKey;
    this.duplexRight = rightKey;
    if (size > 1) {
      sender = new Sender(right, jobId, chunkBytes, threadName(rank, "sender"), this::onSenderFailure);
      sender.start();
    } else {
      sender = null;
    }
  }

  /** A builder: {@code setRank}, {@code setPeers}, {@code setSecret} and (N > 1) {@code setListener}. */
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

  /** Reduces {@code data} element-wise across ranks, in place; every rank ends with identical bits. */
  public void allReduce(float[] data, ReduceOp op) {
    allReduce(data, 0, data.length, op);
  }

  /** Reduces {@code data[offset, offset + length)} in place. */
  public void allReduce(float[] data, int offset, int length, ReduceOp op) {
    Objects.checkFromIndexSize(offset, length, data.length);
    begin("allReduce", ElementType.FLOAT32, op, length);
    try {
      ensureWork(4L * length);
      workFloats.put(0, data, offset, length);
      reduce(work, 0, length, ElementType.FLOAT32, op);
      workFloats.get(0, data, offset, length);
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /** Reduces {@code data} element-wise across ranks, in place. */
  public void allReduce(double[] data, ReduceOp op) {
    allReduce(data, 0, data.length, op);
  }

  /** Reduces {@code data[offset, offset + length)} in place. */
  public void allReduce(double[] data, int offset, int length, ReduceOp op) {
    Objects.checkFromIndexSize(offset, length, data.length);
    begin("allReduce", ElementType.FLOAT64, op, length);
    try {
      ensureWork(8L * length);
      workDoubles.put(0, data, offset, length);
      reduce(work, 0, length, ElementType.FLOAT64, op);
      workDoubles.get(0, data, offset, length);
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /** Reduces {@code data} element-wise across ranks, in place. */
  public void allReduce(long[] data, ReduceOp op) {
    allReduce(data, 0, data.length, op);
  }

  /** Reduces {@code data[offset, offset + length)} in place. */
  public void allReduce(long[] data, int offset, int length, ReduceOp op) {
    Objects.checkFromIndexSize(offset, length, data.length);
    begin("allReduce", ElementType.INT64, op, length);
    try {
      ensureWork(8L * length);
      workLongs.put(0, data, offset, length);
      reduce(work, 0, length, ElementType.INT64, op);
      workLongs.get(0, data, offset, length);
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /**
   * Reduces the elements between {@code buffer}'s position and limit in place, without copying them
   * (a direct buffer goes to the socket as is). Position and limit are left unchanged; the byte count
   * must be a multiple of the element size.
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
    begin("allReduce", type, op, count);
    try {
      reduce(buffer, offset, count, type, op);
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  private void reduce(ByteBuffer buf, int base, int count, ElementType type, ReduceOp op)
      throws IOException {
    Objects.requireNonNull(op, "op");
    if (size == 1) {
      return; // the sum, min, max and mean of one value is that value
    }
    long bytes = (long) count * type.bytes();
    chooseWriter(bytes);
    if (bytes <= smallMessageBytes) {
      smallAllReduce(buf, base, count, type, op, Wire.OP_SMALL_ALL_REDUCE);
    } else {
      if (buf == work) {
        ringAllReduce(workSend, workRecv, workView.on(buf, base), base, count, type, op);
      } else {
        useExternal(buf);
        ringAllReduce(extSend, extRecv, extView.on(buf, base), base, count, type, op);
      }
    }
  }

  /**
   * Ring reduce-scatter then ring all-gather. Segment k is first sent by rank k, accumulated by k+1,
   * k+2, ... in that order and finished by its owner k-1, which then distributes it verbatim: every
   * element is reduced once, in one fixed order, so all ranks hold identical bits.
   */
  private void ringAllReduce(
      ByteBuffer sendView,
      ByteBuffer recvView,
      Reductions.View target,
      int base,
      int count,
      ElementType type,
      ReduceOp op)
      throws IOException {
    WirePrecision wire = type == ElementType.FLOAT32 ? wirePrecision : WirePrecision.FP32;
    int es = type.bytes();
    int wireEs = wire == WirePrecision.FP32 ? es : 2;
    int chunkElems = Math.max(1, chunkBytes / es);
    int q = count / size;
    int rem = count % size;
    int maxSegment = q + (rem > 0 ? 1 : 0);
    int chunksPerSegment = (maxSegment + chunkElems - 1) / chunkElems;
    sender.ensureCapacity(2 * (size - 1) * chunksPerSegment + 1);
    int tagRs = Wire.reduceTag(Wire.OP_REDUCE_SCATTER, type, op, wire);
    int tagAg = Wire.reduceTag(Wire.OP_ALL_GATHER, type, op, wire);

    // Reduce-scatter. Step s: send segment (rank - s), receive and accumulate segment (rank - s - 1).
    int own = rank;
    for (int off = 0, len = segmentLength(own, q, rem); off < len; off += chunkElems) {
      int n = Math.min(chunkElems, len - off);
      enqueue(sendView, base + (segmentStart(own, q, rem) + off) * es, n, es, tagRs, wire);
    }
    marks[0] = sender.queued();
    for (int s = 0; s < size - 1; s++) {
      int k = Math.floorMod(rank - s - 1, size);
      int start = segmentStart(k, q, rem);
      int len = segmentLength(k, q, rem);
      boolean last = s == size - 2;
      for (int off = 0; off < len; off += chunkElems) {
        int n = Math.min(chunkElems, len - off);
        int p = base + (start + off) * es;
        receiveFrame(tagRs, n * wireEs, stage, 0, true);
        // On the last step this rank finishes segment k = rank + 1 (MEAN divides it here).
        int divisor = last && op == ReduceOp.MEAN ? size : 0;
        if (wire == WirePrecision.FP32) {
          Reductions.reduce(type, op, target, p, stageView, 0, n, divisor, scratch);
        } else {
          Reductions.reduceHalf(op, wire, recvView, p, stage, 0, n, divisor);
        }
        if (!last) {
          enqueue(sendView, p, n, es, tagRs, wire);
        } else {
          // This rank owns segment k = rank + 1: start the all-gather with it.
          if (wire != WirePrecision.FP32) {
            HalfFloats.roundInPlace(recvView, p, n, wire);
          }
          enqueue(sendView, p, n, es, tagAg, wire);
        }
      }
      marks[s + 1] = sender.queued();
    }

    // All-gather. Step s: receive final segment (rank - s), forward it unless it completed the circle.
    for (int s = 0; s < size - 1; s++) {
      // Segment (rank - s) was sent in reduce-scatter step s; it must be on the wire before it is
      // overwritten (the right neighbour has read all of it before it reaches its all-gather).
      awaitSent(marks[s]);
      int k = Math.floorMod(rank - s, size);
      int start = segmentStart(k, q, rem);
      int len = segmentLength(k, q, rem);
      for (int off = 0; off < len; off += chunkElems) {
        int n = Math.min(chunkElems, len - off);
        int p = base + (start + off) * es;
        if (wire == WirePrecision.FP32) {
          receiveFrame(tagAg, n * es, recvView, p, false);
        } else {
          receiveFrame(tagAg, n * 2, stage, 0, true);
          HalfFloats.decode(stage, 0, recvView, p, n, wire);
        }
        if (s < size - 2) {
          enqueue(sendView, p, n, es, tagAg, wire);
        }
      }
    }
    awaitSent(sender.queued());
  }

  private void enqueue(ByteBuffer view, int pos, int n, int es, int tag, WirePrecision wire) {
    sender.enqueue(view, pos, wire == WirePrecision.FP32 ? n * es : n, tag, wire);
  }

  /**
   * Views of a caller's buffer, made once per buffer and indexed absolutely over its whole capacity:
   * a caller may pass the same buffer with a different position and limit each time (the trainer
   * reduces its gradient arena bucket by bucket), and a view keeping an earlier call's limit would
   * refuse the later bytes.
   */
  private void useExternal(ByteBuffer buf) {
    if (buf != extOwner) {
      extOwner = buf;
      extSend = buf.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      extRecv = buf.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }
    extSend.clear();
    extRecv.clear();
  }

  static int segmentStart(int k, int q, int rem) {
    return k * q + Math.min(k, rem);
  }

  static int segmentLength(int k, int q, int rem) {
    return q + (k < rem ? 1 : 0);
  }

  /**
   * Latency-optimal path for small messages: every rank's whole vector goes around the ring once
   * (N-1 hops instead of 2(N-1)); then every rank reduces the N vectors in rank order 0..N-1, so the
   * results are identical everywhere.
   */
  private void smallAllReduce(
      ByteBuffer buf, int base, int count, ElementType type, ReduceOp op, int opcode)
      throws IOException {
    int bytes = count * type.bytes();
    ensureGather((long) size * bytes);
    gather.put(rank * bytes, buf, base, bytes);
    ringGatherSlots(bytes, Wire.reduceTag(opcode, type, op, WirePrecision.FP32));
    gatherView.on(gather, 0);
    for (int k = 1; k < size; k++) {
      int divisor = k == size - 1 && op == ReduceOp.MEAN ? size : 0;
      Reductions.reduce(type, op, gatherView, 0, gatherView, k * bytes, count, divisor, scratch);
    }
    buf.put(base, gather, 0, bytes);
  }

  /** Ring all-gather of equal slots of the gather buffer: slot r holds rank r's data. */
  private void ringGatherSlots(int bytes, int tag) throws IOException {
    sender.ensureCapacity(size);
    for (int s = 0; s < size - 1; s++) {
      int sendSlot = Math.floorMod(rank - s, size);
      int recvSlot = Math.floorMod(rank - s - 1, size);
      sender.enqueue(gatherSend, sendSlot * bytes, bytes, tag, WirePrecision.FP32);
      receiveFrame(tag, bytes, gatherRecv, recvSlot * bytes, true);
    }
    awaitSent(sender.queued());
  }

  // ---------------------------------------------------------------------------------------------
  // broadcast, all-gather, barrier

  /** Replaces {@code data} on every rank with {@code root}'s. All ranks pass the same length. */
  public void broadcast(float[] data, int root) {
    begin("broadcast", ElementType.FLOAT32, null, data.length);
    try {
      checkRoot(root);
      ensureWork(4L * data.length);
      if (rank == root) {
        workFloats.put(0, data, 0, data.length);
      }
      broadcast(workSend, workRecv, 0, 4 * data.length, root);
      if (rank != root) {
        workFloats.get(0, data, 0, data.length);
      }
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /** Replaces {@code data} on every rank with {@code root}'s. All ranks pass the same length. */
  public void broadcast(double[] data, int root) {
    begin("broadcast", ElementType.FLOAT64, null, data.length);
    try {
      checkRoot(root);
      ensureWork(8L * data.length);
      if (rank == root) {
        workDoubles.put(0, data, 0, data.length);
      }
      broadcast(workSend, workRecv, 0, 8 * data.length, root);
      if (rank != root) {
        workDoubles.get(0, data, 0, data.length);
      }
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /** Replaces {@code data} on every rank with {@code root}'s. All ranks pass the same length. */
  public void broadcast(long[] data, int root) {
    begin("broadcast", ElementType.INT64, null, data.length);
    try {
      checkRoot(root);
      ensureWork(8L * data.length);
      if (rank == root) {
        workLongs.put(0, data, 0, data.length);
      }
      broadcast(workSend, workRecv, 0, 8 * data.length, root);
      if (rank != root) {
        workLongs.get(0, data, 0, data.length);
      }
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /**
   * Replaces the bytes between {@code buffer}'s position and limit with {@code root}'s, without
   * copying. All ranks pass the same number of bytes; position and limit are left unchanged.
   */
  public void broadcast(ByteBuffer buffer, int root) {
    int bytes = checkBuffer(buffer);
    begin("broadcast", null, null, bytes);
    try {
      checkRoot(root);
      useExternal(buffer);
      broadcast(extSend, extRecv, buffer.position(), bytes, root);
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /**
   * Broadcasts a byte array of any length from {@code root}: the root passes its data, the others
   * may pass null. Returns the root's bytes on every rank (the root gets its own array back).
   */
  public byte[] broadcastBytes(byte[] data, int root) {
    begin("broadcast", null, null, data == null ? -1 : data.length);
    try {
      checkRoot(root);
      if (rank == root) {
        Objects.requireNonNull(data, "data (required on the root)");
      }
      if (size == 1) {
        return data;
      }
      scalar.putLong(0, rank == root ? data.length : 0);
      broadcast(scalar.duplicate(), scalar.duplicate(), 0, 8, root);
      long length = scalar.getLong(0);
      if (length < 0 || length > Integer.MAX_VALUE - 8) {
        throw new ProtocolException(left, "broadcast length " + length + " is out of range");
      }
      byte[] out = rank == root ? data : new byte[(int) length];
      broadcast(ByteBuffer.wrap(out), ByteBuffer.wrap(out), 0, out.length, root);
      return out;
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /** Pipelined ring broadcast: the root streams chunks right; each rank forwards as it receives. */
  private void broadcast(ByteBuffer sendView, ByteBuffer recvView, int base, int bytes, int root)
      throws IOException {
    if (size == 1) {
      return;
    }
    int tag = Wire.broadcastTag(root);
    int chunks = Math.max(1, (int) ((bytes + (long) chunkBytes - 1) / chunkBytes));
    sender.ensureCapacity(chunks + 1);
    chooseWriter(bytes);
    boolean forward = Math.floorMod(rank + 1, size) != root;
    for (int c = 0; c < chunks; c++) {
      int p = base + c * chunkBytes;
      int n = Math.min(chunkBytes, bytes - c * chunkBytes);
      if (rank == root) {
        sender.enqueue(sendView, p, n, tag, WirePrecision.FP32);
      } else {
        receiveFrame(tag, n, recvView, p, false);
        if (forward) {
          sender.enqueue(sendView, p, n, tag, WirePrecision.FP32);
        }
      }
    }
    awaitSent(sender.queued());
  }

  /**
   * Gathers every rank's bytes (any length, may differ per rank) on every rank.
   *
   * @return a list indexed by rank; element {@code rank()} is a copy of {@code data}
   */
  public List<byte[]> allGather(byte[] data) {
    Objects.requireNonNull(data, "data");
    begin("allGather", null, null, data.length);
    try {
      byte[][] out = new byte[size][];
      out[rank] = data.clone();
      if (size > 1) {
        ensureGather(8L * size);
        gatherRecv.putLong(8 * rank, data.length);
        ringGatherSlots(8, Wire.tag(Wire.OP_GATHER_LENGTHS, 0, 0, 0));
        long frames = 0;
        long total = 0;
        for (int k = 0; k < size; k++) {
          long length = gatherRecv.getLong(8 * k);
          if (length < 0 || length > Integer.MAX_VALUE - 8) {
            throw new ProtocolException(left, "rank " + k + "'s all-gather length " + length + " is out of range");
          }
          if (k != rank) {
            out[k] = new byte[(int) length];
          }
          frames += Math.max(1, (length + chunkBytes - 1) / chunkBytes);
          total += length;
        }
        sender.ensureCapacity((int) Math.min(Integer.MAX_VALUE / 2, frames + 1));
        chooseWriter(total);
        int tag = Wire.tag(Wire.OP_GATHER_DATA, 0, 0, 0);
        for (int s = 0; s < size - 1; s++) {
          byte[] send = out[Math.floorMod(rank - s, size)];
          ByteBuffer sendView = ByteBuffer.wrap(send);
          for (int c = 0, chunks = Math.max(1, (send.length + chunkBytes - 1) / chunkBytes); c < chunks; c++) {
            int p = c * chunkBytes;
            sender.enqueue(sendView, p, Math.min(chunkBytes, send.length - p), tag, WirePrecision.FP32);
          }
          byte[] recv = out[Math.floorMod(rank - s - 1, size)];
          ByteBuffer recvView = ByteBuffer.wrap(recv);
          for (int c = 0, chunks = Math.max(1, (recv.length + chunkBytes - 1) / chunkBytes); c < chunks; c++) {
            int p = c * chunkBytes;
            receiveFrame(tag, Math.min(chunkBytes, recv.length - p), recvView, p, false);
          }
        }
        awaitSent(sender.queued());
      }
      List<byte[]> result = new ArrayList<>(size);
      Collections.addAll(result, out);
      return Collections.unmodifiableList(result);
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  /** Returns when every rank has called {@code barrier()} (N-1 hops). */
  public void barrier() {
    begin("barrier", null, null, 0);
    try {
      if (size == 1) {
        return;
      }
      scalar.putLong(0, 1);
      smallAllReduce(scalar, 0, 1, ElementType.INT64, ReduceOp.SUM, Wire.OP_BARRIER);
      if (scalar.getLong(0) != size) {
        throw new ProtocolException(left, "barrier counted " + scalar.getLong(0) + " ranks, expected " + size);
      }
    } catch (IOException | RuntimeException e) {
      throw fail(e);
    } finally {
      end();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // frames

  /**
   * Reads one frame from the left neighbour into {@code dst[pos, pos + length)} after checking its
   * header: magic, version, job, sequence number, operation and exact length. With plain links the
   * caller's thread writes queued frames to the right neighbour while it waits.
   *
   * @param scratch {@code dst} is this communicator's own buffer (the stage or the gather buffer):
   *     the header and the payload may then arrive in one read, because nothing of the payload is
   *     used unless the header, checked as soon as it is complete, matches. A caller's buffer only
   *     receives bytes after its frame's header was checked.
   */
  private void receiveFrame(int tag, int length, ByteBuffer dst, int pos, boolean scratch) throws IOException {
    header.clear();
    dst.clear();
    dst.position(pos).limit(pos + length);
    try {
      if (sender.callerDriven()) {
        pumpUntilReceived(tag, length, dst, scratch);
        return;
      }
      readLeft(header);
      header.flip();
      checkHeader(tag, length);
      readLeft(dst);
    } finally {
      dst.clear(); // absolute accesses check the limit
    }
  }

  /** {@link #receiveFrame} on plain links: one thread drives both non-blocking sockets. */
  private void pumpUntilReceived(int tag, int length, ByteBuffer dst, boolean scratch) throws IOException {
    SocketChannel in = left.channel();
    recvPair[0] = header;
    recvPair[1] = dst;
    boolean headerChecked = false;
    // Small frames poll a little before blocking: the neighbour's frame usually arrives within the
    // time a blocked thread needs to be woken up and rescheduled. Large ones block at once, to leave
    // the cores to the ranks that copy.
    long spinUntil = length <= SPIN_MAX_FRAME_BYTES ? 0 : Long.MIN_VALUE;
    try {
      while (true) {
        boolean progress = pumpSends();
        long n;
        try {
          n = headerChecked ? in.read(dst) : scratch ? in.read(recvPair) : in.read(header);
        } catch (IOException e) {
          throw new LinkException(left, "connection lost (" + e + ") while receiving from", e);
        }
        if (n < 0) {
          throw new LinkException(left, "connection closed by", new EOFException());
        }
        if (!headerChecked && !header.hasRemaining()) {
          header.flip();
          checkHeader(tag, length);
          headerChecked = true;
        }
        if (headerChecked && !dst.hasRemaining()) {
          return;
        }
        if (n > 0 || progress) {
          if (spinUntil != Long.MIN_VALUE) {
            spinUntil = 0;
          }
          continue;
        }
        if (spinUntil != Long.MIN_VALUE) {
          long now = System.nanoTime();
          if (spinUntil == 0) {
            spinUntil = now + SPIN_NANOS;
          }
          if (now - spinUntil < 0) {
            // yield, not onSpinWait: a PAUSE loop makes a virtual CPU give up its core to the host
            Thread.yield();
            continue;
          }
        }
        waitForLinks(true);
      }
    } finally {
      recvPair[1] = null;
    }
  }

  /** Caller-driven: writes what the right socket takes now; whether any byte moved. */
  private boolean pumpSends() throws LinkException {
    try {
      return sender.pump();
    } catch (IOException e) {
      throw new LinkException(right, "connection lost (" + e + ") while sending to", e);
    }
  }

  private static final java.util.function.Consumer<SelectionKey> IGNORE = key -> {};

  /**
   * Blocks until the left socket is readable ({@code receiving}) or the right one writable (frames
   * pending), or fails at the operation's deadline naming the link it waited for.
   */
  private void waitForLinks(boolean receiving) throws IOException {
    long ms = Link.millisLeft(deadline);
    if (ms == 0) {
      throw receiving
          ? new LinkException(left, "timed out after " + timeoutMillis() + " ms waiting for data from",
              new SocketTimeoutException())
          : new LinkException(
              right,
              "timed out after " + timeoutMillis() + " ms sending (" + (sender.queued() - sender.sent())
                  + " frames unsent; is it reading?) to",
              new SocketTimeoutException());
    }
    if (closed) {
      throw new ClosedChannelException();
    }
    try {
      duplexLeft.interestOps(receiving ? SelectionKey.OP_READ : 0);
      duplexRight.interestOps(sender.hasPending() ? SelectionKey.OP_WRITE : 0);
      duplexWaits++;
      duplex.select(IGNORE, ms);
    } catch (java.nio.channels.ClosedSelectorException | java.nio.channels.CancelledKeyException e) {
      throw new LinkException(left, "communicator closed while exchanging with", e);
    }
  }

  /** Checks a received header against the expected frame; advances the receive sequence. */
  private void checkHeader(int tag, int length) throws IOException {
    int magic = header.getInt(0);
    if (magic != Wire.MAGIC) {
      throw new ProtocolException(
          left,
          String.format(
              "received a frame with bad magic 0x%08x during %s (not a ring frame, or the stream is"
                  + " out of sync)",
              magic, Wire.describe(tag)));
    }
    short version = header.getShort(4);
    if (version != Wire.VERSION) {
      throw new ProtocolException(left, "frame of protocol version " + version + ", this rank speaks " + Wire.VERSION);
    }
    long frameJob = header.getLong(8);
    if (frameJob != jobId) {
      throw new ProtocolException(
          left, "frame of foreign job " + Long.toHexString(frameJob) + ", expected job " + Long.toHexString(jobId));
    }
    long seq = header.getLong(16);
    if (seq != recvSeq) {
      throw new ProtocolException(left, "out-of-sequence frame #" + seq + ", expected #" + recvSeq);
    }
    int frameTag = header.getInt(24);
    if (frameTag != tag) {
      throw new ProtocolException(
          left,
          "expected a " + Wire.describe(tag) + " frame, got " + Wire.describe(frameTag)
              + " (do all ranks call the same collectives in the same order?)");
    }
    int frameLength = header.getInt(28);
    if (frameLength != length) {
      throw new ProtocolException(
          left,
          "frame payload of " + frameLength + " bytes, expected " + length + " for " + Wire.describe(tag)
              + " (do all ranks pass buffers of the same size?)");
    }
    recvSeq++;
    framesReceived = recvSeq;
  }

  private void readLeft(ByteBuffer dst) throws IOException {
    try {
      left.readFully(dst, deadline);
    } catch (SocketTimeoutException e) {
      throw new LinkException(left, "timed out after " + timeoutMillis() + " ms waiting for data from", e);
    } catch (EOFException e) {
      throw new LinkException(left, "connection closed by", e);
    } catch (IOException e) {
      throw new LinkException(left, "connection lost (" + e + ") while receiving from", e);
    }
  }

  private void awaitSent(long frames) throws IOException {
    if (sender.callerDriven()) {
      while (sender.sent() < frames) {
        if (!pumpSends()) {
          waitForLinks(false);
        }
      }
      return;
    }
    if (!sender.awaitSent(frames, deadline)) {
      throw new LinkException(
          right,
          "timed out after " + timeoutMillis() + " ms sending (" + (sender.queued() - sender.sent())
              + " frames unsent; is it reading?) to",
          null);
    }
    Throwable f = sender.failure();
    if (f != null) {
      throw senderFailure(f);
    }
  }

  private LinkException senderFailure(Throwable f) {
    if (f instanceof SocketTimeoutException) {
      return new LinkException(right, "timed out after " + timeoutMillis() + " ms sending (the peer is not reading) to", f);
    }
    if (f instanceof IOException) {
      return new LinkException(right, "connection lost (" + f + ") while sending to", f);
    }
    return new LinkException(right, "internal error (" + f + ") while sending to", f);
  }

  private long timeoutMillis() {
    return operationTimeoutNanos / 1_000_000;
  }

  /** A failure tied to one link; the message reads "... rank R at host:port". */
  static class LinkException extends IOException {
    private static final long serialVersionUID = 1L;
    final transient Link link;

    LinkException(Link link, String what, Throwable cause) {
      super(what + " rank " + link.peerRank + " at " + link.peerAddress, cause);
      this.link = link;
    }

    LinkException(String message, Link link, Throwable cause) {
      super(message, cause);
      this.link = link;
    }
  }

  /** A malformed or unexpected frame. */
  static final class ProtocolException extends LinkException {
    private static final long serialVersionUID = 1L;

    ProtocolException(Link link, String what) {
      super(
          "protocol error from rank " + link.peerRank + " at " + link.peerAddress + ": " + what,
          link,
          null);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // lifecycle and failures

  private void begin(String name, ElementType type, ReduceOp op, long count) {
    if (!busy.compareAndSet(false, true)) {
      throw new IllegalStateException(
          "rank " + rank + ": " + name + " called while " + opName + " is running: a Communicator"
              + " runs one operation at a time");
    }
    CollectiveException f = failure;
    if (f != null) {
      busy.set(false);
      throw new CollectiveException(
          "rank " + rank + " of " + size + ": " + name + " on a communicator broken by an earlier"
              + " failure: " + f.getMessage(),
          rank, f.peerRank(), f.peerAddress(), name, f);
    }
    if (closed) {
      busy.set(false);
      throw new IllegalStateException("rank " + rank + ": " + name + " on a closed communicator");
    }
    opName = name;
    opIndex++;
    opType = type;
    opReduce = op;
    opCount = count;
    deadline = System.nanoTime() + operationTimeoutNanos;
    if (sender != null) {
      sender.setDeadline(deadline);
      chooseWriter(0);
    }
  }

  private void end() {
    busy.set(false);
  }

  /** Picks who writes the next frames (see {@link #CALLER_DRIVEN_MAX_BYTES}); only while idle. */
  private void chooseWriter(long bytes) {
    sender.setCallerDriven(duplex != null && bytes <= CALLER_DRIVEN_MAX_BYTES);
  }

  private String describeOperation() {
    StringBuilder sb = new StringBuilder().append(opName).append(" #").append(opIndex).append(" (");
    if (opType != null) {
      sb.append(opType).append(' ');
    }
    if (opReduce != null) {
      sb.append(opReduce).append(", ");
    }
    sb.append(opCount).append(opType != null ? " elements)" : " bytes)");
    return sb.toString();
  }

  /** Turns any failure inside an operation into the exception the caller sees, and breaks the ring. */
  private RuntimeException fail(Exception e) {
    if (e instanceof IllegalArgumentException || e instanceof NullPointerException
        || e instanceof IndexOutOfBoundsException) {
      return (RuntimeException) e; // bad arguments: nothing was sent, the ring is intact
    }
    if (e instanceof CollectiveException) {
      return (CollectiveException) e;
    }
    Throwable senderFailure = sender == null ? null : sender.failure();
    Link peer = null;
    String detail;
    Throwable cause = e;
    if (closed && failure == null) {
      detail = "the communicator was closed during the operation";
    } else if (senderFailure != null && !(e instanceof ProtocolException)) {
      LinkException se = senderFailure(senderFailure);
      peer = right;
      detail = se.getMessage();
      cause = se;
      se.addSuppressed(e);
    } else if (e instanceof LinkException) {
      peer = ((LinkException) e).link;
      detail = e.getMessage();
      if (sender != null && peer == left && sender.queued() > sender.sent()) {
        detail += "; meanwhile " + (sender.queued() - sender.sent()) + " frame(s) to rank "
            + right.peerRank + " at " + right.peerAddress + " were not accepted (is it reading?)";
      }
    } else {
      detail = e.toString();
    }
    CollectiveException ce =
        new CollectiveException(
            "rank " + rank + " of " + size + ", " + describeOperation() + ": " + detail,
            rank,
            peer == null ? -1 : peer.peerRank,
            peer == null ? null : peer.peerAddress,
            opName,
            cause);
    if (failure == null) {
      failure = ce;
    }
    LOG.log(System.Logger.Level.DEBUG, ce.getMessage(), ce);
    releaseResources();
    return ce;
  }

  private void onSenderFailure() {
    // Wake the caller's thread (blocked reading the left link) and tell the peers at once.
    left.abort();
    right.abort();
  }

  /**
   * Closes the sockets and stops the sender thread. Idempotent; safe from any thread. An operation
   * running concurrently fails with {@link CollectiveException}.
   */
  @Override
  public void close() {
    closed = true;
    releaseResources();
  }

  private void releaseResources() {
    synchronized (closeLock) {
      if (resourcesReleased) {
        return;
      }
      resourcesReleased = true;
    }
    if (duplex != null) {
      duplex.wakeup();
    }
    if (left != null) {
      left.abort();
    }
    if (right != null) {
      right.abort();
    }
    closeQuietly(duplex);
    if (sender != null) {
      try {
        if (!sender.stop(10_000)) {
          LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": the sender thread did not stop within 10 s");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": interrupted while stopping the sender thread");
      }
    }
  }

  /** True once {@link #close()} was called or an operation failed. */
  public boolean isClosed() {
    return closed || failure != null;
  }

  @Override
  public String toString() {
    return "Communicator[rank " + rank + " of " + size + (isClosed() ? ", closed" : "") + "]";
  }

  /**
   * Connections this rank's listener dropped while forming the ring: callers that did not prove
   * the job secret, including those still silent when the ring formed (the first 10 logged with
   * their remote address and why, the rest counted in one line).
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
    return busy.get();
  }

  long framesReceived() {
    return framesReceived;
  }

  /** The sender thread (null with one rank), for tests. */
  Thread senderThread() {
    return sender == null ? null : sender.thread();
  }

  /**
   * How many times this rank's threads have blocked in a selector (plain and shared-memory links), for tests: the JDK's
   * epoll selector boxes the descriptor of every ready key, 16 bytes each once descriptors exceed 127,
   * so that much allocation per wait is the JDK's, not this package's.
   */
  long selectorWaits() {
    long waits = duplexWaits;
    for (Link l : new Link[] {left, right}) {
      if (l instanceof ChannelLink) {
        waits += ((ChannelLink) l).readWaits + ((ChannelLink) l).writeWaits;
      } else if (l instanceof ShmLink) {
        waits += ((ShmLink) l).readSleeps + ((ShmLink) l).writeSleeps;
      }
    }
    return waits;
  }

  // ---------------------------------------------------------------------------------------------
  // buffers

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

  private void ensureWork(long bytes) {
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalArgumentException(
          "Invalid length: " + bytes + " bytes exceeds one operation's limit of 2 GB; split it (see FusionBuffer)");
    }
    if (work == null || work.capacity() < bytes) {
      work = ByteBuffer.allocateDirect((int) Math.max(bytes, 64)).order(ByteOrder.LITTLE_ENDIAN);
      workSend = work.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      workRecv = work.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      workFloats = work.asFloatBuffer();
      workDoubles = work.asDoubleBuffer();
      workLongs = work.asLongBuffer();
    }
  }

  private void ensureGather(long bytes) {
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalArgumentException("Invalid length: gather buffer of " + bytes + " bytes");
    }
    if (gather == null || gather.capacity() < bytes) {
      gather = ByteBuffer.allocateDirect((int) Math.max(bytes, 64)).order(ByteOrder.LITTLE_ENDIAN);
      gatherSend = gather.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      gatherRecv = gather.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }
  }

  static String threadName(int rank, String role) {
    return THREAD_NAME_PREFIX + "r" + rank + "-" + role;
  }

  // ---------------------------------------------------------------------------------------------
  // builder and connection setup

  /**
   * Builds a {@link Communicator}: {@code setX} for required values, {@code optX} for optional ones,
   * validated in {@link #build()}, which connects the ring.
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
    private java.nio.file.Path sharedMemoryDirectory = DEFAULT_SHARED_MEMORY_DIRECTORY;
    private int sharedMemoryBytes = DEFAULT_SHARED_MEMORY_BYTES;
    private java.util.function.UnaryOperator<java.nio.file.Path> sharedMemoryServerView = p -> p;
    private ShmNegotiation.Settings shm;

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
     * {@link #optSharedMemoryDirectory}) instead of the TCP socket, which then only carries wake-ups.
     * Used for a link when both ends allow it, the peer's address is on this host, neither end uses
     * TLS, and the peer can open the file this rank created; otherwise the link stays on TCP. Default
     * true.
     */
    public Builder optSharedMemory(boolean sharedMemory) {
      this.sharedMemory = sharedMemory;
      return this;
    }

    /** Where shared-memory files are created (a tmpfs). Default {@code /dev/shm}. */
    public Builder optSharedMemoryDirectory(java.nio.file.Path directory) {
      this.sharedMemoryDirectory = directory;
      return this;
    }

    /** Bytes of the shared-memory ring towards the right neighbour: a power of two. Default 4 MiB. */
    public Builder optSharedMemoryBytes(int ringBytes) {
      this.sharedMemoryBytes = ringBytes;
      return this;
    }

    /** Test hook: maps the path a peer offers to the path this rank opens (another host's view). */
    Builder sharedMemoryServerView(java.util.function.UnaryOperator<java.nio.file.Path> view) {
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
      validate();
      int size = peers.size();
      if (size == 1) {
        if (listener != null) {
          listener.close();
        }
        return new Communicator(this, null, null, 0);
      }
      return connect();
    }

    private void validate() {
      if (peers == null || peers.isEmpty()) {
        throw new IllegalArgumentException("Invalid peers: setPeers with every rank's host:port is required");
      }
      for (String p : peers) {
        PeerAddress.parse(p);
      }
      if (rank < 0 || rank >= peers.size()) {
        throw new IllegalArgumentException(
            "Invalid rank " + rank + ": expected 0.." + (peers.size() - 1) + " (" + peers.size() + " peers)");
      }
      Objects.requireNonNull(secret, "secret: setSecret is required");
      if (peers.size() > 1) {
        if (listener == null) {
          throw new IllegalArgumentException("Invalid listener: setListener is required with more than one rank");
        }
        if (!listener.isOpen()) {
          throw new IllegalArgumentException("Invalid listener " + listener + ": it is closed");
        }
        if (!listener.address().equals(peers.get(rank))) {
          throw new IllegalArgumentException(
              "Invalid peers: peers[" + rank + "] is '" + peers.get(rank) + "' but this rank's listener is at '"
                  + listener.address() + "'");
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
      shm = new ShmNegotiation.Settings(sharedMemory, sharedMemoryDirectory, sharedMemoryBytes, sharedMemoryServerView);
    }

    private static void checkPositive(String name, Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("Invalid " + name + " " + d + ": expected a positive duration");
      }
    }

    private Communicator connect() {
      int size = peers.size();
      int leftRank = Math.floorMod(rank - 1, size);
      int rightRank = Math.floorMod(rank + 1, size);
      long deadline = System.nanoTime() + connectTimeout.toNanos();
      if (shm.enabled) {
        ShmNegotiation.sweepStale(shm.directory);
      }
      Acceptor acceptor = new Acceptor(this, leftRank, deadline);
      Thread acceptThread = new Thread(acceptor, threadName(rank, "accept"));
      acceptThread.setDaemon(true);
      acceptThread.start();
      Link right = null;
      boolean formed = false;
      try {
        right = connectRight(rightRank, deadline);
        acceptThread.join(Link.millisLeft(deadline) + 1000);
        if (acceptThread.isAlive()) {
          throw new CollectiveException(
              "rank " + rank + " of " + size + ": no authenticated connection from rank " + leftRank
                  + " at " + peers.get(leftRank) + " within " + connectTimeout.toMillis() + " ms",
              rank, leftRank, peers.get(leftRank), "connect", null);
        }
        if (acceptor.error != null) {
          throw acceptor.error;
        }
        Communicator c = new Communicator(this, acceptor.link, right, acceptor.rejected());
        formed = true;
        return c;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CollectiveException(
            "rank " + rank + " of " + size + ": interrupted while forming the ring",
            rank, -1, null, "connect", e);
      } finally {
        listener.close(); // no one else may connect later
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

    private Link connectRight(int rightRank, long deadline) throws InterruptedException {
      String address = peers.get(rightRank);
      InetSocketAddress unresolved = PeerAddress.parse(address);
      long backoffMillis = 10;
      IOException last = null;
      int attempts = 0;
      while (true) {
        long ms = Link.millisLeft(deadline);
        if (ms == 0) {
          throw new CollectiveException(
              "rank " + rank + " of " + peers.size() + ": cannot connect to rank " + rightRank + " at "
                  + address + " within " + connectTimeout.toMillis() + " ms (" + attempts + " attempts"
                  + (last == null ? "" : ", last: " + last) + ")",
              rank, rightRank, address, "connect", last);
        }
        SocketChannel ch = null;
        try {
          attempts++;
          InetSocketAddress target = new InetSocketAddress(unresolved.getHostString(), unresolved.getPort());
          ch = SocketChannel.open();
          ch.socket().connect(target, (int) Math.min(Integer.MAX_VALUE, ms));
        } catch (ConnectException | NoRouteToHostException | SocketTimeoutException e) {
          closeQuietly(ch);
          last = e;
          long sleep = Math.min(backoffMillis, Link.millisLeft(deadline));
          if (sleep > 0) {
            Thread.sleep(sleep);
          }
          backoffMillis = Math.min(backoffMillis * 2, 1000);
          continue;
        } catch (IOException | RuntimeException e) {
          closeQuietly(ch);
          throw new CollectiveException(
              "rank " + rank + " of " + peers.size() + ": cannot connect to rank " + rightRank + " at "
                  + address + ": " + e,
              rank, rightRank, address, "connect", e);
        }
        Link link = null;
        try {
          link = openLink(ch, true, rightRank, address, deadline);
          Handshake.client(link, secret, rank, rightRank, peers.size(), deadline);
          link = ShmNegotiation.client(link, shm, secret.jobId(), rank, peers.size(), deadline);
          return link;
        } catch (IOException | RuntimeException e) {
          if (link != null) {
            link.abort();
          } else {
            closeQuietly(ch);
          }
          String why =
              e instanceof EOFException
                  ? "it closed the connection during authentication (wrong job secret, TLS mismatch,"
                      + " or a different peers list?)"
                  : e.getMessage();
          throw new CollectiveException(
              "rank " + rank + " of " + peers.size() + ": authentication with rank " + rightRank + " at "
                  + address + " failed: " + why,
              rank, rightRank, address, "connect", e);
        }
      }
    }

    Link openLink(SocketChannel ch, boolean client, int peerRank, String address, long deadline)
        throws IOException {
      ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
      if (sslContext != null) {
        return TlsLink.open(ch, sslContext, client, tlsNeedClientAuth, peerRank, address, deadline);
      }
      return new ChannelLink(ch, peerRank, address);
    }

    /**
     * Accepts connections until the left neighbour authenticates; drops and logs everyone else.
     *
     * <p>One selector thread accepts and holds each new connection until its first bytes arrive: a
     * caller that sends nothing within {@link #PRE_AUTH_TIMEOUT} is dropped there, having cost no
     * thread. Callers that spoke are authenticated concurrently by at most {@link
     * #HANDSHAKE_THREADS} threads; each must complete its HELLO within {@link #PRE_AUTH_TIMEOUT} of
     * its link being up (after the TLS handshake with TLS), and the rest of the handshake within the
     * handshake timeout. At most {@link #MAX_UNAUTHENTICATED} callers are held at once; beyond that
     * the longest-waiting silent one is dropped. So strangers queued ahead of the neighbour, idle or
     * half-spoken, delay it by about a second, not by a handshake timeout each.
     */
    private static final class Acceptor implements Runnable {
      private final Builder b;
      private final int leftRank;
      private final String leftAddress;
      private final String prefix;
      private final long deadline;
      private final long preAuthNanos;
      volatile Link link;
      volatile CollectiveException error;
      private final java.util.concurrent.atomic.AtomicInteger rejected =
          new java.util.concurrent.atomic.AtomicInteger();
      /** Connections being authenticated, queued or running (closed when the acceptor ends). */
      private final java.util.Set<SocketChannel> authenticating =
          java.util.concurrent.ConcurrentHashMap.newKeySet();
      /** Connections that have not sent anything yet, oldest first; the selector thread's only. */
      private final java.util.ArrayDeque<Silent> silent = new java.util.ArrayDeque<>();
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

      Acceptor(Builder b, int leftRank, long deadline) {
        this.b = b;
        this.leftRank = leftRank;
        this.leftAddress = b.peers.get(leftRank);
        this.prefix = "rank " + b.rank + " of " + b.peers.size() + ": ";
        this.deadline = deadline;
        this.preAuthNanos = Math.min(PRE_AUTH_TIMEOUT.toNanos(), b.handshakeTimeout.toNanos());
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
        java.nio.channels.ServerSocketChannel server = b.listener.channel();
        java.util.concurrent.ThreadPoolExecutor pool = null;
        try (Selector sel = Selector.open()) {
          selector = sel;
          server.configureBlocking(false);
          server.register(sel, SelectionKey.OP_ACCEPT);
          pool =
              new java.util.concurrent.ThreadPoolExecutor(
                  HANDSHAKE_THREADS, HANDSHAKE_THREADS, 1, java.util.concurrent.TimeUnit.SECONDS,
                  new java.util.concurrent.LinkedBlockingQueue<>(),
                  task -> {
                    Thread t = new Thread(task, threadName(b.rank, "handshake"));
                    t.setDaemon(true);
                    return t;
                  });
          pool.allowCoreThreadTimeOut(true);
          List<Silent> spoke = new ArrayList<>();
          while (link == null) {
            if (isStopped() || !server.isOpen()) {
              error =
                  new CollectiveException(
                      prefix + "stopped waiting for rank " + leftRank + " at " + leftAddress + ": listener closed",
                      b.rank, leftRank, leftAddress, "connect", null);
              return;
            }
            long now = System.nanoTime();
            if (now - deadline >= 0) {
              error =
                  new CollectiveException(
                      prefix + "no authenticated connection from rank " + leftRank + " at " + leftAddress
                          + " within " + b.connectTimeout.toMillis() + " ms (" + rejected.get()
                          + " other connection(s) rejected)",
                      b.rank, leftRank, leftAddress, "connect", null);
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
            for (Silent c : spoke) {
              authenticating.add(c.ch);
              pool.execute(() -> authenticate(c.ch, c.remote));
            }
            spoke.clear();
          }
        } catch (ClosedChannelException e) {
          error =
              new CollectiveException(
                  prefix + "stopped waiting for rank " + leftRank + " at " + leftAddress + ": listener closed",
                  b.rank, leftRank, leftAddress, "connect", e);
        } catch (IOException | RuntimeException e) {
          error =
              new CollectiveException(
                  prefix + "accepting rank " + leftRank + " failed: " + e,
                  b.rank, leftRank, leftAddress, "connect", e);
        } finally {
          stop();
          String why = link != null ? "the ring formed without it" : "the listener stopped";
          for (Silent c : silent) {
            drop(c.ch, c.remote, why + " (it had sent nothing)");
          }
          silent.clear();
          if (pool != null) {
            pool.shutdownNow();
            for (SocketChannel ch : authenticating) {
              closeQuietly(ch); // ends handshakes still running
            }
            try {
              if (!pool.awaitTermination(10, java.util.concurrent.TimeUnit.SECONDS)) {
                LOG.log(System.Logger.Level.WARNING, prefix + "handshake threads did not end within 10 s");
              }
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
          int suppressed = rejected.get() - MAX_LOGGED_REJECTIONS;
          if (suppressed > 0) {
            LOG.log(
                System.Logger.Level.WARNING,
                prefix + "dropped " + suppressed + " more unauthenticated connection(s) while waiting for rank "
                    + leftRank + " (not logged one by one)");
          }
        }
      }

      /**
       * Handles the selected keys: accepts new connections, and moves those that spoke from the
       * selector to {@code spoke}. True if it cancelled keys (the caller deregisters them).
       */
      private boolean collect(Selector sel, java.nio.channels.ServerSocketChannel server, List<Silent> spoke)
          throws IOException {
        boolean cancelled = false;
        boolean accept = false;
        for (java.util.Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext(); ) {
          SelectionKey k = it.next();
          it.remove();
          if (!k.isValid()) {
            continue;
          }
          if (k.isAcceptable()) {
            accept = true;
          } else if (k.isReadable()) {
            Silent c = (Silent) k.attachment();
            k.cancel();
            cancelled = true;
            silent.remove(c);
            spoke.add(c);
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
                drop(oldest.ch, oldest.remote, "more than " + MAX_UNAUTHENTICATED
                    + " unauthenticated connections at once (it was the longest silent)");
              } else {
                drop(ch, remote, "more than " + MAX_UNAUTHENTICATED + " unauthenticated connections at once");
                continue;
              }
            }
            try {
              ch.configureBlocking(false);
              Silent c = new Silent(ch, remote, System.nanoTime() + preAuthNanos);
              c.key = ch.register(sel, SelectionKey.OP_READ, c);
              silent.addLast(c);
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
          long handshakeDeadline = Math.min(deadline, System.nanoTime() + b.handshakeTimeout.toNanos());
          candidate = b.openLink(ch, false, leftRank, leftAddress, handshakeDeadline);
          long helloDeadline = System.nanoTime() + preAuthNanos;
          Handshake.server(candidate, b.secret, b.rank, leftRank, b.peers.size(), helloDeadline, handshakeDeadline);
          candidate = ShmNegotiation.server(candidate, b.shm, b.secret.jobId(), b.rank, handshakeDeadline);
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
          closeQuietly(ch);
        }
        if (rejected.incrementAndGet() <= MAX_LOGGED_REJECTIONS) {
          LOG.log(
              System.Logger.Level.WARNING,
              prefix + "dropped an unauthenticated connection from " + remote + " while waiting for rank "
                  + leftRank + ": " + why);
        }
      }
    }
  }

  private static void closeQuietly(java.io.Closeable ch) {
    if (ch != null) {
      try {
        ch.close();
      } catch (IOException ignored) {
        // nothing more to release
      }
    }
  }
}
