package dev.sparktrainer.collective;

/**
 * A collective operation or the ring setup failed: a peer died, stalled, failed authentication or
 * sent a malformed frame, or a deadline passed. The message names this rank, the peer's rank and
 * address, and the operation. After this exception the {@link Communicator} is broken and closed.
 */
public class CollectiveException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int rank;
  private final int peerRank;
  private final String peerAddress;
  private final String operation;

  CollectiveException(
      String message,
      int rank,
      int peerRank,
      String peerAddress,
      String operation,
      Throwable cause) {
    super(message, cause);
    this.rank = rank;
    this.peerRank = peerRank;
    this.peerAddress = peerAddress;
    this.operation = operation;
  }

  /** The rank that observed the failure. */
  public int rank() {
    return rank;
  }

  /** The peer involved, or -1 when the failure is not tied to one peer. */
  public int peerRank() {
    return peerRank;
  }

  /** The peer's {@code host:port}, or {@code null} when the failure is not tied to one peer. */
  public String peerAddress() {
    return peerAddress;
  }

  /** The operation that failed, e.g. {@code allReduce}, {@code broadcast}, {@code connect}. */
  public String operation() {
    return operation;
  }
}
