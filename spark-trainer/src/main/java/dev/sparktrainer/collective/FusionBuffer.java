package dev.sparktrainer.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.Objects;

/**
 * Tensor fusion: all-reduces many arrays (a model's gradients) with one collective per bucket of
 * {@link Builder#optCapacityBytes(int) capacity} bytes instead of one per array. Arrays are packed
 * back to back into a reused direct buffer, reduced, and unpacked in place; an array larger than a
 * bucket spans several. Every rank must pass arrays of the same lengths in the same order.
 *
 * <p>Not thread-safe; one per communicator. The bucket is allocated once, in {@link
 * Builder#build()}.
 */
public final class FusionBuffer {
  /** Default bucket size, 64 MiB. */
  public static final int DEFAULT_CAPACITY_BYTES = 64 << 20;

  private final Communicator comm;
  private final ByteBuffer bucket;
  private final FloatBuffer floats;
  private int lastBuckets;

  private FusionBuffer(Communicator comm, int capacityBytes) {
    this.comm = comm;
    this.bucket = ByteBuffer.allocateDirect(capacityBytes).order(ByteOrder.LITTLE_ENDIAN);
    this.floats = bucket.asFloatBuffer();
  }

  /** A builder: {@link Builder#setCommunicator(Communicator)} is required. */
  public static Builder builder() {
    return new Builder();
  }

  /** The bucket size in bytes. */
  public int capacityBytes() {
    return bucket.capacity();
  }

  /** How many collectives the last call ran. */
  public int lastBucketCount() {
    return lastBuckets;
  }

  /** All-reduces every array in place, {@code op} applied element-wise across ranks. */
  public void allReduce(List<float[]> arrays, ReduceOp op) {
    Objects.requireNonNull(arrays, "arrays");
    Objects.requireNonNull(op, "op");
    int capacity = bucket.capacity() / 4;
    int buckets = 0;
    int ai = 0;
    int aoff = 0;
    int count = arrays.size();
    while (true) {
      while (ai < count && arrays.get(ai).length == 0) {
        ai++;
      }
      if (ai == count) {
        break;
      }
      int firstArray = ai;
      int firstOffset = aoff;
      int filled = 0;
      while (ai < count && filled < capacity) {
        float[] a = arrays.get(ai);
        int n = Math.min(a.length - aoff, capacity - filled);
        floats.put(filled, a, aoff, n);
        filled += n;
        aoff += n;
        if (aoff == a.length) {
          ai++;
          aoff = 0;
        }
      }
      comm.allReduce(bucket, 0, filled, ElementType.FLOAT32, op);
      buckets++;
      int bi = firstArray;
      int boff = firstOffset;
      for (int done = 0; done < filled; ) {
        float[] a = arrays.get(bi);
        int n = Math.min(a.length - boff, filled - done);
        floats.get(done, a, boff, n);
        done += n;
        boff += n;
        if (boff == a.length) {
          bi++;
          boff = 0;
        }
      }
    }
    lastBuckets = buckets;
  }

  /**
   * All-reduces the elements between each buffer's position and limit in place (e.g. DJL's {@code
   * NDArray.toByteBuffer()} views). Positions and limits are left unchanged.
   */
  public void allReduceBuffers(List<ByteBuffer> buffers, ElementType type, ReduceOp op) {
    Objects.requireNonNull(buffers, "buffers");
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(op, "op");
    for (int i = 0; i < buffers.size(); i++) {
      ByteBuffer b = buffers.get(i);
      if (b.remaining() % type.bytes() != 0) {
        throw new IllegalArgumentException(
            "Invalid buffer "
                + i
                + ": "
                + b.remaining()
                + " bytes is not a whole number of "
                + type
                + " elements");
      }
      if (b.isReadOnly()) {
        throw new IllegalArgumentException("Invalid buffer " + i + ": read-only");
      }
    }
    int capacity = bucket.capacity() / 8 * 8;
    int buckets = 0;
    int bi = 0;
    int boff = 0;
    int count = buffers.size();
    while (true) {
      while (bi < count && buffers.get(bi).remaining() == 0) {
        bi++;
      }
      if (bi == count) {
        break;
      }
      int firstBuffer = bi;
      int firstOffset = boff;
      int filled = 0;
      while (bi < count && filled < capacity) {
        ByteBuffer b = buffers.get(bi);
        int n = Math.min(b.remaining() - boff, capacity - filled);
        bucket.put(filled, b, b.position() + boff, n);
        filled += n;
        boff += n;
        if (boff == b.remaining()) {
          bi++;
          boff = 0;
        }
      }
      comm.allReduce(bucket, 0, filled / type.bytes(), type, op);
      buckets++;
      int ui = firstBuffer;
      int uoff = firstOffset;
      for (int done = 0; done < filled; ) {
        ByteBuffer b = buffers.get(ui);
        int n = Math.min(b.remaining() - uoff, filled - done);
        b.put(b.position() + uoff, bucket, done, n);
        done += n;
        uoff += n;
        if (uoff == b.remaining()) {
          ui++;
          uoff = 0;
        }
      }
    }
    lastBuckets = buckets;
  }

  /** Builder for {@link FusionBuffer}. */
  public static final class Builder {
    private Communicator comm;
    private int capacityBytes = DEFAULT_CAPACITY_BYTES;

    private Builder() {}

    /** The communicator the buckets are reduced with. Required. */
    public Builder setCommunicator(Communicator comm) {
      this.comm = comm;
      return this;
    }

    /** Bucket size in bytes, a multiple of 8, at least 1 KiB. Default 64 MiB. */
    public Builder optCapacityBytes(int capacityBytes) {
      this.capacityBytes = capacityBytes;
      return this;
    }

    /** Validates and allocates the bucket. */
    public FusionBuffer build() {
      Objects.requireNonNull(comm, "communicator: setCommunicator is required");
      if (capacityBytes < 1024 || capacityBytes % 8 != 0) {
        throw new IllegalArgumentException(
            "Invalid capacityBytes " + capacityBytes + ": expected a multiple of 8, at least 1024");
      }
      return new FusionBuffer(comm, capacityBytes);
    }
  }
}
