package dev.sparktrainer.train;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The link of bin/bench-scaling: its rate set through {@code --link-command GBPS}
 * (bin/bench-scaling --set-link, which runs {@code tc} on the namespace's loopback), and the check
 * of what TCP gets through it at 1 Gbit/s.
 */
final class ScalingLink {
  private ScalingLink() {}

  /**
   * Runs {@code linkCommand GBPS} (in this namespace: sets or removes the loopback's tbf qdisc).
   */
  static void setLink(String linkCommand, String gbps) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(linkCommand.trim().split("\\s+")));
    cmd.add(gbps);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    byte[] output;
    try (InputStream in = p.getInputStream()) {
      output = in.readAllBytes();
    }
    if (!p.waitFor(30, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new IllegalStateException(
          "Setting the link to " + gbps + " Gbit/s did not finish in 30 s: " + cmd);
    }
    if (p.exitValue() != 0) {
      throw new IllegalStateException(
          "Setting the link to "
              + gbps
              + " Gbit/s failed (exit "
              + p.exitValue()
              + "): "
              + cmd
              + ": "
              + new String(output, StandardCharsets.UTF_8).trim());
    }
  }

  /**
   * Sets the link to 1 Gbit/s and measures TCP over 127.0.0.1 for 1.5 s with one stream, then with
   * two at once (they share the queue); removes the limit again. Gbit/s of payload: {one, two in
   * total}.
   */
  static double[] linkCheck(String linkCommand) throws Exception {
    setLink(linkCommand, "1");
    try {
      return new double[] {streams(1, 1500), streams(2, 1500)};
    } finally {
      setLink(linkCommand, "0");
    }
  }

  private static double streams(int n, long millis) throws Exception {
    AtomicLong received = new AtomicLong();
    List<Thread> threads = new ArrayList<>();
    List<Socket> sockets = new ArrayList<>();
    try (ServerSocket server = new ServerSocket(0, n, InetAddress.getByName("127.0.0.1"))) {
      server.setSoTimeout(10_000);
      for (int i = 0; i < n; i++) {
        Socket client = new Socket(InetAddress.getByName("127.0.0.1"), server.getLocalPort());
        Socket peer = server.accept();
        sockets.add(client);
        sockets.add(peer);
        peer.setSoTimeout(10_000);
        threads.add(
            new Thread(
                () -> {
                  byte[] buf = new byte[1 << 16];
                  try (InputStream in = peer.getInputStream()) {
                    for (int r; (r = in.read(buf)) > 0; ) {
                      received.addAndGet(r);
                    }
                  } catch (IOException e) {
                    // the reader ends when the writer closes (or the socket times out)
                  }
                },
                "link-check-reader-" + i));
      }
      long t0 = System.nanoTime();
      long end = t0 + TimeUnit.MILLISECONDS.toNanos(millis);
      for (int i = 0; i < n; i++) {
        Socket client = sockets.get(2 * i);
        threads.add(
            new Thread(
                () -> {
                  byte[] buf = new byte[1 << 16];
                  try (OutputStream os = client.getOutputStream()) {
                    while (System.nanoTime() < end) {
                      os.write(buf);
                    }
                  } catch (IOException e) {
                    throw new UncheckedIOException(e);
                  }
                },
                "link-check-writer-" + i));
      }
      threads.forEach(Thread::start);
      for (Thread t : threads) {
        t.join(30_000);
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      return received.get() * 8 / seconds / 1e9;
    } finally {
      for (Socket s : sockets) {
        s.close();
      }
    }
  }
}
