package dev.sparktrainer.data;

import java.util.Arrays;
import java.util.concurrent.LinkedBlockingDeque;

/**
 * Recycles the float arrays of decoded records between the reader threads and the batching thread:
 * a batch hands back all its records' arrays as one bundle, and a reader takes a whole bundle at a
 * time ({@link Taker}), so the steady state allocates and zeroes nothing and costs one queue
 * operation per batch, not per record. At most {@code bundles} bundles are kept. The pool is a
 * stack: the arrays handed back last — just copied into a batch, still in cache — are reused first,
 * so a reader decodes into warm memory rather than into arrays that sat out a trip through the
 * shuffle buffer.
 */
final class ArrayPool {
  private final int size;
  private final LinkedBlockingDeque<float[][]> free;

  ArrayPool(int size, int bundles) {
    this.size = size;
    this.free = new LinkedBlockingDeque<>(Math.max(1, bundles));
  }

  /** Hands back {@code n} arrays (the first n of {@code arrays} are taken over). */
  void giveAll(float[][] arrays, int n) {
    if (n > 0) {
      free.offerFirst(Arrays.copyOf(arrays, n));
    }
  }

  /** A reader's private end of the pool: not thread-safe, one per reader. */
  Taker taker() {
    return new Taker();
  }

  final class Taker {
    private float[][] bundle;
    private int next;

    float[] take() {
      if (bundle == null || next == bundle.length) {
        bundle = free.pollFirst();
        next = 0;
        if (bundle == null) {
          return new float[size];
        }
      }
      float[] a = bundle[next];
      bundle[next++] = null;
      return a;
    }
  }
}
