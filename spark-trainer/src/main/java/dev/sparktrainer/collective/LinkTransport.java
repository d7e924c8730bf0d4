package dev.sparktrainer.collective;

/**
 * How the data to or from one ring neighbour travels (see {@link Communicator#rightTransport()}).
 */
public enum LinkTransport {
  /** A plain TCP connection. */
  TCP,
  /** A TCP connection inside TLS. */
  TLS,
  /**
   * A memory-mapped file shared with a neighbour on the same host; the authenticated TCP connection
   * stays open beside it for wake-ups and to notice the peer's death.
   */
  SHARED_MEMORY
}
