package dev.sparktrainer.collective;

import java.nio.ByteBuffer;

/** The frame header every data frame starts with, and the operation tags it carries. */
final class Wire {
  static final int MAGIC = 0x53545243; // "STRC"

  /**
   * 2: shared-memory negotiation after the handshake. (Binding the proofs to the TLS connection and
   * the pid in segment names changed what is hashed and named, not the messages: every rank of a
   * job runs the same build, and integration tests speak version 2 by hand.)
   */
  static final short VERSION = 2;

  /** magic(4) version(2) reserved(2) jobId(8) seq(8) tag(4) length(4). */
  static final int HEADER_BYTES = 32;

  static final int OP_REDUCE_SCATTER = 1;
  static final int OP_ALL_GATHER = 2;
  static final int OP_SMALL_ALL_REDUCE = 3;
  static final int OP_BROADCAST = 4;
  static final int OP_GATHER_LENGTHS = 5;
  static final int OP_GATHER_DATA = 6;
  static final int OP_BARRIER = 7;

  private static final String[] OP_NAMES = {
    "?",
    "reduce-scatter",
    "all-gather",
    "small all-reduce",
    "broadcast",
    "all-gather lengths",
    "all-gather data",
    "barrier"
  };

  private Wire() {}

  /** An operation tag: the opcode and three operation-specific bytes. */
  static int tag(int opcode, int a, int b, int c) {
    return opcode << 24 | (a & 0xff) << 16 | (b & 0xff) << 8 | (c & 0xff);
  }

  /** The tag of an all-reduce frame: what must agree between ranks. */
  static int reduceTag(int opcode, ElementType type, ReduceOp op, WirePrecision wire) {
    return tag(opcode, type.ordinal(), op.ordinal(), wire.ordinal());
  }

  static int broadcastTag(int root) {
    return OP_BROADCAST << 24 | (root & 0xffffff);
  }

  static void putHeader(ByteBuffer h, long jobId, long seq, int tag, int length) {
    h.clear();
    h.putInt(MAGIC).putShort(VERSION).putShort((short) 0).putLong(jobId).putLong(seq);
    h.putInt(tag).putInt(length);
    h.flip();
  }

  static String describe(int tag) {
    int opcode = tag >>> 24;
    String name =
        opcode > 0 && opcode < OP_NAMES.length ? OP_NAMES[opcode] : "unknown op " + opcode;
    if (opcode == OP_BROADCAST) {
      return name + " from root " + (tag & 0xffffff);
    }
    if (opcode == OP_REDUCE_SCATTER || opcode == OP_ALL_GATHER || opcode == OP_SMALL_ALL_REDUCE) {
      int t = (tag >>> 16) & 0xff;
      int o = (tag >>> 8) & 0xff;
      int w = tag & 0xff;
      return name
          + " ("
          + (t < ElementType.values().length ? ElementType.values()[t] : "type " + t)
          + " "
          + (o < ReduceOp.values().length ? ReduceOp.values()[o] : "op " + o)
          + (w < WirePrecision.values().length ? ", wire " + WirePrecision.values()[w] : "")
          + ")";
    }
    return name;
  }
}
