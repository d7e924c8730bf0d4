package dev.sparktrainer.data;

import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The read buffers of TFRecord readers whose records are decoded later, by the batch stage,
 * straight from where they were read: a reader hands its buffer over when it moves on ({@link
 * dev.sparktrainer.tfrecord.codec.TFRecordReader#setBufferHandoff}), and the buffer comes back here
 * once every record handed out of it is decoded. Buffers of the standard size are pooled (at most
 * {@code capacity}), so the steady state allocates nothing.
 */
final class ReadBuffers {
  /**
   * The pooled buffer size. Small enough that the pool's buffers stay in the cores' caches between
   * uses (a reader reads into a buffer a batch thread has just finished decoding from); larger
   * records get buffers of their own.
   */
  static final int SIZE = 256 << 10;

  private final int capacity;

  /** A stack: the buffer freed last, still in cache, is reused first. */
  private final ConcurrentLinkedDeque<byte[]> free = new ConcurrentLinkedDeque<>();

  private final AtomicInteger pooled = new AtomicInteger();

  ReadBuffers(int capacity) {
    this.capacity = capacity;
  }

  byte[] take(int minLength) {
    if (minLength <= SIZE) {
      byte[] b = free.pollFirst();
      if (b != null) {
        pooled.decrementAndGet();
        return b;
      }
      return new byte[SIZE];
    }
    return new byte[minLength];
  }

  private void give(byte[] b) {
    if (b.length == SIZE && pooled.incrementAndGet() <= capacity) {
      free.offerFirst(b);
    } else if (b.length == SIZE) {
      pooled.decrementAndGet();
    }
  }

  /**
   * One buffer with records handed out of it. The reader counts its records privately and reports
   * the total once, when it leaves the buffer ({@link #readerDone}); decodes report themselves, a
   * run of records at a time ({@link #decoded}). The count reaches zero exactly once, after both,
   * whichever comes last: then the buffer goes back to the pool.
   */
  final class Handed {
    final byte[] buf;
    final String file;
    private final AtomicInteger outstanding = new AtomicInteger();

    Handed(byte[] buf, String file) {
      this.buf = buf;
      this.file = file;
    }

    void readerDone(int handedOut) {
      if (outstanding.addAndGet(handedOut) == 0) {
        give(buf);
      }
    }

    /** {@code records} of this buffer's records are decoded (or dropped). */
    void decoded(int records) {
      if (outstanding.addAndGet(-records) == 0) {
        give(buf);
      }
    }
  }

  /**
   * Counts the records a batch decoded per buffer and releases them once, at the end: records of
   * interleaved readers alternate between buffers, and one atomic update per record on counters the
   * batch threads and readers share costs more than the decode itself.
   */
  static final class Tally {
    private final Handed[] buffers = new Handed[16];
    private final int[] counts = new int[16];
    private int size;

    void add(Handed h) {
      for (int i = size - 1; i >= 0; i--) {
        if (buffers[i] == h) {
          counts[i]++;
          return;
        }
      }
      if (size == buffers.length) {
        release();
      }
      buffers[size] = h;
      counts[size++] = 1;
    }

    /** Reports every counted record as decoded. */
    void release() {
      for (int i = 0; i < size; i++) {
        buffers[i].decoded(counts[i]);
        buffers[i] = null;
      }
      size = 0;
    }
  }
}
