package dev.sparktrainer.device;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.data.BufferPool;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.data.ImageAugment.Crop;
import dev.sparktrainer.data.ImageAugment.Flip;
import dev.sparktrainer.data.ImageAugment.Layout;
import dev.sparktrainer.data.ImageAugment.Normalize;
import dev.sparktrainer.data.ImageAugment.Step;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.PipelineOptions.ImageTransfer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.random.RandomGenerator;

/**
 * Image transfer uint8: image feature columns (encoded images) cross to the device as one byte per
 * pixel and become float32 there — scaled to 0..1 through a 256-entry table of exactly the values
 * the host decodes to ({@code k / 255f}), then the built-in {@link ImageAugment} steps (flip, crop,
 * normalize) in their order, with each example's random choices drawn on the host by the same
 * generator, in the same order, as the host's steps would draw them. The result is the tensor the
 * host path (image transfer float32) would have uploaded, bit for bit: flip and crop move values
 * and fill zeros, normalize is the same two float32 operations ({@code (x - mean) * (1 / std)}),
 * each rounded once, on either side.
 *
 * <p>The plan ({@link #plan}) falls back to float32, saying why, where the device cannot do what
 * the host would (the host pipeline then runs with the options as given; otherwise with {@link
 * #hostOptions}, whose transform only draws): a user's own map (it must see decoded float images),
 * a fitted {@link Normalization}, an augmentation step over a column that is not an image column,
 * or more random draws than one 64-bit word per example carries.
 */
public final class DeviceImages {
  /** The float each byte decodes to on the host ({@code data.Images}: {@code k / 255f}). */
  private static final float[] TABLE = new float[256];

  static {
    for (int k = 0; k < 256; k++) {
      TABLE[k] = k / 255f;
    }
  }

  private final DatasetSpec spec;
  private final boolean[] uint8;
  private final List<Step> steps;
  private final ExampleTransform hostTransform;
  private final String reason;
  private final BufferPool[] pools;

  /**
   * Whether the host pipeline holds the image columns as bytes ({@link
   * DatasetSpec#withImageBytes()}), TFRecord or Parquet data, whenever the images travel as uint8.
   */
  private final boolean hostBytes;

  private DeviceImages(
      DatasetSpec spec,
      boolean[] uint8,
      List<Step> steps,
      ExampleTransform hostTransform,
      String reason,
      int batchSize) {
    this.spec = spec;
    this.uint8 = uint8;
    this.steps = steps;
    this.hostTransform = hostTransform;
    this.reason = reason;
    this.pools = new BufferPool[uint8.length];
    for (int c = 0; c < uint8.length; c++) {
      if (uint8[c]) {
        pools[c] = new BufferPool(batchSize * spec.features().get(c).values(), 4);
      }
    }
    this.hostBytes = reason == null;
  }

  /**
   * What the pipeline of {@code spec} and {@code options} does with its image columns on a device
   * ({@code gpu} or not): {@link #active()} when they travel as uint8, else {@link #reason()} says
   * why they stay float32.
   */
  static DeviceImages plan(
      DatasetSpec spec, PipelineOptions options, Normalization normalization, boolean gpu) {
    int cols = spec.features().size();
    boolean[] images = new boolean[cols];
    boolean any = false;
    for (int c = 0; c < cols; c++) {
      images[c] = spec.features().get(c).encoding() == DatasetSpec.Encoding.IMAGE;
      any |= images[c];
    }
    int batch = options.batchSize();
    ImageTransfer t = options.imageTransfer().resolve(gpu);
    if (t != ImageTransfer.UINT8) {
      return inactive(spec, "image transfer " + t.name().toLowerCase(java.util.Locale.ROOT));
    }
    if (!any) {
      return inactive(spec, "no image feature (an encoded-image column)");
    }
    if (normalization != null) {
      return inactive(spec, "a fitted normalization is applied on the host");
    }
    ExampleTransform tr = options.transform();
    List<Step> steps;
    if (tr == null) {
      steps = List.of();
    } else if (tr instanceof ImageAugment.Chain ch) {
      steps = ch.steps();
    } else if (tr instanceof Step s) {
      steps = List.of(s);
    } else {
      return inactive(spec, "a user's map sees decoded float images on the host");
    }
    int bits = 0;
    for (Step s : steps) {
      for (int c = 0; c < cols; c++) {
        if (!images[c] && touches(s, spec.features().get(c))) {
          return inactive(
              spec,
              "augmentation '"
                  + s
                  + "' applies to feature '"
                  + spec.features().get(c).name()
                  + "', which is not an image column");
        }
      }
      bits += bits(s);
    }
    if (bits > 64) {
      return inactive(spec, "the augmentation draws " + bits + " bits per example (at most 64)");
    }
    ExampleTransform host = null;
    if (steps.stream().anyMatch(s -> !(s instanceof Normalize))) {
      List<Step> drawn = steps;
      host = ex -> ex.setDraws(draw(drawn, ex.random()));
    }
    return new DeviceImages(spec, images, steps, host, null, batch);
  }

