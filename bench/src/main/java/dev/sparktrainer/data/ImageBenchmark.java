package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;

/**
 * The photo benchmark ({@code bin/bench-images}): a folder of photos (one subfolder per class),
 * every contender on the same files, images/s per core side by side:
 *
 * <ul>
 *   <li>{@code decode-uint8}: {@code cores} threads, each decoding its share of the photos with
 *       random-resized-crop to 224x224 and a random flip into a uint8 batch (what the image
 *       transfer uint8 hands the device), files already in memory;
 *   <li>{@code decode-float32}: the same into a float32 batch ({@code k / 255f});
 *   <li>{@code pipeline-float32}: the input pipeline itself ({@link InputPipeline}) over the photos
 *       written once to TFRecord files, {@code random-resized-crop,flip} as the map, {@code cores}
 *       readers, batches of 64 (host batches, float32);
 *   <li>{@code pipeline-uint8-floathost}: the host side of image transfer uint8 before #33 item 2
 *       (the crop in the decoder, the flip only drawn, float32 records and batches {@code k /
 *       255f}, each batch packed to bytes as {@code BatchUpload} did);
 *   <li>{@code pipeline-uint8}: the same with the images held as bytes from the decoder on ({@link
 *       DatasetSpec#withImageBytes()}): the batch's column is what the device gets;
 *   <li>on one thread, the JPEG decoder's modes: the whole photo decoded then the box resampled,
 *       only the box decoded ({@code setSourceRegion}, the default), and the box decoded with
 *       ImageIO's source subsampling (point sampling, not a DCT-domain scaled decode).
 * </ul>
 *
 * PyTorch's DataLoader ({@code bin/torch-images.py}) runs beside it from the shell script. Appends
 * one JSON line per contender to {@code --out}.
 */
public final class ImageBenchmark {
  private ImageBenchmark() {}

  public static void main(String[] args) throws Exception {
    Path images = null;
    int cores = Runtime.getRuntime().availableProcessors();
    double seconds = 5;
    int rounds = 3;
    int shuffle = 0;
    String only = null;
    Path out = Path.of("target/bench/images.jsonl");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--images" -> images = Path.of(args[++i]);
        case "--cores" -> cores = Integer.parseInt(args[++i]);
        case "--seconds" -> seconds = Double.parseDouble(args[++i]);
        case "--rounds" -> rounds = Integer.parseInt(args[++i]);
        case "--out" -> out = Path.of(args[++i]);
        case "--shuffle" -> shuffle = Integer.parseInt(args[++i]);
        case "--only" -> only = args[++i];
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (images == null) {
      throw new IllegalArgumentException("--images DIR is required");
    }
    List<Path> files = new ArrayList<>();
    List<Integer> labels = new ArrayList<>();
    List<Path> classes;
    try (Stream<Path> s = Files.list(images)) {
      classes = s.filter(Files::isDirectory).sorted().toList();
    }
    for (int c = 0; c < classes.size(); c++) {
      try (Stream<Path> s = Files.list(classes.get(c))) {
        for (Path f : s.filter(Files::isRegularFile).sorted().toList()) {
          files.add(f);
          labels.add(c);
        }
      }
    }
    byte[][] bytes = new byte[files.size()][];
    long total = 0;
    for (int i = 0; i < bytes.length; i++) {
      bytes[i] = Files.readAllBytes(files.get(i));
      total += bytes[i].length;
    }
    System.out.printf(
        Locale.ROOT,
        "%d photos in %d classes, %.1f MB, %d cores%n",
        bytes.length,
        classes.size(),
        total / 1e6,
        cores);
    List<String> json = new ArrayList<>();
    Path tf = images.resolveSibling(images.getFileName() + "-tfrecord");
    writeRecords(bytes, labels, tf);
    if (only != null) { // one pipeline contender in this JVM: its peak RSS is its own
      double best = 0;
      for (int r = 0; r < rounds; r++) {
        best = Math.max(best, pipeline(tf, cores, seconds, only, shuffle));
      }
      json.add(
          line(
              "pipeline-" + only + (shuffle > 0 ? "-shuffle" + shuffle : ""),
              best,
              cores,
              bytes.length));
      writeJson(json, out);
      return;
    }
    double u8 = 0;
    double f32 = 0;
    for (int r = 0; r < rounds; r++) {
      u8 = Math.max(u8, kernel(bytes, cores, seconds, true));
      f32 = Math.max(f32, kernel(bytes, cores, seconds, false));
    }
    json.add(line("decode-uint8", u8, cores, bytes.length));
    json.add(line("decode-float32", f32, cores, bytes.length));
    // The pipeline's contenders interleaved round by round (the machine's load moves between them).
    String[] modes = {"float32", "uint8-floathost", "uint8"};
    double[] pipe = new double[modes.length];
    for (int r = 0; r < rounds; r++) {
      for (int m = 0; m < modes.length; m++) {
        pipe[m] = Math.max(pipe[m], pipeline(tf, cores, seconds, modes[m], shuffle));
      }
    }
    for (int m = 0; m < modes.length; m++) {
      json.add(line("pipeline-" + modes[m], pipe[m], cores, bytes.length));
    }
    for (String mode : new String[] {"full", "region", "region-subsample"}) {
      double best = 0;
      for (int r = 0; r < rounds; r++) {
        best = Math.max(best, decodeMode(bytes, mode, seconds));
      }
      json.add(line("jpeg-" + mode + "-1thread", best, 1, bytes.length));
    }
    writeJson(json, out);
  }

