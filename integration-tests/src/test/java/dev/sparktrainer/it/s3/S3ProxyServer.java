package dev.sparktrainer.it.s3;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.HttpURLConnection;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * s3proxy (org.gaul:s3proxy, the jar with its dependencies that the build copies to {@code
 * target/s3proxy-lib}) as a separate JVM: a real S3 API server (Jetty, AWS signature V2/V4 checks,
 * the S3 REST and XML protocol) on 127.0.0.1. It runs with its own class path, so its Jetty, Guava
 * and jclouds never meet Spark's. Stopped by process id.
 *
 * <p>Objects are kept by jclouds' in-memory {@code transient} store. The on-disk stores were tried
 * and do not fit: with s3proxy 2.7.0's {@code filesystem} provider every delete of a directory
 * marker whose directory is not empty sleeps 1 s and retries 10 times inside jclouds ({@code
 * org.jclouds.filesystem.util.Utils#delete}), which adds 10 s to every Spark job commit (the
 * FileOutputCommitter's cleanup deletes the {@code _temporary/} markers): the S3 tests took 217 s
 * instead of about 40; its {@code filesystem-nio2} provider makes s3a's directory renames fail
 * ("Could not rename ..._temporary/0/_temporary/attempt_..."), and s3proxy 3.3.0's (a 103 MB jar)
 * answers HTTP 500 to the DeleteObjects of directory markers.
 */
final class S3ProxyServer implements AutoCloseable {
  private static final Duration STARTUP = Duration.ofSeconds(90);

  private final Process process;
  private final String endpoint;
  private final Path log;

  private S3ProxyServer(Process process, String endpoint, Path log) {
    this.process = process;
    this.endpoint = endpoint;
    this.log = log;
  }

  /** The s3proxy jar the build copied, found from the working directory Failsafe runs in. */
  static Path jar() {
    Path p = Paths.get("target", "s3proxy-lib", "s3proxy.jar").toAbsolutePath();
    if (!Files.isRegularFile(p)) {
      throw new IllegalStateException(
          "No s3proxy at "
              + p
              + ": run through Maven (mvn -pl integration-tests verify), which copies it there");
    }
    return p;
  }

  /**
   * Starts s3proxy on a free loopback port, accepting requests signed with the given credentials,
   * and waits until it answers HTTP. Its configuration and log go to {@code workDir}.
   */
  static S3ProxyServer start(Path workDir, String identity, String credential)
      throws IOException, InterruptedException {
    Files.createDirectories(workDir);
    IOException last = null;
    for (int attempt = 0;
        attempt < 3;
        attempt++) { // the free port may be taken before s3proxy binds it
      int port = freePort();
      String endpoint = "http://127.0.0.1:" + port;
      Path conf = workDir.resolve("s3proxy.conf");
      Files.write(
          conf,
          List.of(
              "s3proxy.endpoint=" + endpoint,
              "s3proxy.authorization=aws-v2-or-v4",
              "s3proxy.identity=" + identity,
              "s3proxy.credential=" + credential,
              "jclouds.provider=transient",
              "jclouds.identity=" + identity,
              "jclouds.credential=" + credential),
          StandardCharsets.UTF_8);
      Path log = workDir.resolve("s3proxy-" + port + ".log");
      String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
      ProcessBuilder pb =
          new ProcessBuilder(
              java,
              "-Xmx384m",
              "-cp",
              jar().toString(),
              "org.gaul.s3proxy.Main",
              "--properties",
              conf.toString());
      pb.environment().put("LOG_LEVEL", "warn"); // s3proxy's logback.xml reads it
      pb.redirectErrorStream(true).redirectOutput(log.toFile());
      Process p = pb.start();
      S3ProxyServer server = new S3ProxyServer(p, endpoint, log);
      try {
        server.awaitReady();
        return server;
      } catch (IOException e) {
        last = e;
        server.close();
      }
    }
    throw last;
  }

  /** {@code http://127.0.0.1:PORT}. */
  String endpoint() {
    return endpoint;
  }

  long pid() {
    return process.pid();
  }

  private void awaitReady() throws IOException, InterruptedException {
    long deadline = System.nanoTime() + STARTUP.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IOException("s3proxy exited with " + process.exitValue() + ": " + logTail());
      }
      try {
        HttpURLConnection c =
            (HttpURLConnection) URI.create(endpoint + "/").toURL().openConnection();
        c.setConnectTimeout(1000);
        c.setReadTimeout(2000);
        int code = c.getResponseCode(); // 403 for an anonymous request: it is serving
        c.disconnect();
        if (code > 0) {
          return;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      process.waitFor(250, TimeUnit.MILLISECONDS);
    }
    throw new IOException(
        "s3proxy did not answer on " + endpoint + " within " + STARTUP + ": " + logTail());
  }

  String logTail() {
    try {
      List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Stops the process (by its id, SIGTERM then SIGKILL) and waits for it. */
  @Override
  public void close() throws InterruptedException {
    ProcessHandle h = process.toHandle();
    h.destroy();
    if (!process.waitFor(15, TimeUnit.SECONDS)) {
      h.destroyForcibly();
      process.waitFor(15, TimeUnit.SECONDS);
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }
}
