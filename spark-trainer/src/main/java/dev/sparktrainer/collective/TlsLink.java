package dev.sparktrainer.collective;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.cert.Certificate;
import java.security.cert.CertificateEncodingException;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;
import javax.net.ssl.SSLSocket;

/**
 * A TLS link: an {@link SSLSocket} layered on a blocking channel. Reads wait with {@code
 * SO_TIMEOUT}; a write blocked by a peer that stops reading is ended by the operation's deadline,
 * which aborts the link (closing the raw socket unblocks the writer).
 *
 * <p>Channel binding ({@link #channelBinding()}): Java 17's JSSE exposes neither RFC 5705/8446
 * keying-material exporters nor the Finished messages ({@code tls-unique}), so the handshake's HMAC
 * proofs cannot be bound to this connection's secrets. They are bound to what both ends see alike
 * and a relay cannot forge: the client's and the server's leaf certificates of this TLS connection.
 * A relay that terminates TLS with each rank presents its own certificate to both, so rank A proves
 * "A to relay" while rank B expects "relay to B", and the proofs do not verify. Not covered: a
 * relay that holds a rank's own private key (with one key shared by all ranks, whoever has that key
 * store is a rank); the session id and the TLS randoms are left out on purpose, since a relay can
 * choose or copy them on both of its connections.
 */
final class TlsLink extends Link {
  private static final int SCRATCH = 64 * 1024;

  private final SocketChannel raw;
  private final SSLSocket ssl;
  private final InputStream in;
  private final OutputStream out;
  private final byte[] readScratch = new byte[SCRATCH];
  private final byte[] writeScratch = new byte[SCRATCH];
  private final byte[] binding;
  private volatile boolean aborted;

  private TlsLink(
      SocketChannel raw, SSLSocket ssl, boolean client, int peerRank, String peerAddress)
      throws IOException {
    super(peerRank, peerAddress);
    this.raw = raw;
    this.ssl = ssl;
    this.in = ssl.getInputStream();
    this.out = ssl.getOutputStream();
    this.binding = binding(ssl.getSession(), client);
  }

  private static final byte[] BINDING_LABEL =
      "spark-trainer tls certificates v1".getBytes(StandardCharsets.US_ASCII);

  /**
   * SHA-256 of (label, client leaf certificate, server leaf certificate), each DER-encoded and
   * length-prefixed (empty where a side presented none): the same at both ends of one connection.
   */
  static byte[] binding(SSLSession session, boolean client) throws IOException {
    byte[] local = leaf(session.getLocalCertificates());
    byte[] peer;
    try {
      peer = leaf(session.getPeerCertificates());
    } catch (SSLPeerUnverifiedException e) {
      peer = new byte[0]; // a client that was not asked for a certificate
    }
    byte[] clientCert = client ? local : peer;
    byte[] serverCert = client ? peer : local;
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      sha.update(BINDING_LABEL);
      sha.update(ByteBuffer.allocate(4).putInt(clientCert.length).array());
      sha.update(clientCert);
      sha.update(ByteBuffer.allocate(4).putInt(serverCert.length).array());
      sha.update(serverCert);
      return sha.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is not available in this JVM", e);
    }
  }

  private static byte[] leaf(Certificate[] chain) throws IOException {
    if (chain == null || chain.length == 0) {
      return new byte[0];
    }
    try {
      return chain[0].getEncoded();
    } catch (CertificateEncodingException e) {
      throw new IOException("cannot encode the TLS certificate: " + e.getMessage(), e);
    }
  }

  @Override
  byte[] channelBinding() {
    return binding.clone();
  }

  /** Runs the TLS handshake on a connected blocking channel, as client or server. */
  static TlsLink open(
      SocketChannel raw,
      SSLContext context,
      boolean client,
      boolean needClientAuth,
      int peerRank,
      String peerAddress,
      long deadlineNanos)
      throws IOException {
    raw.configureBlocking(true);
    InetSocketAddress remote = (InetSocketAddress) raw.getRemoteAddress();
    SSLSocket ssl =
        (SSLSocket)
            context
                .getSocketFactory()
                .createSocket(raw.socket(), remote.getHostString(), remote.getPort(), true);
    ssl.setUseClientMode(client);
    if (!client) {
      ssl.setNeedClientAuth(needClientAuth);
    }
    long ms = millisLeft(deadlineNanos);
    if (ms == 0) {
      throw new SocketTimeoutException("timed out before the TLS handshake");
    }
    // The read timeout bounds each read only: a peer sending a byte now and then would hold the
    // handshake (and its thread) forever. The deadline closes the socket, however the peer drips.
    ssl.setSoTimeout((int) Math.min(Integer.MAX_VALUE, ms));
    try (SetupDeadline deadline = SetupDeadline.arm(raw, deadlineNanos)) {
      try {
        ssl.startHandshake();
      } catch (IOException e) {
        if (deadline.fired()) {
          SocketTimeoutException t =
              new SocketTimeoutException("the TLS handshake did not complete within " + ms + " ms");
          t.initCause(e);
          throw t;
        }
        throw e;
      }
      if (deadline.fired()) { // it fired as the handshake ended: closed
        throw new SocketTimeoutException("the TLS handshake did not complete within " + ms + " ms");
      }
    }
    return new TlsLink(raw, ssl, client, peerRank, peerAddress);
  }

  @Override
  void readFully(ByteBuffer dst, long deadlineNanos) throws IOException {
    while (dst.hasRemaining()) {
      checkOpen();
      long ms = millisLeft(deadlineNanos);
      if (ms == 0) {
        throw new SocketTimeoutException("timed out waiting for data");
      }
      ssl.setSoTimeout((int) Math.min(Integer.MAX_VALUE, ms));
      int n;
      try {
        n = in.read(readScratch, 0, Math.min(readScratch.length, dst.remaining()));
      } catch (SocketTimeoutException e) {
        continue; // loop re-checks the deadline
      } catch (IOException e) {
        checkOpen();
        throw e;
      }
      if (n < 0) {
        throw new EOFException("connection closed by the peer");
      }
      dst.put(readScratch, 0, n);
    }
  }

  @Override
  void writeFully(ByteBuffer a, ByteBuffer b, long deadlineNanos) throws IOException {
    // Coalesce the header with the payload into TLS records of up to SCRATCH bytes.
    int filled = 0;
    try {
      for (ByteBuffer src = a; src != null; src = src == a ? b : null) {
        while (src.hasRemaining()) {
          int n = Math.min(src.remaining(), writeScratch.length - filled);
          src.get(writeScratch, filled, n);
          filled += n;
          if (filled == writeScratch.length) {
            checkOpen();
            out.write(writeScratch, 0, filled);
            filled = 0;
          }
        }
      }
      if (filled > 0) {
        checkOpen();
        out.write(writeScratch, 0, filled);
      }
      out.flush();
    } catch (IOException e) {
      checkOpen();
      throw e;
    }
  }

  private void checkOpen() throws IOException {
    if (aborted) {
      throw new AsynchronousCloseException();
    }
  }

  @Override
  LinkTransport transport() {
    return LinkTransport.TLS;
  }

  @Override
  SocketChannel channel() {
    return raw;
  }

  @Override
  void abort() {
    aborted = true;
    // Close the raw socket only: SSLSocket.close() would try to send close_notify and could wait
    // for
    // a writer blocked on a peer that stopped reading.
    try {
      raw.close();
    } catch (IOException ignored) {
      // nothing left to release
    }
  }

  SSLSocket sslSocket() {
    return ssl;
  }
}
