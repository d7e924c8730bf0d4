package dev.sparktrainer.data;

/**
 * A record stream whose images may take a random box (random-resized-crop) while they are decoded:
 * the map stage ({@link MappedStream}) tells it how its examples are seeded, so that the box comes
 * from the same example seed as the example's other draws.
 */
interface ImageSeeding {
  /** {@link Seeds} stream of the images' random boxes, beside the map stage's own (3). */
  int SEED_STREAM = 4;

  /**
   * Seeds record {@code k} (the k-th this stream returns) of the split at position {@code item}
   * from {@code Seeds.mix(base, item, k, 0)}: the example seed {@link MappedStream} gives the
   * example's {@code random()}, mixed once more into a stream of its own.
   */
  void seedImages(long base, int item);

  /** The seed of record {@code k}'s images. */
  static long seed(long base, int item, long k) {
    return Seeds.mix(Seeds.mix(base, item, k, 0), 0, 0, SEED_STREAM);
  }
}
