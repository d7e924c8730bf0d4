package dev.sparktrainer.data;

/** Derives independent, reproducible seeds from (seed, epoch, rank, stream). */
final class Seeds {
  private Seeds() {}

  static long mix(long seed, long epoch, long rank, long stream) {
    long h = seed;
    h = splitMix(h ^ splitMix(epoch + 0x9E3779B97F4A7C15L));
    h = splitMix(h ^ splitMix(rank + 0x632BE59BD9B4E019L));
    return splitMix(h ^ splitMix(stream + 0x8CB92BA72F3D8DD7L));
  }

  private static long splitMix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
