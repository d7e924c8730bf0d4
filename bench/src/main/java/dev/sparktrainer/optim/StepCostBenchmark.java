package dev.sparktrainer.optim;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.jni.JniUtils;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The host-side costs of a training step, measured with the project's code and DJL on this machine
 * ({@code bin/bench-step-costs}; a benchmark, not a test). They are the measured inputs of the GPU
 * step model ({@code docs/gpu-step-model.md}, {@code bin/step-model}):
 *
 * <ol>
 *   <li>{@code java_adam}: the project's Adam ({@code
 *       OptimizerSpec.adam().build().newOptimizer(sizes) .update(...)}), one thread, ns per
 *       parameter;
 *   <li>{@code djl_adam_ops}: the same rule written with DJL NDArray operations on the CPU
 *       (in-place where DJL has them), ns per parameter, PyTorch intra-op threads = {@code
 *       --djl-threads};
 *   <li>{@code djl_adam_fused}: DJL's own {@code NDArrayEx.adamUpdate} (what DJL's Adam optimizer
 *       calls; one JNI call), for comparison;
 *   <li>copies, GB/s: a DJL CPU tensor into a preallocated direct buffer ({@code toByteBuffer()}
 *       then {@code put}: {@code tensor_to_direct}; and with {@code toByteBuffer(true)}, the
 *       zero-copy view: {@code tensor_view_to_direct}), a direct buffer into a tensor ({@code
 *       NDArray.set(Buffer)}: {@code direct_to_tensor}), direct to direct ({@code memcpy}, the
 *       baseline), and between a {@code float[]} and a direct buffer ({@code floats_to_direct},
 *       {@code direct_to_floats}).
 * </ol>
 *
 * Each measure runs {@code --rounds} times, the measures of one size interleaved so that a shared
 * machine's drift spreads over all of them; a round's figure is the median of its timed samples (a
 * sample lasts at least 5 ms), and the table shows the median, minimum and maximum of the rounds.
 * One JSON line per measure and size is appended to {@code --out}.
 *
 * <p>Why this file is long: the measures of one size run interleaved, round by round, and share the
 * {@code Result} record, the timing harness ({@code warmUp}, {@code nsPer}) and an own JSON writer
 * (each line carries the list of rounds, which the flat {@code BenchSupport.toJson} cannot write)
 * whose measure names bin/step-model reads; each keeps its correctness check beside it ({@code
 * checkOpsAdam}, the copy round trip, the aliasing check). The copy measures ({@code copies}) could
 * move out if they grow.
 *
 * <p>Usage: {@code StepCostBenchmark [--params 1000000,25000000,100000000] [--copy-mb 1,25,100]
 * [--rounds 3] [--seconds 0.4] [--djl-threads 1] [--only adam,copy] [--out FILE]}.
 */
public final class StepCostBenchmark {
  private static final long SAMPLE_NS = 5_000_000L;
  private static final float LR = 1e-3f;
  private static final float B1 = 0.9f;
  private static final float B2 = 0.999f;
  private static final float EPS = 1e-8f;

  private StepCostBenchmark() {}

  /** One measured quantity at one size: the rounds' figures. */
  private static final class Result {
    final String measure;
    final String description;
    final String sizeKey;
    final long size;
    final String unit;
    final List<Double> rounds = new ArrayList<>();
    String note;

    Result(String measure, String description, String sizeKey, long size, String unit) {
      this.measure = measure;
      this.description = description;
      this.sizeKey = sizeKey;
      this.size = size;
      this.unit = unit;
    }

    double median() {
      double[] r = rounds.stream().mapToDouble(Double::doubleValue).sorted().toArray();
      int n = r.length;
      return n % 2 == 1 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    }

    double min() {
      return rounds.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
    }

    double max() {
      return rounds.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
    }
  }

