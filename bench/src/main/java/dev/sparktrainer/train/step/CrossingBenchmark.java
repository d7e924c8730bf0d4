package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.function.Consumer;

/**
 * The candidate paths for a gradient bucket's crossing between the device and the all-reduce arena
 * (direct memory), measured through DJL's API on the device at hand: to the host, {@code copy_}
 * into a CPU tensor over the arena (the step's path, {@link FlatState#copy}) against {@code
 * toByteBuffer()} and a put into the arena; back, {@code copy_} from that CPU tensor into the
 * bucket's existing device tensor (the step's path) against {@code set(ByteBuffer)} and {@code
 * create(ByteBuffer)} (a new tensor). Every path's result is checked against the source. Not a
 * test.
 *
 * <p>Args: {@code [--device cpu|gpu] [--mb 1,25,100] [--seconds 0.5] [--out FILE]}. Prints a table
 * (GB/s: bytes of the bucket over the median time of one crossing, each followed by a device
 * synchronize) and appends one JSON line per path and size to {@code --out} (default {@code
 * target/bench/crossing.jsonl}).
 */
public final class CrossingBenchmark {
  private CrossingBenchmark() {}

  public static void main(String[] args) throws Exception {
    String device = "cpu";
    List<Integer> mbs = List.of(1, 25, 100);
    double seconds = 0.5;
    Path out = Path.of("target/bench/crossing.jsonl");
    for (int i = 0; i < args.length; i++) {
      String v = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--device" -> device = need(args[i], v, "cpu|gpu");
        case "--mb" ->
            mbs =
                Arrays.stream(need(args[i], v, "1,25").split(",")).map(Integer::parseInt).toList();
        case "--seconds" -> seconds = Double.parseDouble(need(args[i], v, "0.5"));
        case "--out" -> out = Path.of(need(args[i], v, "FILE"));
        default ->
            throw new IllegalArgumentException(
                "Unknown option '" + args[i] + "': expected --device, --mb, --seconds or --out");
      }
      i++;
    }
    if (!device.equals("cpu") && !device.equals("gpu")) {
      throw new IllegalArgumentException("Invalid --device '" + device + "': expected cpu or gpu");
    }
    Device dev = device.equals("gpu") ? Device.gpu() : Device.cpu();
    if (out.getParent() != null) {
      Files.createDirectories(out.getParent());
    }
    List<String> lines = new ArrayList<>();
    System.out.printf(Locale.ROOT, "Bucket crossings on %s (GB/s, median of repeats)%n", dev);
    System.out.printf(Locale.ROOT, "%-44s %s%n", "path", mbs);
    try (NDManager host = NDManager.newBaseManager(Device.cpu());
        NDManager onDevice = NDManager.newBaseManager(dev)) {
      String[] names = {
        "to host: copy_ into a CPU tensor over the arena",
        "to host: toByteBuffer() + put into the arena",
        "to device: copy_ from a CPU tensor over arena",
        "to device: set(direct ByteBuffer)",
        "to device: create(direct ByteBuffer) (new)"
      };
      double[][] rates = new double[names.length][mbs.size()];
      for (int m = 0; m < mbs.size(); m++) {
        int n = mbs.get(m) * (1 << 20) / 4;
        float[] values = new float[n];
        Random rnd = new Random(42 + m);
        for (int i = 0; i < n; i++) {
          values[i] = rnd.nextFloat();
        }
        ByteBuffer arena = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
        try (NDArray src = onDevice.create(values);
            NDArray dst = onDevice.zeros(new Shape(n), DataType.FLOAT32);
            NDArray arenaTensor = host.create(arena, new Shape(n), DataType.FLOAT32)) {
          long bytes = 4L * n;
          rates[0][m] =
              time(
                  bytes,
                  seconds,
                  dst,
                  k -> FlatState.copy(arenaTensor, src),
                  () -> check(arena, values));
          poison(arena);
          rates[1][m] =
              time(
                  bytes,
                  seconds,
                  dst,
                  k -> arena.put(0, src.toByteBuffer(), 0, 4 * n),
                  () -> check(arena, values));
          // the arena holds the values now: each path back must bring them into a device tensor
          rates[2][m] =
              time(
                  bytes,
                  seconds,
                  dst,
                  k -> FlatState.copy(dst, arenaTensor),
                  () -> check(dst, values));
          dst.muli(0f); // poisoned: the next path must write every value again
          rates[3][m] =
              time(
                  bytes,
                  seconds,
                  dst,
                  k -> dst.set(arena.duplicate().order(ByteOrder.nativeOrder())),
                  () -> check(dst, values));
          NDArray[] made = new NDArray[1];
          rates[4][m] =
              time(
                  bytes,
                  seconds,
                  dst,
                  k -> {
                    if (made[0] != null) {
                      made[0].close();
                    }
                    made[0] =
                        onDevice.create(
                            arena.duplicate().order(ByteOrder.nativeOrder()),
                            new Shape(n),
                            DataType.FLOAT32);
                  },
                  () -> check(made[0], values));
          made[0].close();
        }
      }
      for (int p = 0; p < names.length; p++) {
        StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "%-44s", names[p]));
        for (int m = 0; m < mbs.size(); m++) {
          row.append(String.format(Locale.ROOT, " %7.2f", rates[p][m]));
          lines.add(
              String.format(
                  Locale.ROOT,
                  "{\"bench\":\"crossing\",\"device\":\"%s\",\"path\":\"%s\",\"mb\":%d,"
                      + "\"gb_per_s\":%.3f,\"time\":\"%s\"}",
                  dev,
                  names[p],
                  mbs.get(m),
                  rates[p][m],
                  Instant.now()));
        }
        System.out.println(row);
      }
    }
    try (PrintStream json =
        new PrintStream(
            Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND),
            true,
            StandardCharsets.UTF_8)) {
      lines.forEach(json::println);
    }
    System.out.println("JSON lines appended to " + out.toAbsolutePath());
  }

  private static String need(String option, String value, String expected) {
    if (value == null) {
      throw new IllegalArgumentException("Option " + option + " needs a value: " + expected);
    }
    return value;
  }

  /**
   * GB/s of one crossing: the median over repeats (at least 5, for about {@code seconds}), each
   * ended by reading one element of {@code onDevice} (a device synchronize); then {@code check}.
   */
  private static double time(
      long bytes, double seconds, NDArray onDevice, Consumer<Integer> crossing, Runnable check) {
    for (int k = 0; k < 2; k++) {
      crossing.accept(k);
      sync(onDevice);
    }
    List<Long> times = new ArrayList<>();
    long end = System.nanoTime() + (long) (seconds * 1e9);
    for (int k = 0; times.size() < 5 || System.nanoTime() < end; k++) {
      long t0 = System.nanoTime();
      crossing.accept(k);
      sync(onDevice);
      times.add(System.nanoTime() - t0);
    }
    check.run();
    long[] sorted = times.stream().mapToLong(Long::longValue).sorted().toArray();
    return bytes / (double) sorted[sorted.length / 2];
  }

  private static void poison(ByteBuffer arena) {
    for (int i = 0; i < arena.capacity(); i += 4) {
      arena.putFloat(i, -1f);
    }
  }

  private static void sync(NDArray a) {
    try (NDArray one = a.get(0)) {
      one.getFloat();
    }
  }

  private static void check(ByteBuffer arena, float[] values) {
    for (int i : probes(values.length)) {
      float got = arena.getFloat(4 * i);
      if (got != values[i]) {
        throw new IllegalStateException(
            "arena element " + i + " is " + got + ", expected " + values[i]);
      }
    }
  }

  private static void check(NDArray a, float[] values) {
    float[] got = a.toFloatArray();
    for (int i : probes(values.length)) {
      if (got[i] != values[i]) {
        throw new IllegalStateException(
            "device element " + i + " is " + got[i] + ", expected " + values[i]);
      }
    }
  }

  private static int[] probes(int n) {
    return new int[] {0, 1, n / 3, n / 2, n - 2, n - 1};
  }
}
