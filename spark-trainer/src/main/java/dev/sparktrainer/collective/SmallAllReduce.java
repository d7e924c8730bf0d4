package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The latency-optimal all-reduce for small messages: every rank's whole vector goes around the ring
 * once ({@link RingAllGather#gatherSlots}: N-1 hops instead of the ring all-reduce's 2(N-1)); then
 * every rank reduces the N vectors in rank order 0..N-1, so the results are identical everywhere.
 * Always FP32 on the wire.
 */
final class SmallAllReduce {
  private final RingContext ctx;
  private final RingAllGather gather;
  private final Reductions.View gatherView = new Reductions.View();
  private final Reductions.Scratch scratch = new Reductions.Scratch();

  SmallAllReduce(RingContext ctx, RingAllGather gather) {
    this.ctx = ctx;
    this.gather = gather;
  }

  /**
   * Reduces {@code count} elements at byte offset {@code base} of {@code buf} in place (N > 1);
   * {@code opcode} names the operation in the frame tags (a barrier is a small all-reduce too).
   */
  void run(ByteBuffer buf, int base, int count, ElementType type, ReduceOp op, int opcode)
      throws IOException {
    int size = ctx.size;
    int bytes = count * type.bytes();
    ByteBuffer slots = gather.slots((long) size * bytes);
    slots.put(ctx.rank * bytes, buf, base, bytes);
    gather.gatherSlots(bytes, Wire.reduceTag(opcode, type, op, WirePrecision.FP32));
    gatherView.on(slots, 0);
    for (int k = 1; k < size; k++) {
      int divisor = k == size - 1 && op == ReduceOp.MEAN ? size : 0;
      Reductions.reduce(type, op, gatherView, 0, gatherView, k * bytes, count, divisor, scratch);
    }
    buf.put(base, slots, 0, bytes);
  }
}