  private static void writeJson(List<String> json, Path out) throws IOException {
    long rss = rssKb();
    System.out.printf(Locale.ROOT, "RSS %.0f MB%n", rss / 1024.0);
    Files.createDirectories(out.toAbsolutePath().getParent());
    try (OutputStream os =
        Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
      for (String j : json) {
        String withRss = j.substring(0, j.length() - 1) + ",\"rss_kb\":" + rss + "}";
        os.write((withRss + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        System.out.println(withRss);
      }
    }
  }

  private static String line(String contender, double perS, int cores, int images) {
    System.out.printf(
        Locale.ROOT,
        "%-28s %9.1f images/s  %8.1f per core  %6.2f ms/image/core%n",
        contender,
        perS,
        perS / cores,
        1000.0 * cores / perS);
    return String.format(
        Locale.ROOT,
        "{\"contender\":\"%s\",\"images_per_s\":%.1f,\"images_per_s_per_core\":%.1f,"
            + "\"cores\":%d,\"images\":%d}",
        contender,
        perS,
        perS / cores,
        cores,
        images);
  }

  /**
   * {@code cores} threads decoding (random-resized-crop 224, flip) into a batch of 64 rows each,
   * uint8 or float32; images/s over {@code seconds} after a warm-up pass.
   */
  private static double kernel(byte[][] photos, int cores, double seconds, boolean uint8)
      throws InterruptedException {
    ImageResize rrc = ImageResize.randomResizedCrop(0.08, 1, 3.0 / 4, 4.0 / 3);
    AtomicLong done = new AtomicLong();
    long[] window = new long[2];
    Thread[] threads = new Thread[cores];
    long warm = System.nanoTime() + (long) (1e9 * Math.min(2, seconds / 2));
    long end = warm + (long) (1e9 * seconds);
    long[] counted = new long[cores];
    for (int t = 0; t < cores; t++) {
      int id = t;
      threads[t] =
          new Thread(
              () -> {
                Images images = new Images(rrc);
                ExampleRandom flip = new ExampleRandom();
                int px = 224 * 224 * 3;
                ByteBuffer b8 = ByteBuffer.allocateDirect(64 * px);
                FloatBuffer bf =
                    ByteBuffer.allocateDirect(4 * 64 * px)
                        .order(ByteOrder.nativeOrder())
                        .asFloatBuffer();
                float[] f = new float[px];
                long n = 0;
                long k = 0;
                try {
                  for (int i = id; ; i += cores, k++) {
                    long now = System.nanoTime();
                    if (now >= end) {
                      break;
                    }
                    if (now >= warm) {
                      n++;
                    }
                    byte[] p = photos[i % photos.length];
                    long seed = Seeds.mix(7, k, id, 4);
                    images.seed(seed);
                    flip.reset(seed + 1);
                    boolean mirror = flip.nextBoolean();
                    int row = (int) (k % 64);
                    if (uint8) {
                      byte[] img = images.decodeBytes(p, 0, p.length, 224, 224, 3);
                      if (mirror) {
                        mirror(img, 224, 224, 3);
                      }
                      b8.put(row * px, img, 0, px);
                    } else {
                      images.decodeImage(p, 0, p.length, 224, 224, 3, f, 0);
                      if (mirror) {
                        mirror(f, 224, 224, 3);
                      }
                      bf.put(row * px, f, 0, px);
                    }
                  }
                } catch (IOException e) {
                  throw new java.io.UncheckedIOException(e);
                }
                counted[id] = n;
              });
      threads[t].start();
    }
    for (Thread t : threads) {
      t.join();
    }
    long n = 0;
    for (long c : counted) {
      n += c;
    }
    return n / seconds;
  }

  private static void mirror(byte[] v, int h, int w, int ch) {
    for (int y = 0; y < h; y++) {
      int row = y * w * ch;
      for (int a = 0, b = w - 1; a < b; a++, b--) {
        for (int k = 0; k < ch; k++) {
          byte t = v[row + a * ch + k];
          v[row + a * ch + k] = v[row + b * ch + k];
          v[row + b * ch + k] = t;
        }
      }
    }
  }

  private static void mirror(float[] v, int h, int w, int ch) {
    for (int y = 0; y < h; y++) {
      int row = y * w * ch;
      for (int a = 0, b = w - 1; a < b; a++, b--) {
        for (int k = 0; k < ch; k++) {
          float t = v[row + a * ch + k];
          v[row + a * ch + k] = v[row + b * ch + k];
          v[row + b * ch + k] = t;
        }
      }
    }
  }

  /** One TFRecord file per class's worth of photos (encoded bytes + label), written once. */
  private static void writeRecords(byte[][] photos, List<Integer> labels, Path dir)
      throws IOException {
    if (Files.isDirectory(dir)) {
      return;
    }
    Path tmp = dir.resolveSibling(dir.getFileName() + ".tmp");
    Files.createDirectories(tmp);
    int parts = 8;
    for (int p = 0; p < parts; p++) {
      try (OutputStream os =
              new BufferedOutputStream(
                  Files.newOutputStream(tmp.resolve("part-" + p + ".tfrecord")));
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = p; i < photos.length; i += parts) {
          Map<String, Feature> m = new LinkedHashMap<>();
          m.put("image", Feature.ofBytes(photos[i]));
          m.put("label", Feature.ofInt64(labels.get(i)));
          w.write(Examples.encodeExample(m));
        }
      }
    }
    Files.move(tmp, dir);
  }

  /**
   * The input pipeline's images/s over the TFRecord photos, epochs back to back: {@code mode}
   * float32 (the map on the host), uint8-floathost (image transfer uint8's host side before the
   * images stayed bytes: float records, each batch packed to bytes), uint8 (bytes throughout).
   */
  private static double pipeline(Path dir, int cores, double seconds, String mode, int shuffle)
      throws IOException {
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(dir.toString())
            .addImageFeature("image", 224, 224, 3)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    PipelineOptions o =
        PipelineOptions.builder()
            .optBatchSize(64)
            .optShuffleBuffer(shuffle)
            .optCycleLength(Math.max(cores, 2))
            .optReaderParallelism(cores)
            .optMemoryBudgetBytes(1L << 30)
            .optTransform(
                ImageAugment.parse("random-resized-crop,flip", ImageAugment.Layout.HWC).training())
            .build();
    boolean uint8 = !mode.equals("float32");
    if (uint8) { // as DeviceImages.hostOptions: the crop in the decoder, the flip only drawn
      o =
          o.toBuilder()
              .optImageResize(o.effectiveImageResize())
              .optTransform(ex -> ex.setDraws(ex.random().nextBoolean() ? 1 : 0))
              .build();
    }
    boolean packed = mode.equals("uint8");
    ByteBuffer upload =
        mode.equals("uint8-floathost") ? ByteBuffer.allocateDirect(64 * 224 * 224 * 3) : null;
    Configuration conf = new Configuration();
    long n = 0;
    long start = 0;
    long end = Long.MAX_VALUE;
    int epoch = 0;
    DatasetPlan plan = DatasetPlanner.plan(spec, o, conf);
    try (InputPipeline p =
        InputPipeline.create(packed ? plan.withImageBytes() : plan, o, 0, 1, conf)) {
      long warm = System.nanoTime() + 2_000_000_000L;
      while (System.nanoTime() < end) {
        Iterator<HostBatch> it = p.epoch(epoch++, 0);
        while (it.hasNext()) {
          HostBatch b = it.next();
          if (upload != null) { // what BatchUpload did with the float batch
            dev.sparktrainer.device.DeviceImages.pack(
                b.floats(0), b.size() * 224 * 224 * 3, upload);
          }
          long now = System.nanoTime();
          if (start == 0 && now >= warm) {
            start = now;
            end = now + (long) (1e9 * seconds);
          } else if (start != 0) {
            n += b.size();
          }
          b.release();
          if (now >= end) {
            break;
          }
        }
      }
      double perS = n / ((System.nanoTime() - start) / 1e9);
      System.out.printf(
          Locale.ROOT,
          "  pipeline-%s: %.1f images/s, record %d bytes, %s%n",
          mode,
          perS,
          4 * (packed ? plan.withImageBytes() : plan).spec().featureSize(),
          p.stats());
      return perS;
    }
  }

  /** One thread: images/s decoding JPEGs with random-resized-crop 224 in {@code mode}. */
  private static double decodeMode(byte[][] photos, String mode, double seconds)
      throws IOException {
    ImageResize rrc = ImageResize.randomResizedCrop(0.08, 1, 3.0 / 4, 4.0 / 3);
    Images images = new Images(rrc);
    images.regionDecode = !mode.equals("full");
    images.subsample = mode.equals("region-subsample");
    long warm = System.nanoTime() + (long) (1e9 * Math.min(2, seconds / 2));
    long end = warm + (long) (1e9 * seconds);
    long n = 0;
    for (long k = 0; ; k++) {
      long now = System.nanoTime();
      if (now >= end) {
        break;
      }
      if (now >= warm) {
        n++;
      }
      byte[] p = photos[(int) (k % photos.length)];
      images.seed(Seeds.mix(9, k, 0, 4));
      images.decodeBytes(p, 0, p.length, 224, 224, 3);
    }
    return n / seconds;
  }

  private static long rssKb() {
    try {
      for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (l.startsWith("VmHWM:")) {
          return Long.parseLong(l.replaceAll("[^0-9]", ""));
        }
      }
    } catch (IOException e) {
      // not Linux
    }
    return -1;
  }
}