  private static DeviceImages inactive(DatasetSpec spec, String reason) {
    return new DeviceImages(spec, new boolean[spec.features().size()], List.of(), null, reason, 0);
  }

  /** Whether image columns travel as uint8. */
  public boolean active() {
    return reason == null;
  }

  /** Why image columns stay float32 (null when they travel as uint8). */
  public String reason() {
    return reason;
  }

  /** Whether column {@code c} travels as uint8. */
  boolean uint8(int c) {
    return uint8[c];
  }

  /**
   * The plan the host pipeline reads: with image columns held as bytes ({@link
   * DatasetPlan#withImageBytes()}) when they travel as uint8 from TFRecord data, else {@code plan}.
   */
  DatasetPlan hostPlan(DatasetPlan plan) {
    return hostBytes ? plan.withImageBytes() : plan;
  }

  /** Whether the host batches hold the image columns as bytes ({@link #hostPlan}). */
  boolean hostBytes() {
    return hostBytes;
  }

  /**
   * The options the host pipeline runs with: the built-in augmentation replaced by drawing its
   * random choices only (none when it draws nothing).
   */
  PipelineOptions hostOptions(PipelineOptions options) {
    // A random-resized-crop step works in the host's decoder: it stays, as the options' resize.
    return options.toBuilder()
        .optImageResize(options.effectiveImageResize())
        .optTransform(hostTransform)
        .build();
  }

  /** Whether step {@code s} works on column {@code f} (as {@link Step#eachImage} decides). */
  private static boolean touches(Step s, DatasetSpec.Feature f) {
    long[] shape = f.shape();
    if (shape.length == 3) {
      return true;
    }
    long[] flat = s.flatShape();
    return flat != null && f.size() == flat[0] * flat[1] * flat[2];
  }

  private static int bits(Step s) {
    if (s instanceof Flip) {
      return 1;
    }
    if (s instanceof Crop c) {
      return 2 * cropBits(c.padding());
    }
    return 0;
  }

  private static int cropBits(int padding) {
    return 32 - Integer.numberOfLeadingZeros(2 * padding);
  }

  /**
   * The random choices {@code steps} make for one example, drawn from {@code r} exactly as the
   * steps themselves draw (flip: one boolean; crop: the row, then the column shift), packed.
   */
  static long draw(List<Step> steps, RandomGenerator r) {
    long w = 0;
    int at = 0;
    for (Step s : steps) {
      if (s instanceof Flip) {
        if (r.nextBoolean()) {
          w |= 1L << at;
        }
        at++;
      } else if (s instanceof Crop c) {
        int padding = c.padding();
        int b = cropBits(padding);
        long dy = r.nextInt(2 * padding + 1);
        long dx = r.nextInt(2 * padding + 1);
        w |= dy << at;
        at += b;
        w |= dx << at;
        at += b;
      }
    }
    return w;
  }

  /**
   * Column {@code c} of a host batch ({@code n} rows of floats {@code k / 255f}) as one byte per
   * value, in a pooled direct buffer limited to its {@code n} rows; give it back with {@link
   * #give}.
   */
  ByteBuffer pack(int c, FloatBuffer floats, int n) {
    int count = n * spec.features().get(c).values();
    ByteBuffer out = pools[c].take();
    pack(floats, count, out);
    out.limit(count);
    return out;
  }

  /**
   * Column {@code c} of a host batch of {@code n} rows that holds it as bytes ({@link #hostPlan}):
   * the column's own buffer when its rows are whole slots (values a multiple of 4: no copy), else
   * the rows moved together (one bulk copy per row) into a pooled buffer; either way limited to
   * {@code n x values} bytes. Give it back with {@link #give}.
   */
  ByteBuffer bytes(int c, ByteBuffer column, int n) {
    int values = spec.features().get(c).values();
    if (values % 4 == 0) {
      return column.duplicate().order(ByteOrder.nativeOrder()).limit(n * values);
    }
    int stride = 4 * ((values + 3) / 4);
    ByteBuffer out = pools[c].take();
    for (int i = 0; i < n; i++) {
      out.put(i * values, column, i * stride, values);
    }
    out.limit(n * values);
    return out;
  }

  /**
   * Whether {@link #bytes} of column {@code c} is a pooled buffer (to {@link #give} back) rather
   * than a view of the batch's own column.
   */
  boolean pooledBytes(int c) {
    return spec.features().get(c).values() % 4 != 0;
  }

  /** Gives back a buffer of {@link #pack} or a pooled one of {@link #bytes}. */
  void give(int c, ByteBuffer b) {
    b.clear();
    pools[c].give(b);
  }

  /**
   * Writes {@code count} floats in 0..1 as bytes, the nearest of 0..255 to {@code v * 255}: exact
   * for the values images decode to, which are all {@code k / 255f} ({@code data.Images} rounds a
   * colour image's weighted grey to a byte too).
   */
  public static void pack(FloatBuffer floats, int count, ByteBuffer out) {
    for (int i = 0; i < count; i++) {
      int k = Math.round(floats.get(i) * 255f);
      out.put(i, (byte) Math.max(0, Math.min(255, k)));
    }
  }

