package dev.sparktrainer.train;

import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.ExampleEncoder;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;

/**
 * What the benchmarks ({@link TrainBenchmark}, {@link ScalingBenchmark}, {@code StepBenchmark})
 * share: their {@code --name value} arguments and the checks of their values, what an application
 * submitted to a {@code StandaloneCluster} ships, Fashion-MNIST as TFRecord shards, their flat JSON
 * lines and the little helpers of their tables.
 */
public final class BenchSupport {
  static final int TRAIN_SHARDS = 8;
  static final int TEST_SHARDS = 2;

  private BenchSupport() {}

  // ---------------------------------------------------------------------------------------------
  // arguments

  public static Map<String, String> options(String[] args) {
    Map<String, String> o = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) {
        throw new IllegalArgumentException(
            "Invalid argument '" + args[i] + "': expected --name value");
      }
      o.put(args[i].substring(2), args[++i]);
    }
    return o;
  }

  public static String required(Map<String, String> o, String name) {
    String v = o.get(name);
    if (v == null) {
      throw new IllegalArgumentException("Missing --" + name);
    }
    return v;
  }

  /** {@code --name}, one of {@code allowed}. */
  public static String choice(
      Map<String, String> o, String name, String dflt, List<String> allowed) {
    String v = o.getOrDefault(name, dflt);
    if (!allowed.contains(v)) {
      throw new IllegalArgumentException(
          "Invalid --" + name + " '" + v + "': expected " + String.join(" or ", allowed));
    }
    return v;
  }

  /**
   * {@code --name} as a comma-separated list without repeats, each value passing {@code valid};
   * {@code allowed} says what is allowed in the error message.
   */
  public static List<String> list(
      Map<String, String> o, String name, String dflt, Predicate<String> valid, String allowed) {
    List<String> values = new ArrayList<>();
    for (String v : o.getOrDefault(name, dflt).split(",")) {
      v = v.trim();
      if (!valid.test(v)) {
        throw new IllegalArgumentException(
            "Invalid --" + name + " '" + v + "': expected " + allowed);
      }
      if (!values.contains(v)) {
        values.add(v);
      }
    }
    if (values.isEmpty()) {
      throw new IllegalArgumentException("Invalid --" + name + " '': expected " + allowed);
    }
    return values;
  }

  /** {@code --name}, an integer > 0. */
  public static int positive(Map<String, String> o, String name, String dflt) {
    return positive(o, name, dflt, false);
  }

  /** {@code --name}, an integer > 0, or >= 0 with {@code zeroOk}. */
  public static int positive(Map<String, String> o, String name, String dflt, boolean zeroOk) {
    String v = o.getOrDefault(name, dflt);
    try {
      int n = Integer.parseInt(v);
      if (n > 0 || (zeroOk && n == 0)) {
        return n;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(
        "Invalid --" + name + " '" + v + "': expected an integer > " + (zeroOk ? "-1" : "0"));
  }

  /**
   * {@code --name} as {@code N} (every model) and/or {@code model=N} entries over the defaults,
   * each model one of {@code models}, each N as {@link #positive}.
   */
  public static Map<String, Integer> perModel(
      Map<String, String> o,
      String name,
      Map<String, Integer> defaults,
      List<String> models,
      boolean zeroOk) {
    Map<String, Integer> m = new LinkedHashMap<>(defaults);
    if (!o.containsKey(name)) {
      return m;
    }
    for (String item : o.get(name).split(",")) {
      String[] kv = item.trim().split("=", 2);
      String model = kv.length == 2 ? kv[0].trim() : null;
      if (model != null && !models.contains(model)) {
        throw new IllegalArgumentException(
            "Invalid --"
                + name
                + " '"
                + item
                + "': expected N or model=N with model "
                + String.join(", ", models.subList(0, models.size() - 1))
                + " or "
                + models.get(models.size() - 1));
      }
      int n = positive(Map.of(name, kv[kv.length - 1].trim()), name, null, zeroOk);
      if (model == null) {
        m.replaceAll((k, v) -> n);
      } else {
        m.put(model, n);
      }
    }
    return m;
  }

  // ---------------------------------------------------------------------------------------------
  // the application on a standalone cluster

  /**
   * {@code --app-classpath}: the trainer's jar and its runtime dependencies, shipped with {@code
   * --jars}.
   */
  static List<Path> appJars(Map<String, String> o) {
    List<Path> jars = new ArrayList<>();
    for (String p : required(o, "app-classpath").split(":")) {
      if (!p.isBlank()) {
        jars.add(Path.of(p));
      }
    }
    return jars;
  }

  /**
   * The JVM flags of every cluster process, the executors' included: {@code --java-options}
   * (Spark's {@code --add-opens} list, the log4j configuration) and DJL's offline mode.
   */
  static List<String> javaOptions(Map<String, String> o) {
    List<String> javaOptions =
        new ArrayList<>(List.of(o.getOrDefault("java-options", "").trim().split("\\s+")));
    javaOptions.removeIf(String::isBlank);
    javaOptions.add("-Dai.djl.offline=true");
    return javaOptions;
  }

  // ---------------------------------------------------------------------------------------------
  // data

  /**
   * Fashion-MNIST as TFRecord shards of {@code tf.train.Example}s ({@code pixels}: 784 floats in
   * 0..1, {@code label}: int64), written once with the project's writer and reused: {@code train/}
   * in 8 shards, {@code test/} in 2.
   */
  static Path convertToTFRecords(Path idxDir, Path dir) throws IOException {
    if (Files.exists(dir.resolve("_COMPLETE"))) {
      return dir;
    }
    deleteRecursively(dir);
    Path tmp = dir.resolveSibling(dir.getFileName() + ".tmp");
    deleteRecursively(tmp);
    InMemoryDataset train =
        idx(
            idxDir.resolve("train-images-idx3-ubyte.gz"),
            idxDir.resolve("train-labels-idx1-ubyte.gz"));
    writeShards(train, train.size(), 28, tmp.resolve("train"), TRAIN_SHARDS);
    InMemoryDataset test =
        idx(
            idxDir.resolve("t10k-images-idx3-ubyte.gz"),
            idxDir.resolve("t10k-labels-idx1-ubyte.gz"));
    writeShards(test, test.size(), 28, tmp.resolve("test"), TEST_SHARDS);
    Files.writeString(tmp.resolve("_COMPLETE"), "");
    Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
    return dir;
  }

  /**
   * The first {@code examples} examples of {@code d} (28x28 images) as {@code shards} TFRecord
   * files of equal size (the last one shorter when they do not divide), each image zero-padded to
   * {@code side x side} pixels, centred: the same {@code pixels} and {@code label} features as
   * {@link #convertToTFRecords}. Written once into {@code dir/train} and reused; returns that
   * directory.
   */
  static Path subsetTFRecords(InMemoryDataset d, int examples, int side, int shards, Path dir)
      throws IOException {
    if (examples > d.size()) {
      throw new IllegalArgumentException(
          "Invalid subset of "
              + examples
              + " examples: expected at most "
              + d.size()
              + " (steps x batch x workers)");
    }
    if (!Files.exists(dir.resolve("_COMPLETE"))) {
      deleteRecursively(dir);
      Path tmp = dir.resolveSibling(dir.getFileName() + ".tmp");
      deleteRecursively(tmp);
      writeShards(d, examples, side, tmp.resolve("train"), shards);
      Files.writeString(tmp.resolve("_COMPLETE"), "");
      Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
    }
    return dir.resolve("train");
  }

  /**
   * Examples {@code [0, count)} of {@code d} in {@code shards} files, images padded to {@code
   * side}.
   */
  private static void writeShards(InMemoryDataset d, int count, int side, Path dir, int shards)
      throws IOException {
    Files.createDirectories(dir);
    ExampleEncoder enc = new ExampleEncoder();
    int per = (count + shards - 1) / shards;
    float[] padded = new float[side * side];
    for (int s = 0; s < shards; s++) {
      Path file = dir.resolve(String.format(Locale.ROOT, "part-%05d.tfrecord", s));
      try (OutputStream os = new BufferedOutputStream(Files.newOutputStream(file), 1 << 16);
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = s * per; i < Math.min(count, (s + 1) * per); i++) {
          float[] px = side == 28 ? d.features(i) : pad(d.features(i), 28, side, padded);
          enc.reset();
          enc.beginFeature("pixels", FeatureKind.FLOAT);
          enc.addFloats(px, 0, px.length);
          enc.endFeature();
          enc.beginFeature("label", FeatureKind.INT64);
          enc.addInt64(d.label(i));
          enc.endFeature();
          w.write(enc.finishExample());
        }
      }
    }
  }

  private static float[] pad(float[] image, int from, int side, float[] out) {
    if (side < from) {
      throw new IllegalArgumentException("Invalid image side " + side + ": expected >= " + from);
    }
    Arrays.fill(out, 0f);
    int offset = (side - from) / 2;
    for (int row = 0; row < from; row++) {
      System.arraycopy(image, row * from, out, (row + offset) * side + offset, from);
    }
    return out;
  }

  static InMemoryDataset idx(Path images, Path labels) throws IOException {
    try (DataInputStream im =
            new DataInputStream(
                new GZIPInputStream(new FileInputStream(images.toFile()), 1 << 16));
        DataInputStream lb =
            new DataInputStream(
                new GZIPInputStream(new FileInputStream(labels.toFile()), 1 << 16))) {
      if (im.readInt() != 2051 || lb.readInt() != 2049) {
        throw new IOException("Not IDX image/label files: " + images + ", " + labels);
      }
      int n = im.readInt();
      int h = im.readInt();
      int w = im.readInt();
      if (lb.readInt() != n) {
        throw new IOException("Image and label counts differ: " + images + ", " + labels);
      }
      byte[] px = new byte[n * h * w];
      im.readFully(px);
      byte[] y = new byte[n];
      lb.readFully(y);
      float[] f = new float[px.length];
      for (int i = 0; i < px.length; i++) {
        f[i] = (px[i] & 0xff) / 255f;
      }
      long[] l = new long[n];
      for (int i = 0; i < n; i++) {
        l[i] = y[i];
      }
      return InMemoryDataset.ofClasses(f, new Shape(h * w), l);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // output

  /**
   * One flat JSON object: doubles with 4 decimals (NaN and infinities as {@code null}), other
   * numbers as they print, booleans bare, anything else as a string.
   */
  public static String toJson(Map<String, Object> m) {
    StringBuilder sb = new StringBuilder("{");
    for (Map.Entry<String, Object> e : m.entrySet()) {
      if (sb.length() > 1) {
        sb.append(',');
      }
      sb.append('"').append(e.getKey()).append("\":");
      Object v = e.getValue();
      if (v instanceof Double d) {
        sb.append(Double.isFinite(d) ? String.format(Locale.ROOT, "%.4f", d) : "null");
      } else if (v instanceof Number || v instanceof Boolean) {
        sb.append(v);
      } else {
        sb.append('"')
            .append(String.valueOf(v).replace("\\", "\\\\").replace("\"", "\\\""))
            .append('"');
      }
    }
    return sb.append('}').toString();
  }

  /**
   * Parses a flat JSON object of {@link #toJson}'s kind (numbers, strings, booleans, nulls as NaN).
   */
  public static Map<String, Object> parseFlatJson(String json) {
    Map<String, Object> m = new LinkedHashMap<>();
    Matcher x = Pattern.compile("\"([^\"]+)\":(\"([^\"]*)\"|[^,}]+)").matcher(json);
    while (x.find()) {
      String raw = x.group(2);
      if (x.group(3) != null) {
        m.put(x.group(1), x.group(3));
      } else if (raw.equals("null")) {
        m.put(x.group(1), Double.NaN);
      } else if (raw.equals("true") || raw.equals("false")) {
        m.put(x.group(1), Boolean.valueOf(raw));
      } else if (raw.matches("-?\\d+")) {
        long v = Long.parseLong(raw);
        m.put(x.group(1), v == (int) v ? (Object) (int) v : (Object) v);
      } else {
        m.put(x.group(1), Double.parseDouble(raw));
      }
    }
    return m;
  }

  /** A row's number, NaN where it has none. */
  public static double num(Map<String, Object> r, String key) {
    Object v = r.get(key);
    return v instanceof Number n ? n.doubleValue() : Double.NaN;
  }

  /** {@code v} in {@code format}, {@code -} where it is not finite. */
  public static String fmt(double v, String format) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, format, v) : "-";
  }

  /** The median of the values that are not NaN; NaN where there are none. */
  public static double median(List<Double> values) {
    double[] v =
        values.stream()
            .filter(x -> !Double.isNaN(x))
            .mapToDouble(Double::doubleValue)
            .sorted()
            .toArray();
    if (v.length == 0) {
      return Double.NaN;
    }
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  /** {@code key, value, key, value, ...} in that order. */
  public static Map<String, String> orderedMap(String... kv) {
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return m;
  }

  public static double loadAverage() {
    return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
  }

  static void deleteRecursively(Path p) throws IOException {
    if (!Files.exists(p)) {
      return;
    }
    try (var s = Files.walk(p)) {
      for (Path f : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) {
        Files.delete(f);
      }
    }
  }

  /**
   * The application jar of a benchmark submitted to a standalone cluster: the classes of every
   * directory in {@code classDirs} (':'-separated: the benchmarks' and spark-trainer's test
   * fixtures), the first directory winning where two hold the same entry.
   */
  static Path appJar(String classDirs, Path jar) throws IOException {
    Files.createDirectories(jar.toAbsolutePath().getParent());
    Path tmp = jar.resolveSibling(jar.getFileName() + ".tmp");
    Set<String> seen = new HashSet<>();
    try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(tmp))) {
      for (String d : classDirs.split(":")) {
        Path dir = Path.of(d);
        try (Stream<Path> files = Files.walk(dir)) {
          for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile).sorted()::iterator) {
            String name = dir.relativize(f).toString().replace('\\', '/');
            if (seen.add(name)) {
              out.putNextEntry(new JarEntry(name));
              Files.copy(f, out);
              out.closeEntry();
            }
          }
        }
      }
    }
    return Files.move(tmp, jar, StandardCopyOption.REPLACE_EXISTING);
  }
}
