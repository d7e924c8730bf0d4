package dev.sparktrainer.data;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Recycles float arrays of one size between the stages of a pipeline: decoded records and batch
 * columns are returned once copied, so the steady state allocates (and zeroes) nothing. At most
 * {@code capacity} arrays are kept.
 */
final class ArrayPool {
  private final int size;
  private final int capacity;
  private final ConcurrentLinkedQueue<float[]> free = new ConcurrentLinkedQueue<>();
  private final AtomicInteger pooled = new AtomicInteger();

  ArrayPool(int size, int capacity) {
    this.size = size;
    this.capacity = capacity;
  }

  float[] take() {
    float[] a = free.poll();
    if (a == null) {
      return new float[size];
    }
    pooled.decrementAndGet();
    return a;
  }

  void give(float[] a) {
    if (a != null && a.length == size && pooled.incrementAndGet() <= capacity) {
      free.offer(a);
    } else if (a != null && a.length == size) {
      pooled.decrementAndGet();
    }
  }
}
