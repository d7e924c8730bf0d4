package dev.sparktrainer.collective;

import java.io.EOFException;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;

/**
 * Mutual authentication of a new connection, before any data flows: each side sends a fresh nonce
 * and proves the job secret with HMAC-SHA256 over both nonces, both ranks, the job id, a direction
 * label (so one side's proof cannot be reflected back as the other's) and the link's channel
 * binding ({@link Link#channelBinding()}: empty on plain TCP; with TLS, a hash of the two
 * certificates of this TLS connection, so that proofs relayed between two TLS connections do not
 * verify).
 *
 * <pre>
 * client -> server  HELLO     magic version type jobId fromRank toRank worldSize nonceC
 * server -> client  CHALLENGE magic version type nonceS HMAC("server", jobId, server, client, nonceC, nonceS, binding)
 * client -> server  RESPONSE  magic version type HMAC("client", jobId, client, server, nonceS, nonceC, binding)
 * server -> client  ACCEPT    magic version type
 * </pre>
 */
final class Handshake {
  static final int NONCE_BYTES = 32;
  static final int MAC_BYTES = 32;
  static final short HELLO = 1;
  static final short CHALLENGE = 2;
  static final short RESPONSE = 3;
  static final short ACCEPT = 4;
  static final int HELLO_BYTES = 8 + 8 + 12 + NONCE_BYTES;
  static final int CHALLENGE_BYTES = 8 + NONCE_BYTES + MAC_BYTES;
  static final int RESPONSE_BYTES = 8 + MAC_BYTES;
  static final int ACCEPT_BYTES = 8;

