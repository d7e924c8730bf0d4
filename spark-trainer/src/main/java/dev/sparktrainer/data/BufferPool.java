package dev.sparktrainer.data;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Recycles direct buffers of one size (batch columns; the device package's uint8 image columns), so
 * the steady state allocates no native memory. Thread-safe.
 */
public final class BufferPool {
  private final int bytes;
  private final int capacity;
  private final ConcurrentLinkedQueue<ByteBuffer> free = new ConcurrentLinkedQueue<>();
  private final AtomicInteger pooled = new AtomicInteger();

  /** A pool of buffers of {@code bytes} bytes, keeping at most {@code capacity} free ones. */
  public BufferPool(int bytes, int capacity) {
    this.bytes = bytes;
    this.capacity = capacity;
  }

  /** A free buffer (cleared), or a new one; native order. */
  public ByteBuffer take() {
    ByteBuffer b = free.poll();
    if (b == null) {
      return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
    }
    pooled.decrementAndGet();
    b.clear();
    return b;
  }

  /** Gives {@code b} back (ignored when null, of another size, or the pool is full). */
  public void give(ByteBuffer b) {
    if (b == null || b.capacity() != bytes) {
      return;
    }
    if (pooled.incrementAndGet() <= capacity) {
      free.offer(b);
    } else {
      pooled.decrementAndGet();
    }
  }
}
