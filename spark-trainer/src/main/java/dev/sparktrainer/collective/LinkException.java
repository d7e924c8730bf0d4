package dev.sparktrainer.collective;

import java.io.IOException;

/** A failure tied to one link; the message reads "... rank R at host:port". */
class LinkException extends IOException {
  private static final long serialVersionUID = 1L;
  final transient Link link;

  LinkException(Link link, String what, Throwable cause) {
    super(what + " rank " + link.peerRank + " at " + link.peerAddress, cause);
    this.link = link;
  }

  LinkException(String message, Link link, Throwable cause) {
    super(message, cause);
    this.link = link;
  }
}
