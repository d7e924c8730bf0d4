package dev.sparktrainer.collective;

import java.io.Serializable;
import java.time.Duration;
import java.util.Objects;

/**
 * How a job's gradients travel, as one value: what the ring is formed with ({@link
 * Communicator.Builder#optOptions}), and the deadline the training step waits on it with. How the
 * step cuts its gradients into buckets and overlaps their all-reduces is the step's own setting
 * ({@code train.step.StepOptions}). Immutable; the trainer's builder validates it, and it is
 * shipped to every task as it is.
 *
 * @param connectTimeout how long forming the ring may take
 * @param operationTimeout how long one collective may wait on a peer before failing, naming it
 * @param wirePrecision how gradient payloads travel (FP32, or BF16 for half the bytes)
 * @param tls TLS for the ring's sockets; null: plain TCP, HMAC-authenticated at set-up
 * @param sharedMemory whether same-host ring neighbours exchange through shared memory (never with
 *     TLS)
 */
public record CommOptions(
    Duration connectTimeout,
    Duration operationTimeout,
    WirePrecision wirePrecision,
    RingTls tls,
    boolean sharedMemory)
    implements Serializable {

  public CommOptions {
    Objects.requireNonNull(connectTimeout, "connectTimeout");
    Objects.requireNonNull(operationTimeout, "operationTimeout");
    Objects.requireNonNull(wirePrecision, "wirePrecision");
  }
}
