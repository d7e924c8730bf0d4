package dev.sparktrainer.collective;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

/**
 * One rank in its own JVM, for {@link MultiProcessTest}: {@code RankMain rank n scenario
 * [shm-dir|tcp]} (shared memory in that directory, or TCP only; default shared memory in {@code
 * /dev/shm}). Scenarios: {@code verify} (every type and op against the closed form, prints digests
 * of the result bits), {@code loop} (large all-reduces until something breaks, then {@code FAILED
 * message}).
 */
public final class RankMain {
  private RankMain() {}

  public static void main(String[] args) throws Exception {
    int rank = Integer.parseInt(args[0]);
    int n = Integer.parseInt(args[1]);
    String scenario = args[2];
    String transport = args.length > 3 ? args[3] : null;
    JobSecret secret = JobSecret.fromHex(System.getenv(ProcessRing.SECRET_ENV));
    RingListener listener = RingListener.bind("127.0.0.1");
    System.out.println("ADDR " + listener.address());
    System.out.flush();
    String line =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
    List<String> peers = Arrays.asList(line.substring("PEERS ".length()).split(","));
    int code = 0;
    try (Communicator c =
        Communicator.builder()
            .setRank(rank)
            .setPeers(peers)
            .setSecret(secret)
            .setListener(listener)
            .optConnectTimeout(Duration.ofSeconds(60))
            .optOperationTimeout(Duration.ofSeconds(30))
            .optChunkBytes(64 * 1024)
            .optSharedMemory(!"tcp".equals(transport))
            .optSharedMemoryDirectory(
                transport == null || transport.equals("tcp")
                    ? Communicator.DEFAULT_SHARED_MEMORY_DIRECTORY
                    : Path.of(transport))
            .build()) {
      System.out.println("READY");
      System.out.println("TRANSPORT " + c.leftTransport() + " " + c.rightTransport());
      if (scenario.equals("verify")) {
        MessageDigest all = MessageDigest.getInstance("SHA-256");
        for (ElementType type : ElementType.values()) {
          for (ReduceOp op : ReduceOp.values()) {
            for (int count : new int[] {0, 1, n + 1, 1001, 700_001}) {
              byte[] got = Values.allReduceArray(c, type, op, count);
              if (!Arrays.equals(got, Values.expected(type, op, n, count))) {
                System.out.println("MISMATCH " + type + " " + op + " " + count);
                code = 1;
              }
              all.update(got);
            }
          }
        }
        List<byte[]> gathered = c.allGather(new byte[rank * 100_000]);
        for (int r = 0; r < n; r++) {
          if (gathered.get(r).length != r * 100_000) {
            System.out.println("MISMATCH allGather " + r);
            code = 1;
          }
        }
        System.out.println("DIGEST " + HexFormat.of().formatHex(all.digest()));
      } else if (scenario.equals("loop")) {
        float[] a = new float[2 << 20];
        try {
          for (int it = 0; ; it++) {
            c.allReduce(a, ReduceOp.SUM);
            System.out.println("ITER " + it);
          }
        } catch (CollectiveException e) {
          System.out.println("FAILED " + e.getMessage().replace('\n', ' '));
          code = 3;
        }
      }
    }
    System.out.println("THREADS " + Rings.liveCommunicatorThreads());
    System.out.flush();
    System.exit(code);
  }
}
