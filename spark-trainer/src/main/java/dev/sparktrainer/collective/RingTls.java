package dev.sparktrainer.collective;

import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.util.Objects;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS for the ring's sockets as a serializable recipe: key store and trust store files that exist
 * on every executor (shipped with {@code --files}, mounted from a Kubernetes secret, or provisioned
 * on the nodes), read where the ring is formed. Every frame is then encrypted and
 * integrity-protected, and each side checks the other's certificate against the trust store (mutual
 * TLS); the HMAC handshake with the job's secret still runs inside.
 *
 * <pre>{@code
 * RingTls tls = RingTls.builder()
 *     .setKeyStore("ring.p12", password)          // relative: the task's working directory
 *     .optTrustStore("ring-trust.p12", password)   // default: the key store (a shared self-signed key)
 *     .build();
 * DistributedTrainer.builder()...optRingTls(tls)
 * }</pre>
 *
 * <p>Passwords travel to the tasks inside the task closure, as the job's ring secret does: enable
 * {@code spark.authenticate} and {@code spark.network.crypto.enabled} (or {@code
 * spark.ssl.rpc.enabled}) so that Spark's own traffic is encrypted too.
 */
public final class RingTls implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String keyStore;
  private final String keyStorePassword;
  private final String keyStoreType;
  private final String trustStore;
  private final String trustStorePassword;

  private RingTls(Builder b) {
    this.keyStore = b.keyStore;
    this.keyStorePassword = b.keyStorePassword;
    this.keyStoreType = b.keyStoreType;
    this.trustStore = b.trustStore != null ? b.trustStore : b.keyStore;
    this.trustStorePassword = b.trustStore != null ? b.trustStorePassword : b.keyStorePassword;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The key store's path as given. */
  public String keyStore() {
    return keyStore;
  }

  /** The trust store's path as given (the key store's when none was set). */
  public String trustStore() {
    return trustStore;
  }

  /**
   * Loads the stores and makes the context. Errors name the file and what was wrong with it
   * (missing, wrong password, not a key store of the type).
   */
  public SSLContext sslContext() {
    try {
      KeyStore ks = load(keyStore, keyStorePassword, "key store");
      KeyManagerFactory kmf =
          KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      kmf.init(ks, keyStorePassword.toCharArray());
      KeyStore ts =
          trustStore.equals(keyStore) && Objects.equals(trustStorePassword, keyStorePassword)
              ? ks
              : load(trustStore, trustStorePassword, "trust store");
      TrustManagerFactory tmf =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(ts);
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
      return ctx;
    } catch (GeneralSecurityException e) {
      throw new IllegalArgumentException(
          "Ring TLS: cannot use key store "
              + keyStore
              + " / trust store "
              + trustStore
              + ": "
              + e.getMessage(),
          e);
    }
  }

  private KeyStore load(String path, String password, String what) throws GeneralSecurityException {
    Path p = Path.of(path).toAbsolutePath();
    if (!Files.isRegularFile(p)) {
      throw new IllegalArgumentException(
          "Ring TLS "
              + what
              + " "
              + p
              + " does not exist on this host ("
              + hostName()
              + "): ship it with --files or provision it on every executor");
    }
    KeyStore ks = KeyStore.getInstance(keyStoreType);
    try (InputStream in = Files.newInputStream(p)) {
      ks.load(in, password.toCharArray());
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "Ring TLS "
              + what
              + " "
              + p
              + ": cannot read it as "
              + keyStoreType
              + " (wrong password or type?): "
              + e.getMessage(),
          e);
    }
    return ks;
  }

  private static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      return "unknown host";
    }
  }

  @Override
  public String toString() {
    return "RingTls{keyStore="
        + keyStore
        + ", trustStore="
        + trustStore
        + ", type="
        + keyStoreType
        + "}";
  }

  /** Builder: {@code setX} required, {@code optX} optional. */
  public static final class Builder {
    private String keyStore;
    private String keyStorePassword;
    private String keyStoreType = "PKCS12";
    private String trustStore;
    private String trustStorePassword;

    private Builder() {}

    /** This host's certificate and private key. Required. */
    public Builder setKeyStore(String path, String password) {
      this.keyStore = path;
      this.keyStorePassword = password;
      return this;
    }

    /** The certificates a peer's must chain to. Default: the key store. */
    public Builder optTrustStore(String path, String password) {
      this.trustStore = path;
      this.trustStorePassword = password;
      return this;
    }

    /** Key store type of both stores. Default PKCS12 (also JKS). */
    public Builder optType(String type) {
      this.keyStoreType = type;
      return this;
    }

    public RingTls build() {
      if (keyStore == null || keyStore.isBlank()) {
        throw new IllegalArgumentException("Ring TLS: a key store is required (setKeyStore)");
      }
      if (keyStorePassword == null) {
        throw new IllegalArgumentException("Ring TLS: the key store's password is required");
      }
      if (trustStore != null && trustStorePassword == null) {
        throw new IllegalArgumentException("Ring TLS: the trust store's password is required");
      }
      if (!keyStoreType.equals("PKCS12") && !keyStoreType.equals("JKS")) {
        throw new IllegalArgumentException(
            "Invalid ring TLS key store type '" + keyStoreType + "': expected PKCS12 or JKS");
      }
      return new RingTls(this);
    }
  }
}
