package dev.sparktrainer.train;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** TEMPORARY: a whole state as one byte[] for the old checkpoint store (replaced by streamed arrays). */
final class CheckpointBridge {
  private CheckpointBridge() {}

  static byte[] encode(TrainingState st) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    byte[] meta = st.encodeMeta();
    out.writeInt(meta.length);
    out.write(meta);
    for (float[] a : st.arrays()) {
      byte[] b = new byte[4 * a.length];
      ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().put(a);
      out.write(b);
    }
    out.flush();
    return bytes.toByteArray();
  }

  static TrainingState decode(byte[] payload) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(payload));
    byte[] meta = new byte[in.readInt()];
    in.readFully(meta);
    TrainingState st = TrainingState.decodeMeta(meta);
    int[] trainableSizes = new int[st.trainableNames.size()];
    for (int j = 0; j < trainableSizes.length; j++) {
      trainableSizes[j] = st.valueSizes[st.names.indexOf(st.trainableNames.get(j))];
    }
    st.allocateArrays(trainableSizes, st.hasSlots);
    for (float[] a : st.arrays()) {
      byte[] b = new byte[4 * a.length];
      in.readFully(b);
      ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(a);
    }
    return st;
  }
}