  /**
   * Uploads column {@code c}'s bytes (shape {@code [n, ...the column's shape]}) to {@code m}'s
   * device and returns them there as float32: scaled, then augmented and normalized with row {@code
   * i}'s draws {@code draws[i]}. Attached to {@code m}; the bytes may be reused once it returns.
   */
  NDArray upload(NDManager m, int c, ByteBuffer bytes, int n, long[] draws) {
    long[] shape = spec.features().get(c).shape();
    long[] full = new long[shape.length + 1];
    full[0] = n;
    System.arraycopy(shape, 0, full, 1, shape.length);
    try (NDManager tmp = m.newSubManager()) {
      NDArray x = toFloat(tmp, bytes, new Shape(full));
      x = augment(tmp, x, shape, n, draws);
      x.attach(m);
      return x;
    }
  }

  /**
   * Bytes {@code k} (native direct buffer, {@code shape}) uploaded to {@code m}'s device as uint8
   * and turned into float32 {@code k / 255f} there, exactly the host's values (a table lookup, not
   * a division a device may round differently).
   */
  public static NDArray toFloat(NDManager m, ByteBuffer bytes, Shape shape) {
    try (NDManager tmp = m.newSubManager()) {
      NDArray u8 =
          tmp.create(bytes.duplicate().order(ByteOrder.nativeOrder()), shape, DataType.UINT8);
      NDArray table = tmp.create(TABLE);
      NDArray x = table.take(u8.toType(DataType.INT64, false));
      x.attach(m);
      return x;
    }
  }

  private NDArray augment(NDManager tmp, NDArray x, long[] shape, int n, long[] draws) {
    int at = 0;
    for (Step s : steps) {
      Layout l = s.layout();
      int ch = (int) (l == Layout.CHW ? shape[0] : shape[2]);
      int h = (int) (l == Layout.CHW ? shape[1] : shape[0]);
      int w = (int) (l == Layout.CHW ? shape[2] : shape[1]);
      int hAxis = l == Layout.CHW ? 2 : 1;
      int wAxis = l == Layout.CHW ? 3 : 2;
      if (s instanceof Flip) {
        boolean[] flip = new boolean[n];
        boolean anyFlip = false;
        for (int i = 0; i < n; i++) {
          flip[i] = ((draws[i] >>> at) & 1) != 0;
          anyFlip |= flip[i];
        }
        at++;
        if (anyFlip) {
          NDArray mask = tmp.create(flip, new Shape(n, 1, 1, 1)).broadcast(x.getShape());
          x = NDArrays.where(mask, x.flip(wAxis), x);
        }
      } else if (s instanceof Crop c) {
        int padding = c.padding();
        int b = cropBits(padding);
        long mask = (1L << b) - 1;
        NDArray out = tmp.zeros(x.getShape(), DataType.FLOAT32);
        for (int i = 0; i < n; i++) {
          int dy = (int) ((draws[i] >>> at) & mask) - padding;
          int dx = (int) ((draws[i] >>> (at + b)) & mask) - padding;
          // out(y, x) = in(y + dy, x + dx), zero outside the image (as the host's crop)
          int y0 = Math.max(0, -dy);
          int y1 = Math.min(h, h - dy);
          int x0 = Math.max(0, -dx);
          int x1 = Math.min(w, w - dx);
          if (y1 <= y0 || x1 <= x0) {
            continue;
          }
          NDIndex dst = window(i, hAxis, y0, y1, x0, x1);
          NDIndex src = window(i, hAxis, y0 + dy, y1 + dy, x0 + dx, x1 + dx);
          out.set(dst, x.get(src));
        }
        at += 2 * b;
        x = out;
      } else if (s instanceof Normalize nz) {
        float[] mean = nz.mean();
        if (mean.length != 1 && mean.length != ch) {
          throw new IllegalArgumentException(
              nz
                  + " has "
                  + mean.length
                  + " values per channel list; the image has "
                  + ch
                  + " channels");
        }
        Shape per =
            mean.length == 1
                ? new Shape(1)
                : (l == Layout.CHW ? new Shape(ch, 1, 1) : new Shape(ch));
        NDArray m = tmp.create(mean, per);
        NDArray inv = tmp.create(nz.invStd(), per);
        x = x.sub(m).mul(inv);
      }
    }
    return x;
  }

  /** Row {@code i}, rows {@code y0..y1} and columns {@code x0..x1}, every channel. */
  private static NDIndex window(int i, int hAxis, int y0, int y1, int x0, int x1) {
    String ys = y0 + ":" + y1;
    String xs = x0 + ":" + x1;
    return new NDIndex(hAxis == 2 ? i + ", :, " + ys + ", " + xs : i + ", " + ys + ", " + xs);
  }

  /** For messages and logs. */
  @Override
  public String toString() {
    if (!active()) {
      return "image transfer float32 (" + reason + ")";
    }
    List<String> cols = new ArrayList<>();
    for (int c = 0; c < uint8.length; c++) {
      if (uint8[c]) {
        cols.add(spec.features().get(c).name());
      }
    }
    return "image transfer uint8 for "
        + cols
        + (steps.isEmpty() ? "" : ", on the device: " + steps);
  }
}