  private static final SecureRandom RANDOM = new SecureRandom();
  private static final byte[] SERVER_LABEL =
      "spark-trainer ring server".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] CLIENT_LABEL =
      "spark-trainer ring client".getBytes(StandardCharsets.US_ASCII);

  /** The peer is not an authenticated member of this ring. */
  static final class HandshakeException extends IOException {
    private static final long serialVersionUID = 1L;

    HandshakeException(String message) {
      super(message);
    }
  }

  private Handshake() {}

  /** Client side: this rank connected to {@code serverRank}. */
  static void client(
      Link link, JobSecret secret, int myRank, int serverRank, int worldSize, long deadline)
      throws IOException {
    long jobId = secret.jobId();
    byte[] nonceC = nonce();
    ByteBuffer hello = ByteBuffer.allocate(HELLO_BYTES);
    hello.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(HELLO).putLong(jobId);
    hello.putInt(myRank).putInt(serverRank).putInt(worldSize).put(nonceC).flip();
    link.writeFully(hello, null, deadline);

    ByteBuffer challenge = ByteBuffer.allocate(CHALLENGE_BYTES);
    readMessage(link, challenge, CHALLENGE, deadline, "the challenge");
    byte[] nonceS = new byte[NONCE_BYTES];
    byte[] macS = new byte[MAC_BYTES];
    challenge.get(nonceS).get(macS);
    byte[] binding = link.channelBinding();
    if (!MessageDigest.isEqual(
        macS, mac(secret, SERVER_LABEL, jobId, serverRank, myRank, nonceC, nonceS, binding))) {
      throw new HandshakeException(
          "the peer failed to prove the job secret (not a peer of this job"
              + (binding.length > 0 ? ", or a relay between two TLS connections)" : ")"));
    }
    ByteBuffer response = ByteBuffer.allocate(RESPONSE_BYTES);
    response.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(RESPONSE);
    response
        .put(mac(secret, CLIENT_LABEL, jobId, myRank, serverRank, nonceS, nonceC, binding))
        .flip();
    link.writeFully(response, null, deadline);
    ByteBuffer accept = ByteBuffer.allocate(ACCEPT_BYTES);
    try {
      readMessage(link, accept, ACCEPT, deadline, "the acceptance");
    } catch (EOFException e) {
      throw new HandshakeException("the peer rejected this rank's proof of the job secret");
    }
  }

  /**
   * Server side: expects {@code expectedClient} of this job; throws if the caller is anyone else.
   * The caller's HELLO must arrive by {@code helloDeadline} (a short pre-authentication deadline: a
   * peer sends it at once), the rest of the exchange by {@code deadline}.
   */
  static void server(
      Link link,
      JobSecret secret,
      int myRank,
      int expectedClient,
      int worldSize,
      long helloDeadline,
      long deadline)
      throws IOException {
    server(link, secret, myRank, expectedClient, worldSize, helloDeadline, deadline, null);
  }

  /**
   * {@link #server}, the socket closed by {@code setup} if the HELLO has not arrived by {@code
   * helloDeadline} or the rest by {@code deadline}: one read of a TLS link waits for a whole
   * record, each socket read under it getting the full timeout, so only closing the socket bounds a
   * peer that drips its bytes.
   */
  static void server(
      Link link,
      JobSecret secret,
      int myRank,
      int expectedClient,
      int worldSize,
      long helloDeadline,
      long deadline,
      SetupDeadline setup)
      throws IOException {
    long jobId = secret.jobId();
    ByteBuffer hello = ByteBuffer.allocate(HELLO_BYTES);
    long helloBy = Math.min(helloDeadline, deadline);
    if (setup != null) {
      setup.moveTo(helloBy);
    }
    try {
      readMessage(link, hello, HELLO, helloBy, "hello");
    } catch (IOException e) {
      if (e instanceof SocketTimeoutException || (setup != null && setup.fired())) {
        throw new HandshakeException(
            "no complete hello within the pre-authentication deadline ("
                + hello.position()
                + " of "
                + HELLO_BYTES
                + " bytes)");
      }
      throw e;
    }
    if (setup != null) {
      setup.moveTo(deadline);
    }
    long peerJob = hello.getLong();
    int from = hello.getInt();
    int to = hello.getInt();
    int world = hello.getInt();
    byte[] nonceC = new byte[NONCE_BYTES];
    hello.get(nonceC);
    if (peerJob != jobId) {
      throw new HandshakeException(
          "foreign job " + Long.toHexString(peerJob) + ", expected job " + Long.toHexString(jobId));
    }
    if (to != myRank || world != worldSize || from != expectedClient) {
      throw new HandshakeException(
          "claims to be rank "
              + from
              + " of "
              + world
              + " connecting to rank "
              + to
              + ", expected rank "
              + expectedClient
              + " of "
              + worldSize
              + " connecting to rank "
              + myRank);
    }
    byte[] nonceS = nonce();
    byte[] binding = link.channelBinding();
    ByteBuffer challenge = ByteBuffer.allocate(CHALLENGE_BYTES);
    challenge.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(CHALLENGE).put(nonceS);
    challenge.put(mac(secret, SERVER_LABEL, jobId, myRank, from, nonceC, nonceS, binding)).flip();
    link.writeFully(challenge, null, deadline);
    ByteBuffer response = ByteBuffer.allocate(RESPONSE_BYTES);
    readMessage(link, response, RESPONSE, deadline, "the response");
    byte[] macC = new byte[MAC_BYTES];
    response.get(macC);
    if (!MessageDigest.isEqual(
        macC, mac(secret, CLIENT_LABEL, jobId, from, myRank, nonceS, nonceC, binding))) {
      throw new HandshakeException("wrong proof of the job secret");
    }
    ByteBuffer accept = ByteBuffer.allocate(ACCEPT_BYTES);
    accept.putInt(Wire.MAGIC).putShort(Wire.VERSION).putShort(ACCEPT).flip();
    link.writeFully(accept, null, deadline);
  }

  private static void readMessage(Link link, ByteBuffer buf, short type, long deadline, String what)
      throws IOException {
    link.readFully(buf, deadline);
    buf.flip();
    int magic = buf.getInt();
    short version = buf.getShort();
    short actualType = buf.getShort();
    if (magic != Wire.MAGIC) {
      throw new HandshakeException(
          "not a spark-trainer ring peer (bad magic 0x"
              + Integer.toHexString(magic)
              + " in "
              + what
              + ")");
    }
    if (version != Wire.VERSION) {
      throw new HandshakeException(
          "protocol version " + version + ", this rank speaks " + Wire.VERSION);
    }
    if (actualType != type) {
      throw new HandshakeException(
          "expected " + what + " (type " + type + "), got type " + actualType);
    }
  }

  static byte[] nonce() {
    byte[] n = new byte[NONCE_BYTES];
    RANDOM.nextBytes(n);
    return n;
  }

  static byte[] mac(
      JobSecret secret,
      byte[] label,
      long jobId,
      int prover,
      int verifier,
      byte[] n1,
      byte[] n2,
      byte[] binding) {
    ByteBuffer m =
        ByteBuffer.allocate(label.length + 8 + 8 + n1.length + n2.length + 4 + binding.length);
    m.put(label).putLong(jobId).putInt(prover).putInt(verifier).put(n1).put(n2);
    m.putInt(binding.length).put(binding);
    return secret.hmac(m.array());
  }
}
