package dev.sparktrainer.train.step;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * How the arena is cut into buckets: DDP's rule, a bucket closes with the parameter that fills it.
 */
class GradientBucketsTest {

  /**
   * The default CNN in ready order (dense 128-10, dense 3136-128, then the convolutions): the 1.6
   * MB dense weight ends the first bucket, so its all-reduce can run while the convolutions'
   * backward goes on; cutting before it would put it in one bucket with the convolutions, sent only
   * after the whole backward.
   */
  @Test
  void aLargeParameterEndsTheBucketItJoins() {
    int[] sizes = {1280, 10, 401_408, 128, 18_432, 64, 288, 32};
    GradientBuckets b =
        new GradientBuckets(new int[] {0, 1, 2, 3, 4, 5, 6, 7}, sizes, new int[0], 25 << 20);
    assertEquals(3, b.count.length, "two gradient buckets and the (empty) statistics bucket");
    assertArrayEquals(new int[] {0, 1, 2}, b.members[0]);
    assertArrayEquals(new int[] {3, 4, 5, 6, 7}, b.members[1]);
    assertEquals(1280 + 10 + 401_408, b.count[0]);
    assertEquals(0, b.start[0]);
    assertEquals(b.count[0], b.start[1]);
    assertEquals(0, b.count[2]);
  }

  /** Later buckets close at bucketBytes, each with at most one parameter past its limit. */
  @Test
  void bucketsCloseOnceTheyHoldTheirLimit() {
    // first limit 1 MiB = 262,144 floats; then 2 MiB = 524,288 floats
    int[] sizes = {200_000, 100_000, 300_000, 300_000, 10, 600_000, 5};
    int[] order = {6, 5, 4, 3, 2, 1, 0};
    GradientBuckets b = new GradientBuckets(order, sizes, new int[] {3}, 2 << 20);
    assertArrayEquals(new int[] {6, 5}, b.members[0]); // 600,005 >= 262,144
    assertArrayEquals(new int[] {4, 3, 2}, b.members[1]); // 600,010 >= 524,288
    assertArrayEquals(new int[] {1, 0}, b.members[2]); // the rest
    assertEquals(4, b.count.length);
    assertEquals(3, b.count[3], "the statistics");
    int at = 0;
    for (int k = 0; k < order.length; k++) {
      assertEquals(at, b.offset[order[k]], "arena offsets follow the ready order");
      at += sizes[order[k]];
    }
    for (int j = 0; j < sizes.length; j++) {
      int bucket = b.bucketOf[j];
      int member = j;
      assertEquals(
          true,
          java.util.Arrays.stream(b.members[bucket]).anyMatch(m -> m == member),
          "bucketOf agrees with members");
    }
  }
}
