package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Barrier: a small all-reduce of one count per rank (N-1 hops). It returns once every rank has
 * entered, and checks that all N did.
 */
final class RingBarrier {
  private final RingContext ctx;
  private final SmallAllReduce small;
  private final ByteBuffer count = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);

  RingBarrier(RingContext ctx, SmallAllReduce small) {
    this.ctx = ctx;
    this.small = small;
  }

  void run() throws IOException {
    if (ctx.size == 1) {
      return;
    }
    count.putLong(0, 1);
    small.run(count, 0, 1, ElementType.INT64, ReduceOp.SUM, Wire.OP_BARRIER);
    if (count.getLong(0) != ctx.size) {
      throw new ProtocolException(
          ctx.left(), "barrier counted " + count.getLong(0) + " ranks, expected " + ctx.size);
    }
  }
}
