package dev.sparktrainer.data;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * tf.data's {@code cache(filename)} on local disk: the first epoch writes each split's decoded
 * records (this worker's share) to a compact binary file — floats and the label, nothing else — and
 * later epochs read them from there instead of remote storage. A split's file appears (atomic
 * rename) only once it was read to the end, so an interrupted epoch never leaves a partial cache.
 * The directory name is a digest of the spec, the splits (with each file's length, modification
 * time and etag, where the store has one) and the shard, so a changed dataset never reads a stale
 * cache.
 */
final class RecordCache {
  private static final int MAGIC = 0x54524331; // "TRC1"

  private final Path dir;
  private final int featureSize;

  RecordCache(String root, DatasetPlan plan, WorkerShard shard, int rank, int numWorkers) {
    this.featureSize = plan.spec().featureSize();
    this.dir = Paths.get(root, "worker-" + rank + "-of-" + numWorkers + "-" + digest(plan, shard));
  }

  private static String digest(DatasetPlan plan, WorkerShard shard) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      md.update(plan.spec().toString().getBytes(StandardCharsets.UTF_8));
      md.update(shard.policy().name().getBytes(StandardCharsets.UTF_8));
      for (Split s : plan.splits()) {
        // The file's length, modification time and etag too: the same path, range and record count
        // can hold other records after a rewrite.
        md.update((s + " " + s.fileVersion() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      StringBuilder sb = new StringBuilder();
      for (byte b : md.digest()) {
        sb.append(String.format("%02x", b));
      }
      return sb.substring(0, 16);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private Path fileOf(Split s) {
    return dir.resolve("split-" + s.index() + ".bin");
  }

  /** The cached records of {@code s}, or null if not cached yet. */
  RecordStream open(Split s, ArrayPool records) throws IOException {
    ArrayPool.Taker pool = records.taker();
    Path f = fileOf(s);
    if (!Files.exists(f)) {
      return null;
    }
    DataInputStream in =
        new DataInputStream(new BufferedInputStream(Files.newInputStream(f), 1 << 16));
    if (in.readInt() != MAGIC || in.readInt() != featureSize) {
      in.close();
      throw new IOException(
          "Cache file " + f + " is not a record cache of " + featureSize + " floats");
    }
    return new RecordStream() {
      @Override
      public Record next() throws IOException {
        float[] v = pool.take();
        try {
          v[0] = Float.intBitsToFloat(in.readInt());
        } catch (EOFException e) {
          return null;
        }
        for (int i = 1; i < featureSize; i++) {
          v[i] = Float.intBitsToFloat(in.readInt());
        }
        return new Record(v, in.readDouble());
      }

      @Override
      public void close() throws IOException {
        in.close();
      }
    };
  }

  /** {@code source}, copying what it yields into the cache file of {@code s}. */
  RecordStream writeThrough(Split s, RecordStream source) throws IOException {
    Files.createDirectories(dir);
    Path tmp = Files.createTempFile(dir, "split-" + s.index() + "-", ".tmp");
    DataOutputStream out =
        new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(tmp), 1 << 16));
    out.writeInt(MAGIC);
    out.writeInt(featureSize);
    return new RecordStream() {
      private boolean complete;

      @Override
      public Record next() throws IOException {
        Record r = source.next();
        if (r == null) {
          complete = true;
          return null;
        }
        for (float x : r.features) {
          // The raw bits: int64 ids and lengths ride in float slots (Slots); writeFloat would
          // collapse those that look like NaNs.
          out.writeInt(Float.floatToRawIntBits(x));
        }
        out.writeDouble(r.label);
        return r;
      }

      @Override
      public void close() throws IOException {
        try {
          source.close();
        } finally {
          out.close();
          if (complete) {
            Files.move(
                tmp,
                fileOf(s),
                StandardCopyOption.ATOMIC_MOVE,
                StandardCopyOption.REPLACE_EXISTING);
          } else {
            Files.deleteIfExists(tmp);
          }
        }
      }
    };
  }
}
