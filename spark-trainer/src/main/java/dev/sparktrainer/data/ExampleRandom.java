package dev.sparktrainer.data;

import java.util.random.RandomGenerator;

/**
 * The random generator an {@link Example} hands its transform: SplitMix64 (the algorithm of {@link
 * java.util.SplittableRandom}), counter-based — draw k is a pure function of (seed, k) — and
 * re-seeded in place for every example, so the per-example path allocates nothing. Not thread-safe:
 * one per reader.
 */
final class ExampleRandom implements RandomGenerator {
  private static final long GAMMA = 0x9E3779B97F4A7C15L;
  private long state;

  /** Starts the sequence of {@code seed} over. */
  void reset(long seed) {
    state = seed;
  }

  @Override
  public long nextLong() {
    long z = (state += GAMMA);
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
