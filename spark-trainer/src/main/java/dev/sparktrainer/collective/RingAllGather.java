package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Ring all-gather (Gloo's {@code allgather_ring}): in N-1 steps every rank forwards to the right
 * what it received from the left the step before, so each rank's data travels the ring once. Two
 * forms: equal slots of this rank's gather buffer ({@link #gatherSlots}, which the small all-reduce
 * and the barrier build on), and byte arrays of any length per rank ({@link #run}).
 */
final class RingAllGather {
  private final RingContext ctx;
  // The gather buffer and its views: created on first need, grown never shrunk.
  private ByteBuffer gather;
  private ByteBuffer gatherSend;
  private ByteBuffer gatherRecv;

  RingAllGather(RingContext ctx) {
    this.ctx = ctx;
  }

  /** The gather buffer, with room for {@code bytes}: slot r of {@link #gatherSlots} is rank r's. */
  ByteBuffer slots(long bytes) {
    if (bytes > Integer.MAX_VALUE - 16) {
      throw new IllegalArgumentException("Invalid length: gather buffer of " + bytes + " bytes");
    }
    if (gather == null || gather.capacity() < bytes) {
      gather = ByteBuffer.allocateDirect((int) Math.max(bytes, 64)).order(ByteOrder.LITTLE_ENDIAN);
      gatherSend = gather.duplicate().order(ByteOrder.LITTLE_ENDIAN);
      gatherRecv = gather.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }
    return gather;
  }

  /**
   * All-gathers equal slots of {@link #slots} (N > 1): on entry slot {@code rank} holds this rank's
   * {@code bytes}, on return slot r holds rank r's.
   */
  void gatherSlots(int bytes, int tag) throws IOException {
    FrameChannel ch = ctx.channel;
    ch.reserve(ctx.size);
    for (int s = 0; s < ctx.size - 1; s++) {
      int sendSlot = Math.floorMod(ctx.rank - s, ctx.size);
      int recvSlot = Math.floorMod(ctx.rank - s - 1, ctx.size);
      ch.send(gatherSend, sendSlot * bytes, bytes, tag, WirePrecision.FP32);
      ch.receive(tag, bytes, gatherRecv, recvSlot * bytes, true);
    }
    ch.flush();
  }

  /**
   * Gathers every rank's bytes (any length, may differ per rank): first the lengths, in slots, then
   * the data in frames of the chunk size.
   *
   * @return an unmodifiable list indexed by rank; element {@code rank} is a copy of {@code data}
   */
  List<byte[]> run(byte[] data) throws IOException {
    int rank = ctx.rank;
    int size = ctx.size;
    int chunkBytes = ctx.chunkBytes;
    byte[][] out = new byte[size][];
    out[rank] = data.clone();
    if (size > 1) {
      FrameChannel ch = ctx.channel;
      slots(8L * size).putLong(8 * rank, data.length);
      gatherSlots(8, Wire.tag(Wire.OP_GATHER_LENGTHS, 0, 0, 0));
      long frames = 0;
      long total = 0;
      for (int k = 0; k < size; k++) {
        long length = gather.getLong(8 * k);
        if (length < 0 || length > Integer.MAX_VALUE - 8) {
          throw new ProtocolException(
              ctx.left(), "rank " + k + "'s all-gather length " + length + " is out of range");
        }
        if (k != rank) {
          out[k] = new byte[(int) length];
        }
        frames += ctx.frames(length);
        total += length;
      }
      ch.reserve((int) Math.min(Integer.MAX_VALUE / 2, frames + 1));
      ch.chooseWriter(total);
      int tag = Wire.tag(Wire.OP_GATHER_DATA, 0, 0, 0);
      for (int s = 0; s < size - 1; s++) {
        byte[] send = out[Math.floorMod(rank - s, size)];
        ByteBuffer sendView = ByteBuffer.wrap(send);
        for (int c = 0, chunks = ctx.frames(send.length); c < chunks; c++) {
          int p = c * chunkBytes;
          ch.send(sendView, p, Math.min(chunkBytes, send.length - p), tag, WirePrecision.FP32);
        }
        byte[] recv = out[Math.floorMod(rank - s - 1, size)];
        ByteBuffer recvView = ByteBuffer.wrap(recv);
        for (int c = 0, chunks = ctx.frames(recv.length); c < chunks; c++) {
          int p = c * chunkBytes;
          ch.receive(tag, Math.min(chunkBytes, recv.length - p), recvView, p, false);
        }
      }
      ch.flush();
    }
    List<byte[]> result = new ArrayList<>(size);
    Collections.addAll(result, out);
    return Collections.unmodifiableList(result);
  }
}
