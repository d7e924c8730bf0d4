package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Pipelined ring broadcast (Gloo's {@code broadcast} over a ring): the root streams frames of the
 * chunk size to the right; each rank forwards a frame as soon as it has received it, except the
 * root's left neighbour, where the circle closes.
 */
final class RingBroadcast {
  private final RingContext ctx;

  /** The length that precedes a {@link #bytes} broadcast. */
  private final ByteBuffer length = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);

  RingBroadcast(RingContext ctx) {
    this.ctx = ctx;
  }

  /** Replaces {@code bytes} at {@code base} of the buffer both views show with {@code root}'s. */
  void run(ByteBuffer sendView, ByteBuffer recvView, int base, int bytes, int root)
      throws IOException {
    if (ctx.size == 1) {
      return;
    }
    FrameChannel ch = ctx.channel;
    int tag = Wire.broadcastTag(root);
    int chunkBytes = ctx.chunkBytes;
    int chunks = ctx.frames(bytes);
    ch.reserve(chunks + 1);
    ch.chooseWriter(bytes);
    boolean forward = Math.floorMod(ctx.rank + 1, ctx.size) != root;
    for (int c = 0; c < chunks; c++) {
      int p = base + c * chunkBytes;
      int n = Math.min(chunkBytes, bytes - c * chunkBytes);
      if (ctx.rank == root) {
        ch.send(sendView, p, n, tag, WirePrecision.FP32);
      } else {
        ch.receive(tag, n, recvView, p, false);
        if (forward) {
          ch.send(sendView, p, n, tag, WirePrecision.FP32);
        }
      }
    }
    ch.flush();
  }

  /**
   * Broadcasts a byte array whose length only the root knows: first the length, then the bytes.
   * Returns the root's bytes (the root's own array on the root).
   */
  byte[] bytes(byte[] data, int root) throws IOException {
    if (ctx.size == 1) {
      return data;
    }
    length.putLong(0, ctx.rank == root ? data.length : 0);
    run(length.duplicate(), length.duplicate(), 0, 8, root);
    long n = length.getLong(0);
    if (n < 0 || n > Integer.MAX_VALUE - 8) {
      throw new ProtocolException(ctx.left(), "broadcast length " + n + " is out of range");
    }
    byte[] out = ctx.rank == root ? data : new byte[(int) n];
    run(ByteBuffer.wrap(out), ByteBuffer.wrap(out), 0, out.length, root);
    return out;
  }
}
