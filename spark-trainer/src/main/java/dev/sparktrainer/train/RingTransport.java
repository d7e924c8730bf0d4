package dev.sparktrainer.train;

/**
 * How ring neighbours exchange gradients ({@code --ring-transport}, {@code ringTransport}, {@link
 * DistributedTrainerBuilder#optRingTransport}).
 */
public enum RingTransport {
  /**
   * Neighbours on the same host (executors sharing a machine) through an owner-only memory-mapped
   * file in {@code /dev/shm}, the others over TCP (the default).
   */
  AUTO,
  /** TCP for every link. */
  TCP;

  /** Whether same-host neighbours may use shared memory. */
  public boolean sharedMemory() {
    return this == AUTO;
  }
}
