package dev.sparktrainer.collective;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A training job's shared secret. The driver makes one with {@link #generate()} and ships it to the
 * tasks (e.g. as {@link #toHex()}); every ring connection proves knowledge of it with an
 * HMAC-SHA256 challenge-response before any data flows, and every frame carries the {@link
 * #jobId()} derived from it, so connections from another job are told apart.
 *
 * <p>{@link #toString()} never prints the secret.
 */
public final class JobSecret implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final int GENERATED_BYTES = 32;
  private static final int MIN_BYTES = 16;
  private static final SecureRandom RANDOM = new SecureRandom();

  private final byte[] key;

  private JobSecret(byte[] key) {
    if (key.length < MIN_BYTES) {
      throw new IllegalArgumentException(
          "Invalid job secret: " + key.length + " bytes, expected at least " + MIN_BYTES);
    }
    this.key = key.clone();
  }

  /** A new random 256-bit secret from {@link SecureRandom}. */
  public static JobSecret generate() {
    byte[] key = new byte[GENERATED_BYTES];
    RANDOM.nextBytes(key);
    return new JobSecret(key);
  }

  /** A secret from raw bytes (at least 16). */
  public static JobSecret fromBytes(byte[] key) {
    return new JobSecret(key);
  }

  /** A secret from {@link #toHex()}'s form. */
  public static JobSecret fromHex(String hex) {
    try {
      return new JobSecret(HexFormat.of().parseHex(hex));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("Invalid job secret: not a hex string of even length", e);
    }
  }

  /** A copy of the secret's bytes. */
  public byte[] bytes() {
    return key.clone();
  }

  /** The secret as lowercase hex, for shipping to tasks (keep it out of logs and command lines). */
  public String toHex() {
    return HexFormat.of().formatHex(key);
  }

  /** A public identifier of the job, derived from the secret; it does not reveal the secret. */
  public long jobId() {
    byte[] mac = hmac(key, "spark-trainer job id".getBytes(StandardCharsets.US_ASCII));
    long id = 0;
    for (int i = 0; i < Long.BYTES; i++) {
      id = (id << 8) | (mac[i] & 0xff);
    }
    return id;
  }

  static byte[] hmac(byte[] key, byte[] message) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      return mac.doFinal(message);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available in this JVM", e);
    }
  }

  byte[] hmac(byte[] message) {
    return hmac(key, message);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof JobSecret && MessageDigest.isEqual(key, ((JobSecret) o).key);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(key);
  }

  @Override
  public String toString() {
    return "JobSecret[jobId=" + Long.toHexString(jobId()) + "]";
  }
}
