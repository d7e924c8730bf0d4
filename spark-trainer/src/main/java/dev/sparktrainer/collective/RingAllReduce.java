package dev.sparktrainer.collective;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The bandwidth-optimal all-reduce: ring reduce-scatter then ring all-gather, pipelined in frames
 * of the context's chunk size (Gloo's {@code allreduce_ring}). Each rank sends and receives
 * 2(N-1)/N of the data. FLOAT32 payloads may travel in half precision ({@link WirePrecision}).
 */
final class RingAllReduce {
  private final RingContext ctx;
  private final WirePrecision wirePrecision;

  /** Receives each reduce-scatter frame before it is accumulated (and half-precision frames). */
  private final ByteBuffer stage;

  private final Reductions.View stageView = new Reductions.View();
  private final Reductions.Scratch scratch = new Reductions.Scratch();

  /** Frames queued by the end of each reduce-scatter step. */
  private final long[] marks;

  RingAllReduce(RingContext ctx, WirePrecision wirePrecision) {
    this.ctx = ctx;
    this.wirePrecision = wirePrecision;
    this.stage =
        ByteBuffer.allocateDirect(ctx.size > 1 ? ctx.chunkBytes : 8).order(ByteOrder.LITTLE_ENDIAN);
    stageView.on(stage, 0);
    this.marks = new long[ctx.size];
  }

  static int segmentStart(int k, int q, int rem) {
    return k * q + Math.min(k, rem);
  }

  static int segmentLength(int k, int q, int rem) {
    return q + (k < rem ? 1 : 0);
  }

  /**
   * Reduces {@code count} elements from byte offset {@code base} of the buffer that {@code
   * sendView}, {@code recvView} and {@code target} are views of (N > 1). Segment k is first sent by
   * rank k, accumulated by k+1, k+2, ... in that order and finished by its owner k-1, which then
   * distributes it verbatim: every element is reduced once, in one fixed order, so all ranks hold
   * identical bits.
   */
  void run(
      ByteBuffer sendView,
      ByteBuffer recvView,
      Reductions.View target,
      int base,
      int count,
      ElementType type,
      ReduceOp op)
      throws IOException {
    FrameChannel ch = ctx.channel;
    int rank = ctx.rank;
    int size = ctx.size;
    WirePrecision wire = type == ElementType.FLOAT32 ? wirePrecision : WirePrecision.FP32;
    int es = type.bytes();
    int wireEs = wire == WirePrecision.FP32 ? es : 2;
    int chunkElems = Math.max(1, ctx.chunkBytes / es);
    int q = count / size;
    int rem = count % size;
    int maxSegment = q + (rem > 0 ? 1 : 0);
    int chunksPerSegment = (maxSegment + chunkElems - 1) / chunkElems;
    ch.reserve(2 * (size - 1) * chunksPerSegment + 1);
    int tagRs = Wire.reduceTag(Wire.OP_REDUCE_SCATTER, type, op, wire);
    int tagAg = Wire.reduceTag(Wire.OP_ALL_GATHER, type, op, wire);

    // Reduce-scatter. Step s: send segment (rank - s), receive and accumulate segment (rank - s -
    // 1).
    int own = rank;
    for (int off = 0, len = segmentLength(own, q, rem); off < len; off += chunkElems) {
      int n = Math.min(chunkElems, len - off);
      send(sendView, base + (segmentStart(own, q, rem) + off) * es, n, es, tagRs, wire);
    }
    marks[0] = ch.queued();
    for (int s = 0; s < size - 1; s++) {
      int k = Math.floorMod(rank - s - 1, size);
      int start = segmentStart(k, q, rem);
      int len = segmentLength(k, q, rem);
      boolean last = s == size - 2;
      for (int off = 0; off < len; off += chunkElems) {
        int n = Math.min(chunkElems, len - off);
        int p = base + (start + off) * es;
        ch.receive(tagRs, n * wireEs, stage, 0, true);
        // On the last step this rank finishes segment k = rank + 1 (MEAN divides it here).
        int divisor = last && op == ReduceOp.MEAN ? size : 0;
        if (wire == WirePrecision.FP32) {
          Reductions.reduce(type, op, target, p, stageView, 0, n, divisor, scratch);
        } else {
          Reductions.reduceHalf(op, wire, recvView, p, stage, 0, n, divisor);
        }
        if (!last) {
          send(sendView, p, n, es, tagRs, wire);
        } else {
          // This rank owns segment k = rank + 1: start the all-gather with it.
          if (wire != WirePrecision.FP32) {
            HalfFloats.roundInPlace(recvView, p, n, wire);
          }
          send(sendView, p, n, es, tagAg, wire);
        }
      }
      marks[s + 1] = ch.queued();
    }

    // All-gather. Step s: receive final segment (rank - s), forward it unless it completed the
    // circle.
    for (int s = 0; s < size - 1; s++) {
      // Segment (rank - s) was sent in reduce-scatter step s; it must be on the wire before it is
      // overwritten (the right neighbour has read all of it before it reaches its all-gather).
      ch.awaitSent(marks[s]);
      int k = Math.floorMod(rank - s, size);
      int start = segmentStart(k, q, rem);
      int len = segmentLength(k, q, rem);
      for (int off = 0; off < len; off += chunkElems) {
        int n = Math.min(chunkElems, len - off);
        int p = base + (start + off) * es;
        if (wire == WirePrecision.FP32) {
          ch.receive(tagAg, n * es, recvView, p, false);
        } else {
          ch.receive(tagAg, n * 2, stage, 0, true);
          HalfFloats.decode(stage, 0, recvView, p, n, wire);
        }
        if (s < size - 2) {
          send(sendView, p, n, es, tagAg, wire);
        }
      }
    }
    ch.flush();
  }

  private void send(ByteBuffer view, int pos, int n, int es, int tag, WirePrecision wire) {
    ctx.channel.send(view, pos, wire == WirePrecision.FP32 ? n * es : n, tag, wire);
  }
}
