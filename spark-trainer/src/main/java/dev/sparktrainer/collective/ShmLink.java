package dev.sparktrainer.collective;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.lang.reflect.Field;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.FileChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.EnumSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * A link to a neighbour on the same host through a memory-mapped file (in {@code /dev/shm}): two
 * single-producer single-consumer byte rings, one per direction, with the authenticated TCP
 * connection kept open beside them for two things only: one-byte wake-ups ("doorbells") for a side
 * that went to sleep waiting, and noticing that the peer died (its end of the socket closes).
 *
 * <p>Why this file is long: it is one shared-memory protocol whose correctness is argued across its
 * parts: the file layout (header offsets, capacities, nonce), the single-producer single-consumer
 * rings with their sequentially consistent index and waiting-flag accesses, the poll, yield and
 * sleep loop with its doorbells over the TCP socket (no wake-up may be lost), and the lease that
 * unmaps the file only after the last reader or writer has left. Split into files, the
 * memory-ordering argument would be too.
 *
 * <p>File layout: a 4 KiB header (magic, the two ring capacities, the creator's 16-byte nonce, and
 * per ring four longs on cache lines of their own: {@code head} = bytes written, {@code tail} =
 * bytes read, reader waiting, writer waiting), then ring 0's data (creator to acceptor), then ring
 * 1's (acceptor to creator). Capacities are powers of two.
 *
 * <p>Waiting: a few polls, then {@link Thread#yield()} for {@link #YIELD_NANOS}, then the waiting
 * side raises its flag and blocks in a selector on the TCP socket; the other side, after moving
 * {@code head} or {@code tail}, rings the doorbell if it sees the flag (both sides use sequentially
 * consistent accesses for the index and the flag, so one of them always sees the other's write). A
 * dead peer's socket becomes readable at end of stream, which wakes the sleeper too. No PAUSE spin
 * loops (see Sender's SPINS).
 */
final class ShmLink extends Link {
  /** "STRCSHM1". */
  static final long MAGIC = 0x535452435348_4d31L;

  static final int NONCE_BYTES = 16;
  static final int HEADER_BYTES = 4096;
  static final int MIN_CAPACITY = 4096;
  static final int MAX_CAPACITY = 1 << 30;

  /** The ring nobody but tests uses (the ring only sends to the right): kept small. */
  static final int REVERSE_CAPACITY = 64 * 1024;

  private static final int OFF_MAGIC = 0;
  private static final int OFF_CAPACITY0 = 8;
  private static final int OFF_CAPACITY1 = 16;
  private static final int OFF_NONCE = 24;
  private static final int OFF_RING0 = 256;
  private static final int OFF_RING1 = 512;
  private static final int LINE = 64;

  /** Polls before yielding. */
  static final int POLLS = 16;

  /** How long to yield before sleeping: about a context switch or two on a busy machine. */
  static final long YIELD_NANOS = 60_000;

  /** A sleeper re-checks its ring at least this often even without a doorbell. */
  static final long MAX_SLEEP_MILLIS = 5;

  private static final VarHandle LONGS =
      MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final Consumer<SelectionKey> IGNORE = key -> {};

  private final ChannelLink tcp;
  private final SocketChannel ch;
  private final MappedByteBuffer mapping;
  private final Ring in;
  private final Ring out;
  private final Selector readSelector;
  private final Selector writeSelector;
  private final ByteBuffer readProbe = ByteBuffer.allocateDirect(64);
  private final ByteBuffer writeProbe = ByteBuffer.allocateDirect(64);
  private final ByteBuffer readBell = ByteBuffer.allocateDirect(1);
  private final ByteBuffer writeBell = ByteBuffer.allocateDirect(1);
  private final String description;
  private volatile boolean aborted;

  /**
   * Threads inside readFully/writeFully (2 each) plus bit 0 once aborted: the mapping is unmapped
   * when both hold, so no copy can touch an unmapped page.
   */
  private final AtomicLong lease = new AtomicLong();

  private final AtomicBoolean unmapped = new AtomicBoolean();

  /** Times a side went to sleep in its selector (each counted by its one thread); for tests. */
  long readSleeps;

  long writeSleeps;

  private ShmLink(ChannelLink tcp, MappedByteBuffer mapping, boolean creator, String description)
      throws IOException {
    super(tcp.peerRank, tcp.peerAddress);
    this.tcp = tcp;
    this.ch = tcp.channel();
    this.mapping = mapping;
    this.description = description;
    int c0 = (int) mapping.getLong(OFF_CAPACITY0);
    int c1 = (int) mapping.getLong(OFF_CAPACITY1);
    Ring r0 = new Ring(mapping, OFF_RING0, HEADER_BYTES, c0);
    Ring r1 = new Ring(mapping, OFF_RING1, HEADER_BYTES + c0, c1);
    this.out = creator ? r0 : r1;
    this.in = creator ? r1 : r0;
    Selector r = null;
    Selector w = null;
    try {
      r = Selector.open();
      w = Selector.open();
      ch.register(r, SelectionKey.OP_READ);
      ch.register(w, SelectionKey.OP_READ);
    } catch (IOException | RuntimeException e) {
      closeQuietly(r);
      closeQuietly(w);
      throw e;
    }
    this.readSelector = r;
    this.writeSelector = w;
  }

  // ---------------------------------------------------------------------------------------------
  // the shared file

  /** A created, mapped and initialised file, before the peer agreed to use it. */
  static final class Segment {
    final Path path;
    final MappedByteBuffer mapping;
    final byte[] nonce;

    private Segment(Path path, MappedByteBuffer mapping, byte[] nonce) {
      this.path = path;
      this.mapping = mapping;
      this.nonce = nonce;
    }
  }

  static long fileBytes(int capacity0, int capacity1) {
    return (long) HEADER_BYTES + capacity0 + capacity1;
  }

  /**
   * Creates {@code file} (owner read/write only, must not exist), allocates every page of it (so
   * that a full tmpfs fails here with an IOException, not later with SIGBUS on a mapped page), maps
   * it and writes the header with a fresh nonce. Deletes the file on failure.
   */
  static Segment create(Path file, int capacity0, int capacity1) throws IOException {
    checkCapacity(capacity0);
    checkCapacity(capacity1);
    long size = fileBytes(capacity0, capacity1);
    boolean done = false;
    try (FileChannel fc =
        FileChannel.open(
            file,
            EnumSet.of(
                StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE),
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
      ByteBuffer zeros = ByteBuffer.allocateDirect(256 * 1024);
      for (long at = 0; at < size; ) {
        zeros.clear().limit((int) Math.min(zeros.capacity(), size - at));
        at += fc.write(zeros, at);
      }
      MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, 0, size);
      m.order(ByteOrder.nativeOrder());
      byte[] nonce = new byte[NONCE_BYTES];
      RANDOM.nextBytes(nonce);
      m.putLong(OFF_CAPACITY0, capacity0);
      m.putLong(OFF_CAPACITY1, capacity1);
      m.put(OFF_NONCE, nonce);
      m.putLong(OFF_MAGIC, MAGIC);
      done = true;
      return new Segment(file, m, nonce);
    } finally {
      if (!done) {
        Files.deleteIfExists(file);
      }
    }
  }

  /**
   * Opens and maps a file the peer created, checking that it is the file the peer means: a regular
   * file (not a link), the right size for its header, and holding {@code nonce}.
   */
  static MappedByteBuffer open(Path file, byte[] nonce) throws IOException {
    if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
      throw new IOException("no such regular file: " + file);
    }
    try (FileChannel fc =
        FileChannel.open(
            file, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
      long size = fc.size();
      if (size < HEADER_BYTES) {
        throw new IOException(file + " is too small (" + size + " bytes) to be a ring segment");
      }
      ByteBuffer header = ByteBuffer.allocate(HEADER_BYTES).order(ByteOrder.nativeOrder());
      while (header.hasRemaining() && fc.read(header, header.position()) > 0) {
        // reads the header
      }
      byte[] found = new byte[NONCE_BYTES];
      header.get(OFF_NONCE, found);
      if (header.getLong(OFF_MAGIC) != MAGIC || !MessageDigest.isEqual(found, nonce)) {
        throw new IOException(file + " is not the peer's ring segment (magic or nonce differ)");
      }
      long c0 = header.getLong(OFF_CAPACITY0);
      long c1 = header.getLong(OFF_CAPACITY1);
      if (!validCapacity(c0) || !validCapacity(c1) || size != fileBytes((int) c0, (int) c1)) {
        throw new IOException(
            file + ": inconsistent ring capacities " + c0 + "/" + c1 + " for " + size + " bytes");
      }
      MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, 0, size);
      m.order(ByteOrder.nativeOrder());
      return m;
    }
  }

  /** The creator's end, once the peer said yes. */
  static ShmLink creator(ChannelLink tcp, Segment segment, String description) throws IOException {
    return new ShmLink(tcp, segment.mapping, true, description);
  }

  /** The acceptor's end. */
  static ShmLink acceptor(ChannelLink tcp, MappedByteBuffer mapping, String description)
      throws IOException {
    return new ShmLink(tcp, mapping, false, description);
  }

  static void checkCapacity(int capacity) {
    if (!validCapacity(capacity)) {
      throw new IllegalArgumentException(
          "Invalid shared memory ring size "
              + capacity
              + ": expected a power of two in "
              + MIN_CAPACITY
              + ".."
              + MAX_CAPACITY);
    }
  }

  private static boolean validCapacity(long c) {
    return c >= MIN_CAPACITY && c <= MAX_CAPACITY && Long.bitCount(c) == 1;
  }

  // ---------------------------------------------------------------------------------------------
  // one direction

  /** One byte ring; its producer and its consumer are each one thread, in different processes. */
  private static final class Ring {
    private final ByteBuffer buf;
    private final int headOff;
    private final int tailOff;
    private final int readerWaitingOff;
    private final int writerWaitingOff;
    private final int base;
    private final int capacity;
    private final int mask;

    /** Producer side: bytes written (only the producer moves head); and the last tail it saw. */
    private long head;

    private long seenTail;

    /** Consumer side: bytes read; and the last head it saw. */
    private long tail;

    private long seenHead;

    Ring(MappedByteBuffer mapping, int control, int base, int capacity) {
      this.buf = mapping.duplicate().order(ByteOrder.nativeOrder());
      this.headOff = control;
      this.tailOff = control + LINE;
      this.readerWaitingOff = control + 2 * LINE;
      this.writerWaitingOff = control + 3 * LINE;
      this.base = base;
      this.capacity = capacity;
      this.mask = capacity - 1;
      this.head = (long) LONGS.getVolatile(buf, headOff);
      this.tail = (long) LONGS.getVolatile(buf, tailOff);
      this.seenTail = tail;
      this.seenHead = head;
    }

    /**
     * Producer: copies what fits of {@code a} then {@code b} (may be null); returns bytes copied.
     */
    int write(ByteBuffer a, ByteBuffer b) {
      long free = capacity - (head - seenTail);
      if (free == 0) {
        seenTail = (long) LONGS.getAcquire(buf, tailOff);
        free = capacity - (head - seenTail);
        if (free == 0) {
          return 0;
        }
      }
      int copied = copyIn(a, (int) free);
      if (b != null && copied < free) {
        copied += copyIn(b, (int) free - copied);
      }
      if (copied > 0) {
        // Volatile (not just release): the store must be ordered before the load of the reader's
        // waiting flag in wakeReader (store-load; the sleeper does the mirror image).
        LONGS.setVolatile(buf, headOff, head);
      }
      return copied;
    }

    private int copyIn(ByteBuffer src, int max) {
      int n = Math.min(max, src.remaining());
      if (n == 0) {
        return 0;
      }
      int idx = (int) (head & mask);
      int first = Math.min(n, capacity - idx);
      int p = src.position();
      buf.put(base + idx, src, p, first);
      if (n > first) {
        buf.put(base, src, p + first, n - first);
      }
      src.position(p + n);
      head += n;
      return n;
    }

    /** Consumer: copies what is available into {@code dst}; returns bytes copied. */
    int read(ByteBuffer dst) {
      long avail = seenHead - tail;
      if (avail == 0) {
        seenHead = (long) LONGS.getAcquire(buf, headOff);
        avail = seenHead - tail;
        if (avail == 0) {
          return 0;
        }
      }
      int n = (int) Math.min(avail, dst.remaining());
      if (n == 0) {
        return 0;
      }
      int idx = (int) (tail & mask);
      int first = Math.min(n, capacity - idx);
      int p = dst.position();
      dst.put(p, buf, base + idx, first);
      if (n > first) {
        dst.put(p + first, buf, base, n - first);
      }
      dst.position(p + n);
      tail += n;
      LONGS.setVolatile(buf, tailOff, tail);
      return n;
    }

    boolean readable() {
      return (long) LONGS.getVolatile(buf, headOff) != tail;
    }

    boolean writable() {
      return capacity - (head - (long) LONGS.getVolatile(buf, tailOff)) > 0;
    }

    boolean readerWaiting() {
      return (long) LONGS.getVolatile(buf, readerWaitingOff) != 0;
    }

    boolean writerWaiting() {
      return (long) LONGS.getVolatile(buf, writerWaitingOff) != 0;
    }

    void setWaiting(boolean reader, boolean waiting) {
      LONGS.setVolatile(buf, reader ? readerWaitingOff : writerWaitingOff, waiting ? 1L : 0L);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Link

  @Override
  void readFully(ByteBuffer dst, long deadlineNanos) throws IOException {
    enter();
    try {
      read(dst, deadlineNanos);
    } finally {
      exit();
    }
  }

  @Override
  void writeFully(ByteBuffer a, ByteBuffer b, long deadlineNanos) throws IOException {
    enter();
    try {
      write(a, b, deadlineNanos);
    } finally {
      exit();
    }
  }

  private void enter() throws IOException {
    if ((lease.addAndGet(2) & 1) != 0) {
      exit();
      throw new AsynchronousCloseException();
    }
  }

  private void exit() {
    if (lease.addAndGet(-2) == 1) {
      unmap(mapping, unmapped);
    }
  }

  private void read(ByteBuffer dst, long deadlineNanos) throws IOException {
    int polls = 0;
    long yieldingSince = 0;
    while (dst.hasRemaining()) {
      checkOpen();
      if (in.read(dst) > 0) {
        if (in.writerWaiting()) {
          ring(readBell);
        }
        polls = 0;
        yieldingSince = 0;
        continue;
      }
      if (polls < POLLS) {
        polls++;
        continue;
      }
      long now = System.nanoTime();
      if (now - deadlineNanos >= 0) {
        throw new SocketTimeoutException(
            "timed out waiting for data from rank "
                + peerRank
                + " at "
                + peerAddress
                + " (shared memory)");
      }
      if (yieldingSince == 0) {
        yieldingSince = now;
      }
      if (now - yieldingSince < YIELD_NANOS) {
        Thread.yield();
        continue;
      }
      sleep(true, deadlineNanos);
    }
  }

  private void write(ByteBuffer a, ByteBuffer b, long deadlineNanos) throws IOException {
    int polls = 0;
    long yieldingSince = 0;
    while (a.hasRemaining() || (b != null && b.hasRemaining())) {
      checkOpen();
      if (out.write(a, b) > 0) {
        if (out.readerWaiting()) {
          ring(writeBell);
        }
        polls = 0;
        yieldingSince = 0;
        continue;
      }
      if (polls < POLLS) {
        polls++;
        continue;
      }
      long now = System.nanoTime();
      if (now - deadlineNanos >= 0) {
        throw new SocketTimeoutException(
            "timed out sending to rank "
                + peerRank
                + " at "
                + peerAddress
                + " (shared memory): the peer is not reading");
      }
      if (yieldingSince == 0) {
        yieldingSince = now;
      }
      if (now - yieldingSince < YIELD_NANOS) {
        Thread.yield();
        continue;
      }
      sleep(false, deadlineNanos);
    }
  }

  /**
   * Raises this side's waiting flag, re-checks the ring, and blocks in the selector until a
   * doorbell, the peer's end of stream, {@link #abort()}, {@link #MAX_SLEEP_MILLIS} or the
   * deadline.
   */
  private void sleep(boolean reading, long deadlineNanos) throws IOException {
    Ring ring = reading ? in : out;
    Selector selector = reading ? readSelector : writeSelector;
    ByteBuffer probe = reading ? readProbe : writeProbe;
    ring.setWaiting(reading, true);
    try {
      if (reading ? ring.readable() : ring.writable()) {
        return;
      }
      long ms = Math.min(millisLeft(deadlineNanos), MAX_SLEEP_MILLIS);
      if (ms == 0) {
        return; // the caller reports the timeout
      }
      if (reading) {
        readSleeps++;
      } else {
        writeSleeps++;
      }
      selector.select(IGNORE, ms);
      checkOpen();
      drain(probe);
    } catch (ClosedSelectorException e) {
      throw closed(e);
    } finally {
      ring.setWaiting(reading, false);
    }
  }

  /** Reads doorbells off the socket; end of stream means the peer is gone. */
  private void drain(ByteBuffer probe) throws IOException {
    while (true) {
      probe.clear();
      int n;
      try {
        n = ch.read(probe);
      } catch (IOException e) {
        checkOpen();
        throw e;
      }
      if (n < 0) {
        throw new EOFException(
            "connection closed by the peer (rank "
                + peerRank
                + " at "
                + peerAddress
                + ", shared memory)");
      }
      if (n < probe.capacity()) {
        return;
      }
    }
  }

  private void ring(ByteBuffer bell) throws IOException {
    bell.clear();
    try {
      ch.write(bell); // non-blocking: 0 means doorbells are already queued, which is as good
    } catch (IOException e) {
      checkOpen();
      throw e;
    }
  }

  private void checkOpen() throws IOException {
    if (aborted) {
      throw new AsynchronousCloseException();
    }
  }

  private static IOException closed(Exception cause) {
    IOException e = new AsynchronousCloseException();
    e.initCause(cause);
    return e;
  }

  /** The TCP connection kept beside the mapping (doorbells and peer liveness). */
  @Override
  LinkTransport transport() {
    return LinkTransport.SHARED_MEMORY;
  }

  @Override
  SocketChannel channel() {
    return ch;
  }

  /** For logs: the file it was made from and the ring sizes. */
  String description() {
    return description;
  }

  @Override
  void abort() {
    aborted = true;
    readSelector.wakeup();
    writeSelector.wakeup();
    tcp.abort();
    closeQuietly(readSelector);
    closeQuietly(writeSelector);
    // Unmapped now if no thread is inside a read or write, else by the last one to leave. The
    // file's
    // name is already gone: with both ends unmapped, its memory is freed.
    if (lease.getAndUpdate(v -> v | 1) == 0) {
      unmap(mapping, unmapped);
    }
  }

  private static final MethodHandle INVOKE_CLEANER = findCleaner();

  private static MethodHandle findCleaner() {
    try {
      Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
      Field f = unsafeClass.getDeclaredField("theUnsafe");
      f.setAccessible(true);
      return MethodHandles.lookup()
          .findVirtual(
              unsafeClass, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
          .bindTo(f.get(null));
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null; // left to the garbage collector
    }
  }

  /**
   * Unmaps {@code mapping} now (once), rather than whenever the garbage collector gets to it: tmpfs
   * memory is freed only when every mapping of the deleted file is gone. The caller guarantees that
   * no thread touches it any more.
   */
  static void unmap(MappedByteBuffer mapping, AtomicBoolean once) {
    if (INVOKE_CLEANER == null || !once.compareAndSet(false, true)) {
      return;
    }
    try {
      INVOKE_CLEANER.invokeExact((ByteBuffer) mapping);
    } catch (Throwable e) {
      // left to the garbage collector
    }
  }

  /** Unmaps a mapping no link was made of (the negotiation's failure paths). */
  static void unmap(MappedByteBuffer mapping) {
    unmap(mapping, new AtomicBoolean());
  }

  /**
   * Whether this link's mapping is gone (after {@link #abort()} and its last reader or writer); for
   * tests.
   */
  boolean unmapped() {
    return unmapped.get();
  }

  private static void closeQuietly(Closeable c) {
    if (c != null) {
      try {
        c.close();
      } catch (IOException ignored) {
        // nothing more to release
      }
    }
  }

  @Override
  public String toString() {
    return "ShmLink[rank " + peerRank + " at " + peerAddress + ", " + description + "]";
  }
}
