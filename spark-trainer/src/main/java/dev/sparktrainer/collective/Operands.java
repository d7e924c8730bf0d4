package dev.sparktrainer.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;

/**
 * The buffers a collective runs on, reused across operations: the communicator's own direct work
 * buffer, which primitive arrays are copied into and out of, and the views an algorithm needs of it
 * or of a caller's {@link ByteBuffer} (which is used in place). Created on first need, grown never
 * shrunk: the steady state allocates nothing.
 */
final class Operands {
  /**
   * Views of one buffer, made once per buffer and indexed absolutely over its whole capacity: a
   * caller may pass the same buffer with a different position and limit each time (the trainer
   * reduces its gradient arena bucket by bucket), and a view keeping an earlier call's limit would
   * refuse the later bytes. The sender reads {@code send} while the caller's thread writes into
   * {@code recv}: each needs its own position and limit.
   */
  static final class Views {
    private ByteBuffer owner;
    ByteBuffer send;
    ByteBuffer recv;

    /** Typed access for the reduction kernels. */
    final Reductions.View reduce = new Reductions.View();

    private Views of(ByteBuffer buffer) {
      if (buffer != owner) {
        owner = buffer;
        send = buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        recv = buffer.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      }
      send.clear();
      recv.clear();
      return this;
    }
  }

  private ByteBuffer work;
  private FloatBuffer workFloats;
  private DoubleBuffer workDoubles;
  private LongBuffer workLongs;
  // Two sets, so that arrays and a caller's buffer used in turn do not remake each other's views.
  private final Views workViews = new Views();
  private final Views callerViews = new Views();

  /** The views of {@code buffer}: the work buffer or a caller's. */
  Views of(ByteBuffer buffer) {
    return (buffer == work ? workViews : callerViews).of(buffer);
  }

  /** The work buffer, with room for {@code bytes}. */
  ByteBuffer work(long bytes) {
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalArgumentException(
          "Invalid length: "
              + bytes
              + " bytes exceeds one operation's limit of 2 GB; split it (see FusionBuffer)");
    }
    if (work == null || work.capacity() < bytes) {
      work = ByteBuffer.allocateDirect((int) Math.max(bytes, 64)).order(ByteOrder.LITTLE_ENDIAN);
      workFloats = work.asFloatBuffer();
      workDoubles = work.asDoubleBuffer();
      workLongs = work.asLongBuffer();
    }
    return work;
  }

  /**
   * Copies {@code array[offset, offset + length)} (a {@code float[]}, {@code double[]} or {@code
   * long[]} as {@code type} says) to the start of the work buffer, and returns the buffer.
   */
  ByteBuffer load(Object array, int offset, int length, ElementType type) {
    work((long) type.bytes() * length);
    switch (type) {
      case FLOAT32:
        workFloats.put(0, (float[]) array, offset, length);
        break;
      case FLOAT64:
        workDoubles.put(0, (double[]) array, offset, length);
        break;
      case INT64:
        workLongs.put(0, (long[]) array, offset, length);
        break;
      default:
        throw new AssertionError(type);
    }
    return work;
  }

  /** Copies the start of the work buffer back to {@code array[offset, offset + length)}. */
  void store(Object array, int offset, int length, ElementType type) {
    switch (type) {
      case FLOAT32:
        workFloats.get(0, (float[]) array, offset, length);
        break;
      case FLOAT64:
        workDoubles.get(0, (double[]) array, offset, length);
        break;
      case INT64:
        workLongs.get(0, (long[]) array, offset, length);
        break;
      default:
        throw new AssertionError(type);
    }
  }
}
