package dev.sparktrainer.collective;

import java.net.InetSocketAddress;

/** Parses and formats {@code host:port} and {@code [ipv6]:port}. */
final class PeerAddress {
  private PeerAddress() {}

  static InetSocketAddress parse(String address) {
    if (address == null) {
      throw new IllegalArgumentException("Invalid peer address null: expected host:port");
    }
    int colon = address.lastIndexOf(':');
    if (colon <= 0 || colon == address.length() - 1) {
      throw new IllegalArgumentException(
          "Invalid peer address '" + address + "': expected host:port or [ipv6]:port");
    }
    String host = address.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port;
    try {
      port = Integer.parseInt(address.substring(colon + 1));
    } catch (NumberFormatException e) {
      port = -1;
    }
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException(
          "Invalid peer address '" + address + "': port must be 1..65535");
    }
    return InetSocketAddress.createUnresolved(host, port);
  }

  static String format(String host, int port) {
    return (host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port;
  }
}
