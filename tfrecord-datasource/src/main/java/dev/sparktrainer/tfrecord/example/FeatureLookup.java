package dev.sparktrainer.tfrecord.example;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * Finds a feature name's column index straight from the UTF-8 key bytes in a record, without making
 * a String: an open-addressing table of the wanted names. Features not in the table are the ones a
 * reader skips without decoding.
 */
public final class FeatureLookup {
  private final byte[][] keys;
  private final int[] slots; // index into keys, or -1
  private final int mask;

  public FeatureLookup(List<String> names) {
    keys = new byte[names.size()][];
    int cap = Integer.highestOneBit(Math.max(4, names.size() * 4) - 1) << 1;
    slots = new int[cap];
    Arrays.fill(slots, -1);
    mask = cap - 1;
    for (int i = 0; i < keys.length; i++) {
      keys[i] = names.get(i).getBytes(StandardCharsets.UTF_8);
      int h = hash(keys[i], 0, keys[i].length) & mask;
      while (slots[h] >= 0) {
        if (Arrays.equals(keys[slots[h]], keys[i])) {
          throw new IllegalArgumentException("Duplicate feature name '" + names.get(i) + "'");
        }
        h = (h + 1) & mask;
      }
      slots[h] = i;
    }
  }

  public int size() {
    return keys.length;
  }

  /** The index of the name in {@code buf[off, off+len)}, or -1. */
  public int find(byte[] buf, int off, int len) {
    int h = hash(buf, off, len) & mask;
    while (true) {
      int s = slots[h];
      if (s < 0) {
        return -1;
      }
      byte[] k = keys[s];
      if (k.length == len && Arrays.equals(k, 0, len, buf, off, off + len)) {
        return s;
      }
      h = (h + 1) & mask;
    }
  }

  private static int hash(byte[] b, int off, int len) {
    int h = len;
    for (int i = off, end = off + len; i < end; i++) {
      h = 31 * h + b[i];
    }
    return h ^ (h >>> 16);
  }
}
