package dev.sparktrainer.tfrecord.codec;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/** Little-endian reads and writes on byte arrays (one machine instruction each on x86). */
public final class LittleEndian {
  private static final VarHandle INT =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle LONG =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle FLOAT =
      MethodHandles.byteArrayViewVarHandle(float[].class, ByteOrder.LITTLE_ENDIAN);

  private LittleEndian() {}

  public static int getInt(byte[] b, int off) {
    return (int) INT.get(b, off);
  }

  public static long getLong(byte[] b, int off) {
    return (long) LONG.get(b, off);
  }

  public static float getFloat(byte[] b, int off) {
    return (float) FLOAT.get(b, off);
  }

  public static void putInt(byte[] b, int off, int v) {
    INT.set(b, off, v);
  }

  public static void putLong(byte[] b, int off, long v) {
    LONG.set(b, off, v);
  }

  public static void putFloat(byte[] b, int off, float v) {
    FLOAT.set(b, off, v);
  }
}
