package dev.sparktrainer.collective;

/** A malformed or unexpected frame from a neighbour. */
final class ProtocolException extends LinkException {
  private static final long serialVersionUID = 1L;

  ProtocolException(Link link, String what) {
    super(
        "protocol error from rank " + link.peerRank + " at " + link.peerAddress + ": " + what,
        link,
        null);
  }
}