  public static void main(String[] args) throws Exception {
    long[] params = {1_000_000L, 25_000_000L, 100_000_000L};
    long[] copyMb = {1, 25, 100};
    int rounds = 3;
    double seconds = 0.4;
    int djlThreads = 1;
    String only = "adam,copy";
    Path out = Path.of("target/bench/step-costs.jsonl");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--params":
          params = longs(args[++i]);
          break;
        case "--copy-mb":
          copyMb = longs(args[++i]);
          break;
        case "--rounds":
          rounds = Integer.parseInt(args[++i]);
          break;
        case "--seconds":
          seconds = Double.parseDouble(args[++i]);
          break;
        case "--djl-threads":
          djlThreads = Integer.parseInt(args[++i]);
          break;
        case "--only":
          only = args[++i];
          break;
        case "--out":
          out = Path.of(args[++i]);
          break;
        default:
          throw new IllegalArgumentException(
              "Unknown argument "
                  + args[i]
                  + " (expected --params, --copy-mb, --rounds, --seconds, --djl-threads, --only, --out)");
      }
    }
    if (rounds < 1 || seconds <= 0 || djlThreads < 1) {
      throw new IllegalArgumentException(
          "Invalid --rounds "
              + rounds
              + ", --seconds "
              + seconds
              + " or --djl-threads "
              + djlThreads
              + ": expected >= 1, > 0 and >= 1");
    }
    String run = Instant.now().toString();
    Engine engine = Engine.getInstance();
    JniUtils.setNumThreads(djlThreads);
    System.out.printf(
        Locale.ROOT,
        "%s: %d cores, load average %.2f, Java %s, %s %s, PyTorch intra-op threads %d%n",
        run,
        Runtime.getRuntime().availableProcessors(),
        loadAverage(),
        System.getProperty("java.version"),
        engine.getEngineName(),
        engine.getVersion(),
        djlThreads);

    List<Result> results = new ArrayList<>();
    if (only.contains("adam")) {
      for (long n : params) {
        results.addAll(adam(Math.toIntExact(n), rounds, seconds));
      }
    }
    if (only.contains("copy")) {
      for (long mb : copyMb) {
        results.addAll(copies(Math.toIntExact(mb * 1_000_000L), rounds, seconds));
      }
    }

    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "%-66s %10s %10s %10s %10s  %s%n",
        "measure",
        "size",
        "median",
        "min",
        "max",
        "unit");
    for (Result r : results) {
      System.out.printf(
          Locale.ROOT,
          "%-66s %10s %10.3f %10.3f %10.3f  %s%n",
          r.description,
          r.sizeKey,
          r.median(),
          r.min(),
          r.max(),
          r.unit);
    }
    write(out, results, run, djlThreads, rounds, seconds, engine);
    System.out.println("\nJSON lines appended to " + out.toAbsolutePath());
  }

  // ----------------------------------------------------------------------------------------------
  // Adam

  private static List<Result> adam(int n, int rounds, double seconds) {
    String key = human(n);
    Result java =
        new Result(
            "java_adam",
            "Java Adam (OptimizerSpec.adam().newOptimizer.update), 1 thread",
            key,
            n,
            "ns/param");
    Result ops =
        new Result(
            "djl_adam_ops",
            "Adam as DJL NDArray ops on CPU (13 ops, in place where possible)",
            key,
            n,
            "ns/param");
    Result fused =
        new Result(
            "djl_adam_fused",
            "DJL NDArrayEx.adamUpdate on CPU (DJL's own Adam, 1 JNI call)",
            key,
            n,
            "ns/param");
    int threads = Runtime.getRuntime().availableProcessors();
    Result bucket1 =
        new Result(
            "java_adam_bucket",
            "Java Adam reading the gradient from a direct buffer"
                + " (the host placement's path: Optimizer.apply over a bucket), 1 thread",
            key,
            n,
            "ns/param");
    Result bucketT =
        new Result(
            "java_adam_bucket_mt",
            "the same split over " + threads + " threads (HostUpdater: one contiguous range each)",
            key,
            n,
            "ns/param");
    float[][] p = {pattern(n, 1)};
    float[][] g = {pattern(n, 2)};
    Optimizer optimizer =
        OptimizerSpec.adam().optLearningRate(1e-3f).build().newOptimizer(new int[] {n});
    float[] pb = pattern(n, 1);
    FloatBuffer gb =
        ByteBuffer.allocateDirect(4 * n)
            .order(ByteOrder.LITTLE_ENDIAN)
            .asFloatBuffer()
            .put(0, g[0]);
    Optimizer onBucket =
        OptimizerSpec.adam().optLearningRate(1e-3f).build().newOptimizer(new int[] {n});
    onBucket.slot(0, 0);
    onBucket.slot(1, 0);
    ExecutorService pool =
        Executors.newFixedThreadPool(
            Math.max(1, threads - 1),
            r -> {
              Thread th = new Thread(r, "bench-adam");
              th.setDaemon(true);
              return th;
            });
    Runnable bucketStep1 =
        () -> {
          onBucket.beginStep();
          onBucket.apply(0, pb, gb, 0, 0, n, LR);
        };
    Runnable bucketStepT =
        () -> {
          onBucket.beginStep();
          List<Future<?>> fs = new ArrayList<>();
          for (int k = 1; k < threads; k++) {
            int from = (int) ((long) n * k / threads);
            int to = (int) ((long) n * (k + 1) / threads);
            fs.add(pool.submit(() -> onBucket.apply(0, pb, gb, from, from, to, LR)));
          }
          onBucket.apply(0, pb, gb, 0, 0, (int) ((long) n / threads), LR);
          for (Future<?> f : fs) {
            try {
              f.get();
            } catch (Exception e) {
              throw new IllegalStateException(e);
            }
          }
        };
    warmUp(bucketStep1, seconds);
    warmUp(bucketStepT, seconds);
    for (int r = 0; r < rounds; r++) {
      bucket1.rounds.add(nsPer(bucketStep1, n, seconds));
      bucketT.rounds.add(nsPer(bucketStepT, n, seconds));
      System.out.printf(
          Locale.ROOT,
          "adam %s round %d: java on a bucket %.3f, %d threads %.3f ns/param (load %.2f)%n",
          key,
          r + 1,
          last(bucket1),
          threads,
          last(bucketT),
          loadAverage());
    }
    pool.shutdownNow();
    try (NDManager manager = NDManager.newBaseManager()) {
      checkOpsAdam(manager);
      NDArray pd = manager.create(p[0]);
      NDArray gd = manager.create(g[0]);
      NDArray md = manager.zeros(pd.getShape());
      NDArray vd = manager.zeros(pd.getShape());
      long[] t = {0};
      Runnable javaStep = () -> optimizer.update(p, g, LR);
      Runnable opsStep = () -> opsAdam(pd, gd, md, vd, ++t[0]);
      // DJL's fused update runs on the same arrays: only its time matters here (its values are
      // Adam-like and stay bounded, so the shared state does not drift into denormals or NaN).
      NDList fusedIn = new NDList(pd, gd, md, vd);
      NDList fusedOut = new NDList(pd); // DJL zeroes this weight's gradient afterwards
      Runnable fusedStep =
          () -> {
            t[0]++;
            float bc1 = (float) (1 - Math.pow(B1, t[0]));
            float bc2 = (float) (1 - Math.pow(B2, t[0]));
            float lrCorrected = (float) (LR * Math.sqrt(bc2) / bc1);
            // The arguments of DJL's Adam.update: weight decay 0, rescale 1, no clipping, lazy
            // update, not AdamW.
            pd.getNDArrayInternal()
                .adamUpdate(
                    fusedIn, fusedOut, LR, lrCorrected, 0f, 1f, -1f, B1, B2, EPS, true, false);
          };
      warmUp(javaStep, seconds);
      warmUp(opsStep, seconds);
      warmUp(fusedStep, seconds);
      for (int r = 0; r < rounds; r++) {
        java.rounds.add(nsPer(javaStep, n, seconds));
        ops.rounds.add(nsPer(opsStep, n, seconds));
        fused.rounds.add(nsPer(fusedStep, n, seconds));
        System.out.printf(
            Locale.ROOT,
            "adam %s round %d: java %.3f, djl ops %.3f, djl fused %.3f ns/param (load %.2f)%n",
            key,
            r + 1,
            last(java),
            last(ops),
            last(fused),
            loadAverage());
      }
    }
    return List.of(java, bucket1, bucketT, ops, fused);
  }

  /**
   * One Adam step written with DJL operations, the rule of the project's {@link Adam} (no weight
   * decay): {@code m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= stepSize m / (sqrt(v) /
   * sqrt(bc2) + eps)}. Thirteen element-wise passes, four of them into temporaries (DJL has no
   * in-place sqrt).
   */
  private static void opsAdam(NDArray p, NDArray g, NDArray m, NDArray v, long t) {
    float stepSize = (float) (LR / (1 - Math.pow(B1, t)));
    float bc2Sqrt = (float) Math.sqrt(1 - Math.pow(B2, t));
    try (NDArray a = g.mul(1 - B1)) {
      m.muli(B1).addi(a);
    }
    try (NDArray sq = g.square()) {
      sq.muli(1 - B2);
      v.muli(B2).addi(sq);
    }
    try (NDArray den = v.sqrt();
        NDArray upd = m.mul(stepSize)) {
      den.divi(bc2Sqrt).addi(EPS);
      upd.divi(den);
      p.subi(upd);
    }
  }

  /** The DJL rule must compute what the project's Adam computes, or its timing means nothing. */
  private static void checkOpsAdam(NDManager manager) {
    int m = 4096;
    int steps = 50;
    float[][] p = {pattern(m, 1)};
    float[][] g = {pattern(m, 2)};
    Optimizer o = OptimizerSpec.adam().optLearningRate(LR).build().newOptimizer(new int[] {m});
    try (NDArray pd = manager.create(p[0]);
        NDArray gd = manager.create(g[0]);
        NDArray md = manager.zeros(pd.getShape());
        NDArray vd = manager.zeros(pd.getShape())) {
      for (int s = 1; s <= steps; s++) {
        o.update(p, g, LR);
        opsAdam(pd, gd, md, vd, s);
      }
      float[] got = pd.toFloatArray();
      double worst = 0;
      for (int i = 0; i < m; i++) {
        worst = Math.max(worst, Math.abs(got[i] - p[0][i]));
      }
      if (worst > 1e-5) {
        throw new IllegalStateException(
            "Adam written with DJL ops differs from the project's Adam after "
                + steps
                + " steps: max |diff| "
                + worst);
      }
    }
  }

  // ----------------------------------------------------------------------------------------------
  // copies

  private static List<Result> copies(int bytes, int rounds, double seconds) {
    String key = human(bytes) + "B";
    Result toDirect =
        new Result(
            "tensor_to_direct",
            "DJL CPU tensor -> direct buffer: toByteBuffer() + put",
            key,
            bytes,
            "GB/s");
    Result viewToDirect =
        new Result(
            "tensor_view_to_direct",
            "DJL CPU tensor -> direct buffer: toByteBuffer(true) view + put",
            key,
            bytes,
            "GB/s");
    Result toTensor =
        new Result(
            "direct_to_tensor",
            "direct buffer -> DJL CPU tensor: NDArray.set(Buffer)",
            key,
            bytes,
            "GB/s");
    Result memcpy =
        new Result(
            "memcpy", "direct buffer -> direct buffer: put (memcpy baseline)", key, bytes, "GB/s");
    Result floatsToDirect =
        new Result(
            "floats_to_direct",
            "float[] -> direct buffer: asFloatBuffer().put(float[])",
            key,
            bytes,
            "GB/s");
    Result directToFloats =
        new Result(
            "direct_to_floats",
            "direct buffer -> float[]: asFloatBuffer().get(float[])",
            key,
            bytes,
            "GB/s");
    int n = bytes / 4;
    float[] floats = pattern(n, 3);
    ByteBuffer src = ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
    src.asFloatBuffer().put(floats);
    ByteBuffer dst = ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
    try (NDManager manager = NDManager.newBaseManager()) {
      NDArray tensor = manager.create(floats);
      NDArray target = manager.zeros(tensor.getShape());
      Runnable a =
          () -> {
            dst.clear();
            dst.put(tensor.toByteBuffer());
          };
      Runnable b =
          () -> {
            dst.clear();
            dst.put(tensor.toByteBuffer(true));
          };
      Runnable c =
          () -> {
            src.rewind();
            target.set(src);
          };
      Runnable d =
          () -> {
            src.rewind();
            dst.clear();
            dst.put(src);
          };
      Runnable e = () -> dst.clear().asFloatBuffer().put(floats);
      Runnable f = () -> src.rewind().asFloatBuffer().get(floats);
      Runnable[] ops = {a, b, c, d, e, f};
      Result[] res = {toDirect, viewToDirect, toTensor, memcpy, floatsToDirect, directToFloats};
      for (Runnable op : ops) {
        warmUp(op, seconds);
      }
      for (int r = 0; r < rounds; r++) {
        StringBuilder line = new StringBuilder();
        for (int k = 0; k < ops.length; k++) {
          double ns = nsPer(ops[k], 1, seconds);
          res[k].rounds.add(bytes / ns); // bytes per ns = GB/s
          line.append(String.format(Locale.ROOT, " %s %.2f", res[k].measure, last(res[k])));
        }
        System.out.printf(
            Locale.ROOT, "copy %s round %d GB/s:%s (load %.2f)%n", key, r + 1, line, loadAverage());
      }
      // The copies must carry the bytes, or their rates mean nothing: the tensor holds the floats
      // src holds.
      for (boolean view : new boolean[] {false, true}) {
        dst.clear();
        dst.put(tensor.toByteBuffer(view));
        dst.flip();
        src.rewind();
        if (!dst.equals(src)) {
          throw new IllegalStateException(
              "toByteBuffer(" + view + ") + put of " + bytes + " bytes changed the data");
        }
      }
      // NDArray.set(direct buffer) on a CPU tensor does not copy: DJL's JNI points the tensor's
      // storage
      // at the buffer (torch set_ on a Storage over the buffer's address). Recorded, since a
      // trainer that
      // reuses the buffer would see the tensor change with it.
      src.rewind();
      target.set(src);
      float old = src.getFloat(0);
      src.putFloat(0, 12345f);
      boolean aliases;
      try (NDArray first = target.get(0)) {
        aliases = first.getFloat() == 12345f;
      }
      src.putFloat(0, old);
      toTensor.note =
          aliases
              ? "on a CPU tensor set(direct buffer) aliases the buffer (zero-copy): the rate is the call's overhead"
              : "on a CPU tensor set(direct buffer) copied the bytes";
      System.out.println(
          "NDArray.set(direct buffer) on a CPU tensor "
              + (aliases ? "ALIASES the buffer (no copy)" : "copies the buffer"));
    }
    return List.of(toDirect, viewToDirect, toTensor, memcpy, floatsToDirect, directToFloats);
  }

  // ----------------------------------------------------------------------------------------------
  // timing

  private static void warmUp(Runnable op, double seconds) {
    long end = System.nanoTime() + (long) (seconds * 1e9);
    int runs = 0;
    while (runs < 2 || System.nanoTime() < end) {
      op.run();
      runs++;
    }
  }

  /**
   * Median nanoseconds per run of {@code op} divided by {@code per}: samples of k back-to-back runs
   * (k so that a sample lasts at least 5 ms), at least 3 samples and {@code seconds} of them.
   */
  private static double nsPer(Runnable op, long per, double seconds) {
    long t0 = System.nanoTime();
    op.run();
    long one = Math.max(1, System.nanoTime() - t0);
    int k = (int) Math.max(1, Math.min(1_000_000, SAMPLE_NS / one));
    List<Double> samples = new ArrayList<>();
    long end = System.nanoTime() + (long) (seconds * 1e9);
    while (samples.size() < 3 || System.nanoTime() < end) {
      long s = System.nanoTime();
      for (int i = 0; i < k; i++) {
        op.run();
      }
      samples.add((System.nanoTime() - s) / (double) k / per);
    }
    double[] v = samples.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  // ----------------------------------------------------------------------------------------------
  // output and helpers

  private static void write(
      Path out,
      List<Result> results,
      String run,
      int djlThreads,
      int rounds,
      double seconds,
      Engine engine)
      throws IOException {
    Path dir = out.toAbsolutePath().getParent();
    if (dir != null) {
      Files.createDirectories(dir);
    }
    StringBuilder sb = new StringBuilder();
    for (Result r : results) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("run", run);
      m.put("measure", r.measure);
      m.put("description", r.description);
      m.put(r.unit.equals("GB/s") ? "bytes" : "params", r.size);
      m.put("unit", r.unit);
      m.put("median", r.median());
      m.put("min", r.min());
      m.put("max", r.max());
      m.put("rounds", r.rounds);
      if (r.note != null) {
        m.put("note", r.note);
      }
      m.put("java_threads", 1);
      m.put("djl_threads", djlThreads);
      m.put("seconds_per_round", seconds);
      m.put("cores", Runtime.getRuntime().availableProcessors());
      m.put("load_average", loadAverage());
      m.put("java", System.getProperty("java.version"));
      m.put("engine", engine.getEngineName() + " " + engine.getVersion());
      sb.append(json(m)).append('\n');
    }
    Files.writeString(out, sb.toString(), StandardOpenOption.CREATE, StandardOpenOption.APPEND);
  }

  private static String json(Map<String, Object> m) {
    StringBuilder sb = new StringBuilder("{");
    for (Map.Entry<String, Object> e : m.entrySet()) {
      if (sb.length() > 1) {
        sb.append(", ");
      }
      sb.append('"').append(e.getKey()).append("\": ").append(value(e.getValue()));
    }
    return sb.append('}').toString();
  }

  private static String value(Object v) {
    if (v instanceof String) {
      return '"' + ((String) v).replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }
    if (v instanceof Double) {
      return String.format(Locale.ROOT, "%.4f", (Double) v);
    }
    if (v instanceof List) {
      StringBuilder sb = new StringBuilder("[");
      for (Object o : (List<?>) v) {
        if (sb.length() > 1) {
          sb.append(", ");
        }
        sb.append(value(o));
      }
      return sb.append(']').toString();
    }
    return String.valueOf(v);
  }

  /**
   * Deterministic values in [-1e-3, 1e-3) (gradient-like), without the cost of a random generator.
   */
  private static float[] pattern(int n, int seed) {
    float[] a = new float[n];
    long h = seed * 0x9E3779B97F4A7C15L;
    for (int i = 0; i < n; i++) {
      h = h * 6364136223846793005L + 1442695040888963407L;
      a[i] = ((h >>> 40) / (float) (1 << 24) - 0.5f) * 2e-3f;
    }
    return a;
  }

  private static double last(Result r) {
    return r.rounds.get(r.rounds.size() - 1);
  }

  private static long[] longs(String csv) {
    return Arrays.stream(csv.split(",")).map(String::trim).mapToLong(Long::parseLong).toArray();
  }

  private static String human(long n) {
    if (n % 1_000_000 == 0) {
      return n / 1_000_000 + "M";
    }
    if (n % 1_000 == 0) {
      return n / 1_000 + "k";
    }
    return Long.toString(n);
  }

  private static double loadAverage() {
    return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
  }
}
