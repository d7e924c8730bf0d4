package dev.sparktrainer.collective;

import java.io.Serializable;
import java.time.Duration;
import java.util.Objects;

/**
 * How a job's gradients travel, as one value: what the ring is formed with ({@link
 * Communicator.Builder#optOptions}) and what the training step cuts and overlaps its all-reduces
 * with. Immutable; the trainer's builder validates it, and it is shipped to every task as it is.
 *
 * @param connectTimeout how long forming the ring may take
 * @param operationTimeout how long one collective may wait on a peer before failing, naming it
 * @param wirePrecision how gradient payloads travel (FP32, or BF16 for half the bytes)
 * @param tls TLS for the ring's sockets; null: plain TCP, HMAC-authenticated at set-up
 * @param sharedMemory whether same-host ring neighbours exchange through shared memory (never with
 *     TLS)
 * @param bucketBytes gradient bucket size: one all-reduce per bucket (the first bucket is smaller)
 * @param overlap whether buckets are all-reduced on a communication thread while backward goes on
 */
public record CommOptions(
    Duration connectTimeout,
    Duration operationTimeout,
    WirePrecision wirePrecision,
    RingTls tls,
    boolean sharedMemory,
    int bucketBytes,
    boolean overlap)
    implements Serializable {

  public CommOptions {
    Objects.requireNonNull(connectTimeout, "connectTimeout");
    Objects.requireNonNull(operationTimeout, "operationTimeout");
    Objects.requireNonNull(wirePrecision, "wirePrecision");
  }

  /** These options with another all-reduce overlap. */
  public CommOptions withOverlap(boolean on) {
    return new CommOptions(
        connectTimeout, operationTimeout, wirePrecision, tls, sharedMemory, bucketBytes, on);
  }

  /** These options with another bucket size. */
  public CommOptions withBucketBytes(int bytes) {
    return new CommOptions(
        connectTimeout, operationTimeout, wirePrecision, tls, sharedMemory, bytes, overlap);
  }
}
