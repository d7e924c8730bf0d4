package dev.sparktrainer.train.loop;

import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.train.metrics.TrainingCallback;
import java.io.Serializable;
import java.util.Objects;

/**
 * The live objects a training run carries beside its configuration: the ring's secret (a new one
 * per run), rank 0's callback, and the faults a test injects.
 *
 * @param secret the ring's shared secret for this run
 * @param callback rank 0's hook (progress, TensorBoard); null for none
 * @param faults faults a test injects; {@link FaultInjection#NONE} in production
 */
public record TrainingRuntime(JobSecret secret, TrainingCallback callback, FaultInjection faults)
    implements Serializable {

  public TrainingRuntime {
    Objects.requireNonNull(secret, "secret");
    Objects.requireNonNull(faults, "faults");
  }

  /** The same callback and faults with a fresh ring secret (every run gets its own). */
  public TrainingRuntime withNewSecret() {
    return new TrainingRuntime(JobSecret.generate(), callback, faults);
  }
}
