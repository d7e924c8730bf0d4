package dev.sparktrainer.data;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Built-in image augmentations, as {@link ExampleTransform}s over every image-shaped (3-D) feature
 * column: random crop with zero padding, horizontal flip, and per-channel mean/std normalization.
 * An image column's shape is read as {@link Layout#CHW} (channels, height, width: what the command
 * line's shapes and the CNN and ResNet models use) or {@link Layout#HWC} (what {@link
 * DatasetSpec.Builder#addImageFeature} decodes to). One example's draws are shared by all its image
 * columns (an image and its mask get the same crop and flip).
 *
 * <p>Why this file is long: it is one serializable augmentation spec: its command-line form and
 * parser, the check against the feature shapes, the inference-only view, and the three steps it is
 * made of (flip, crop, normalize), which share the layout handling of {@code Step} and which the
 * device package's {@code DeviceImages} reads back from the {@code Chain} (their public accessors)
 * to run them on the device. Kept together, one file holds each step's text form, its checks and
 * its arithmetic.
 *
 * <p>{@link #parse} reads the command line's form, steps applied in the order given: {@code
 * flip,crop:4,normalize:0.49,0.48,0.45/0.25,0.24,0.26}. {@link #training()} is all of them; {@link
 * #inference()} only the normalization — flips and crops are training-time augmentation, while a
 * model trained on normalized inputs needs them normalized wherever it runs (validation,
 * evaluation, prediction).
 */
public final class ImageAugment implements Serializable {
  private static final long serialVersionUID = 1L;

  /** How a 3-D image column's values are laid out. */
  public enum Layout {
    /** [channels, height, width]. */
    CHW,
    /** [height, width, channels]. */
    HWC
  }

  private final List<Step> steps;
  private final String text;

  private ImageAugment(List<Step> steps, String text) {
    this.steps = List.copyOf(steps);
    this.text = text;
  }

  /**
   * Parses {@code flip}, {@code crop:PADDING} and {@code normalize:MEAN,.../STD,...} (one value per
   * channel, or one for all), comma-separated.
   *
   * @throws IllegalArgumentException naming the step and what is allowed
   */
  public static ImageAugment parse(String text, Layout layout) {
    List<String> items = new ArrayList<>();
    for (String raw : text.split(",")) {
      String t = raw.trim();
      // normalize's values are comma-separated too: a bare number continues the previous step
      String prev = items.isEmpty() ? "" : items.get(items.size() - 1);
      if (!items.isEmpty()
          && !t.isEmpty()
          && t.matches("[-+0-9.eE/]+")
          && (prev.startsWith("normalize:")
              || (prev.startsWith("random-resized-crop:") && !prev.contains(",")))) {
        items.set(items.size() - 1, items.get(items.size() - 1) + "," + t);
      } else {
        items.add(t);
      }
    }
    List<Step> steps = new ArrayList<>();
    for (String item : items) {
      int colon = item.indexOf(':');
      String name = (colon < 0 ? item : item.substring(0, colon)).toLowerCase(Locale.ROOT);
      String arg = colon < 0 ? null : item.substring(colon + 1).trim();
      switch (name) {
        case "random-resized-crop":
          if (!steps.isEmpty()) {
            throw bad(
                text,
                "random-resized-crop must come first: it takes the box of the decoded photo the"
                    + " other steps work on");
          }
          try {
            steps.add(new RandomResizedCrop(rrc(arg), layout));
          } catch (IllegalArgumentException e) {
            throw bad(text, e.getMessage());
          }
          break;
        case "flip":
          if (arg != null) {
            throw bad(text, "flip takes no value");
          }
          steps.add(new Flip(layout, null));
          break;
        case "crop":
          int p;
          try {
            p = Integer.parseInt(arg == null ? "" : arg);
          } catch (NumberFormatException e) {
            throw bad(text, "crop needs its padding in pixels, e.g. crop:4");
          }
          if (p < 1) {
            throw bad(text, "crop's padding must be at least 1");
          }
          steps.add(new Crop(p, layout, null));
          break;
        case "normalize":
          String[] ms = arg == null ? new String[0] : arg.split("/");
          if (ms.length != 2) {
            throw bad(
                text,
                "normalize needs MEAN/STD, one value per channel, e.g. normalize:0.5,0.5,0.5/0.25,0.25,0.25");
          }
          float[] mean = floats(ms[0], text);
          float[] std = floats(ms[1], text);
          try {
            steps.add(new Normalize(mean, std, layout, null));
          } catch (IllegalArgumentException e) {
            throw bad(text, e.getMessage());
          }
          break;
        default:
          throw bad(text, "unknown step '" + item + "'");
      }
    }
    if (steps.isEmpty()) {
      throw bad(text, "no step given");
    }
    return new ImageAugment(steps, text.trim());
  }

  /** {@code SMIN-SMAX[,RMIN-RMAX]} (each a number or a fraction such as 3/4), or the defaults. */
  private static ImageResize rrc(String arg) {
    double[] v = {0.08, 1, 3.0 / 4, 4.0 / 3};
    if (arg != null && !arg.isEmpty()) {
      String[] parts = arg.split(",");
      if (parts.length > 2) {
        throw new IllegalArgumentException(
            "random-resized-crop takes SCALE_MIN-SCALE_MAX[,RATIO_MIN-RATIO_MAX], e.g."
                + " random-resized-crop:0.08-1,3/4-4/3");
      }
      for (int p = 0; p < parts.length; p++) {
        String[] mm = parts[p].trim().split("-");
        if (mm.length != 2) {
          throw new IllegalArgumentException(
              "random-resized-crop's '"
                  + parts[p].trim()
                  + "' is not a range MIN-MAX (e.g. 0.08-1 or 3/4-4/3)");
        }
        v[2 * p] = fraction(mm[0]);
        v[2 * p + 1] = fraction(mm[1]);
      }
    }
    return ImageResize.randomResizedCrop(v[0], v[1], v[2], v[3]);
  }

  private static double fraction(String s) {
    String t = s.trim();
    try {
      int slash = t.indexOf('/');
      return slash < 0
          ? Double.parseDouble(t)
          : Double.parseDouble(t.substring(0, slash)) / Double.parseDouble(t.substring(slash + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("'" + t + "' is not a number or a fraction");
    }
  }

  /**
   * The {@link ImageResize} of {@code transform}'s {@code random-resized-crop} step (a {@link
   * Chain} of this class's steps, or the step alone), or null if it has none.
   */
  public static ImageResize resizeOf(ExampleTransform transform) {
    if (transform instanceof RandomResizedCrop r) {
      return r.resize;
    }
    if (transform instanceof Chain c) {
      for (Step s : c.steps) {
        if (s instanceof RandomResizedCrop r) {
          return r.resize;
        }
      }
    }
    return null;
  }

  /**
   * torchvision's {@code RandomResizedCrop} for encoded image features of any size: a random box of
   * the photo, resized to the declared size (see {@link ImageResize#randomResizedCrop}). It works
   * while the image is decoded — the decoder finds it in the options' transform ({@link
   * PipelineOptions#effectiveImageResize}) — so as a step it does nothing: its draws come from the
   * example's seed on a stream of their own, and the other steps' draws are unchanged by it.
   */
  public static ExampleTransform randomResizedCrop(
      double scaleMin, double scaleMax, double ratioMin, double ratioMax, Layout layout) {
    return new RandomResizedCrop(
        ImageResize.randomResizedCrop(scaleMin, scaleMax, ratioMin, ratioMax), layout);
  }

  /** See {@link #randomResizedCrop}: applied by the image decoder, nothing to do afterwards. */
  public static final class RandomResizedCrop extends Step {
    private static final long serialVersionUID = 1L;
    final ImageResize resize;

    RandomResizedCrop(ImageResize resize, Layout layout) {
      super(layout, null);
      this.resize = resize;
    }

    /** The box and resize the decoder applies. */
    public ImageResize resize() {
      return resize;
    }

    @Override
    Step reshaped(long[] shape) {
      return this;
    }

    @Override
    public void apply(Example ex) {
      // done while decoding (Images), from the example's seed
    }

    @Override
    public String toString() {
      return resize.toString();
    }
  }

  private static float[] floats(String list, String text) {
    String[] parts = list.split(",");
    float[] out = new float[parts.length];
    for (int i = 0; i < parts.length; i++) {
      try {
        out[i] = Float.parseFloat(parts[i].trim());
      } catch (NumberFormatException e) {
        throw bad(text, "'" + parts[i].trim() + "' is not a number");
      }
      if (!Float.isFinite(out[i])) {
        throw bad(text, "'" + parts[i].trim() + "' is not a finite number");
      }
    }
    return out;
  }

  private static IllegalArgumentException bad(String text, String why) {
    return new IllegalArgumentException(
        "Invalid augmentation '"
            + text
            + "': "
            + why
            + " (expected a comma-separated list of random-resized-crop[:SMIN-SMAX[,RMIN-RMAX]], flip,"
            + " crop:PADDING and normalize:MEAN,.../STD,...)");
  }

  /**
   * The same steps, also treating flat feature columns of {@code imageShape}'s size as images of
   * that shape (in the parse's layout): for a flat pixel vector, e.g. the Estimator's features
   * column feeding a CNN.
   */
  public ImageAugment withImageShape(long... imageShape) {
    if (imageShape.length != 3 || Arrays.stream(imageShape).anyMatch(d -> d < 1)) {
      throw new IllegalArgumentException(
          "Invalid image shape "
              + Arrays.toString(imageShape)
              + ": expected 3 positive dimensions");
    }
    List<Step> out = new ArrayList<>();
    for (Step s : steps) {
      out.add(s.reshaped(imageShape.clone()));
    }
    return new ImageAugment(out, text);
  }

  /** Every step, in order: for the training data. */
  public ExampleTransform training() {
    return chain(steps);
  }

  /** The normalization steps only (null if none): for validation, evaluation and prediction. */
  public ExampleTransform inference() {
    List<Step> n = new ArrayList<>();
    for (Step s : steps) {
      if (s instanceof Normalize) {
        n.add(s);
      }
    }
    return n.isEmpty() ? null : chain(n);
  }

  /**
   * The text of {@link #inference()}'s steps ({@code normalize:...}, as {@link #parse} reads it),
   * or null if there are none: what a saved model records.
   */
  public String inferenceText() {
    StringBuilder sb = new StringBuilder();
    for (Step s : steps) {
      if (s instanceof Normalize) {
        sb.append(sb.length() == 0 ? "" : ",").append(s);
      }
    }
    return sb.length() == 0 ? null : sb.toString();
  }

  /**
   * Applies {@link #inference()} to one example's column of {@code shape} at {@code values[offset
   * ..]}, outside the pipeline (batch inference on DataFrame rows); a column that is not 3-D is
   * left as it is.
   */
  public void applyInference(float[] values, int offset, long[] shape) {
    if (shape.length != 3) {
      return;
    }
    for (Step s : steps) {
      if (s instanceof Normalize) {
        Layout l = s.layout;
        ((Normalize) s)
            .normalize(
                values,
                offset,
                (int) (l == Layout.CHW ? shape[0] : shape[2]),
                (int) (l == Layout.CHW ? shape[1] : shape[0]),
                (int) (l == Layout.CHW ? shape[2] : shape[1]));
      }
    }
  }

  private static ExampleTransform chain(List<Step> steps) {
    return new Chain(steps);
  }

  /**
   * The steps run one after the other: what {@link #training()} and {@link #inference()} return.
   * Recognised by the device package's {@code DeviceImages}, which with image transfer uint8 runs
   * them on the device instead: the host then only draws each example's random choices.
   */
  public static final class Chain implements ExampleTransform {
    private static final long serialVersionUID = 1L;
    final List<Step> steps;

    Chain(List<Step> steps) {
      this.steps = List.copyOf(steps);
    }

    /** The steps, in order (immutable). */
    public List<Step> steps() {
      return steps;
    }

    @Override
    public void apply(Example ex) throws Exception {
      for (Step s : steps) {
        s.apply(ex);
      }
    }

    @Override
    public String toString() {
      StringBuilder sb = new StringBuilder();
      for (Step s : steps) {
        sb.append(sb.length() == 0 ? "" : ",").append(s);
      }
      return sb.toString();
    }
  }

  /**
   * Checks the steps against the feature shapes before anything runs: at least one image-shaped
   * (3-D) feature, and as many normalization values as its channels (or one).
   *
   * @throws IllegalArgumentException naming the shapes
   */
  public void check(long[][] featureShapes, Layout layout) {
    boolean any = false;
    long[] flat = steps.get(0).flatShape;
    for (long[] s : featureShapes) {
      if (s.length != 3) {
        if (flat == null
            || Arrays.stream(s).reduce(1, (a, b) -> a * b) != flat[0] * flat[1] * flat[2]) {
          continue;
        }
        s = flat;
      }
      any = true;
      long ch = layout == Layout.CHW ? s[0] : s[2];
      for (Step step : steps) {
        if (step instanceof Normalize
            && ((Normalize) step).mean.length != 1
            && ((Normalize) step).mean.length != ch) {
          throw new IllegalArgumentException(
              "Invalid augmentation '"
                  + text
                  + "': "
                  + step
                  + " gives "
                  + ((Normalize) step).mean.length
                  + " values per list, the image "
                  + Arrays.toString(s)
                  + " ("
                  + layout
                  + ") has "
                  + ch
                  + " channels");
        }
      }
    }
    if (!any) {
      StringBuilder shapes = new StringBuilder();
      for (long[] s : featureShapes) {
        shapes.append(shapes.length() == 0 ? "" : ", ").append(Arrays.toString(s));
      }
      throw new IllegalArgumentException(
          "Invalid augmentation '"
              + text
              + "': it needs an image-shaped feature"
              + " (3 dimensions, "
              + layout
              + ", e.g. 3x32x32); the features have shapes "
              + shapes);
    }
  }

  @Override
  public String toString() {
    return text;
  }

  /** Mirrors every image column left to right with probability 1/2. */
  public static ExampleTransform horizontalFlip(Layout layout) {
    return new Flip(layout, null);
  }

  /**
   * Pads every image column with {@code padding} zeros on each side and crops a window of its own
   * size at a uniformly random position: a random shift of -padding..padding pixels in each
   * direction, the uncovered border zero (torchvision's {@code RandomCrop(size, padding)}).
   */
  public static ExampleTransform randomCrop(int padding, Layout layout) {
    if (padding < 1) {
      throw new IllegalArgumentException(
          "Invalid crop padding " + padding + ": expected at least 1");
    }
    return new Crop(padding, layout, null);
  }

  /**
   * {@code (x - mean[c]) / std[c]} for every value of channel {@code c} of every image column; one
   * value of {@code mean} and {@code std} applies to all channels.
   */
  public static ExampleTransform normalize(float[] mean, float[] std, Layout layout) {
    return new Normalize(mean, std, layout, null);
  }

  /**
   * A step over every 3-D feature column, seen as (channels, height, width) in its layout. Made
   * only here ({@link #horizontalFlip}, {@link #randomCrop}, {@link #normalize}, {@link #parse});
   * public so that the device package reads what to run.
   */
  public abstract static class Step implements ExampleTransform {
    private static final long serialVersionUID = 1L;
    final Layout layout;

    /** Shape (in the layout) of flat columns to treat as images too; null: 3-D columns only. */
    final long[] flatShape;

    Step(Layout layout, long[] flatShape) {
      this.layout = Objects.requireNonNull(layout, "layout");
      this.flatShape = flatShape;
    }

    /** How the step reads an image column's shape. */
    public Layout layout() {
      return layout;
    }

    /** Shape (in the layout) of flat columns treated as images too; null: 3-D columns only. */
    public long[] flatShape() {
      return flatShape == null ? null : flatShape.clone();
    }

    /** The same step, also over flat columns of {@code shape}'s size. */
    abstract Step reshaped(long[] shape);

    /** Calls {@code image} for every 3-D column; fails if the example has none. */
    final void eachImage(Example ex, ImageOp op) {
      boolean any = false;
      for (int c = 0; c < ex.numColumns(); c++) {
        long[] s = ex.shape(c);
        if (s.length != 3) {
          if (flatShape == null || ex.size(c) != flatShape[0] * flatShape[1] * flatShape[2]) {
            continue;
          }
          s = flatShape;
        }
        any = true;
        int ch = (int) (layout == Layout.CHW ? s[0] : s[2]);
        int h = (int) (layout == Layout.CHW ? s[1] : s[0]);
        int w = (int) (layout == Layout.CHW ? s[2] : s[1]);
        op.apply(ex.values(), ex.offset(c), ch, h, w);
      }
      if (!any) {
        StringBuilder shapes = new StringBuilder();
        for (int c = 0; c < ex.numColumns(); c++) {
          shapes.append(c == 0 ? "" : ", ").append(Arrays.toString(ex.shape(c)));
        }
        throw new IllegalArgumentException(
            "image augmentation needs an image-shaped feature (3 dimensions, "
                + layout
                + "); the features have shapes "
                + shapes);
      }
    }
  }

  private interface ImageOp {
    void apply(float[] v, int off, int channels, int height, int width);
  }

  /** Horizontal flip of every image of an example, with probability 1/2 (one boolean drawn). */
  public static final class Flip extends Step {
    private static final long serialVersionUID = 1L;

    Flip(Layout layout, long[] flatShape) {
      super(layout, flatShape);
    }

    @Override
    Step reshaped(long[] shape) {
      return new Flip(layout, shape);
    }

    @Override
    public void apply(Example ex) {
      if (!ex.random().nextBoolean()) {
        return;
      }
      eachImage(
          ex,
          (v, off, ch, h, w) -> {
            if (layout == Layout.CHW) {
              for (int row = off, end = off + ch * h * w; row < end; row += w) {
                for (int i = row, j = row + w - 1; i < j; i++, j--) {
                  float t = v[i];
                  v[i] = v[j];
                  v[j] = t;
                }
              }
            } else {
              for (int y = 0; y < h; y++) {
                int row = off + y * w * ch;
                for (int a = 0, b = w - 1; a < b; a++, b--) {
                  for (int k = 0; k < ch; k++) {
                    float t = v[row + a * ch + k];
                    v[row + a * ch + k] = v[row + b * ch + k];
                    v[row + b * ch + k] = t;
                  }
                }
              }
            }
          });
    }

    @Override
    public String toString() {
      return "flip";
    }
  }

  /**
   * Random crop with zero padding: the window's shift drawn as two ints in 0..2p (rows, then
   * columns).
   */
  public static final class Crop extends Step {
    private static final long serialVersionUID = 1L;
    final int padding;

    Crop(int padding, Layout layout, long[] flatShape) {
      super(layout, flatShape);
      this.padding = padding;
    }

    /** The padding p: shifts of -p..p in each direction. */
    public int padding() {
      return padding;
    }

    @Override
    Step reshaped(long[] shape) {
      return new Crop(padding, layout, shape);
    }

    @Override
    public void apply(Example ex) {
      // The window's top-left corner in the padded image: 0..2p in each direction.
      int dy = ex.random().nextInt(2 * padding + 1) - padding;
      int dx = ex.random().nextInt(2 * padding + 1) - padding;
      if (dy == 0 && dx == 0) {
        return;
      }
      eachImage(
          ex,
          (v, off, ch, h, w) -> {
            int n = ch * h * w;
            float[] src = ex.scratch(n);
            System.arraycopy(v, off, src, 0, n);
            // out(y, x) = in(y + dy, x + dx), zero outside the image
            int x0 = Math.max(0, -dx);
            int x1 = Math.min(w, w - dx);
            int planes = layout == Layout.CHW ? ch : 1;
            int px = layout == Layout.CHW ? 1 : ch; // values per pixel within a plane
            for (int p = 0; p < planes; p++) {
              int plane = p * h * w;
              for (int y = 0; y < h; y++) {
                int out = off + (plane + y * w) * px;
                int sy = y + dy;
                if (sy < 0 || sy >= h || x1 <= x0) {
                  Arrays.fill(v, out, out + w * px, 0f);
                  continue;
                }
                Arrays.fill(v, out, out + x0 * px, 0f);
                System.arraycopy(
                    src, (plane + sy * w + x0 + dx) * px, v, out + x0 * px, (x1 - x0) * px);
                Arrays.fill(v, out + x1 * px, out + w * px, 0f);
              }
            }
          });
    }

    @Override
    public String toString() {
      return "crop:" + padding;
    }
  }

  /** Per-channel {@code (x - mean) * (1 / std)}, in float32. */
  public static final class Normalize extends Step {
    private static final long serialVersionUID = 1L;
    final float[] mean;
    private final float[] std;
    final float[] invStd;
    private final String text;

    Normalize(float[] mean, float[] std, Layout layout, long[] flatShape) {
      super(layout, flatShape);
      this.std = std.clone();
      if (mean.length == 0 || mean.length != std.length) {
        throw new IllegalArgumentException(
            "normalize needs as many means as standard deviations (one per channel"
                + " or one for all), not "
                + mean.length
                + " and "
                + std.length);
      }
      this.mean = mean.clone();
      this.invStd = new float[std.length];
      for (int i = 0; i < std.length; i++) {
        if (!(std[i] > 0) || !Float.isFinite(std[i])) {
          throw new IllegalArgumentException(
              "normalize's standard deviations must be positive, not " + std[i]);
        }
        invStd[i] = 1f / std[i];
      }
      this.text = "normalize:" + join(mean) + "/" + join(std);
    }

    @Override
    Step reshaped(long[] shape) {
      return new Normalize(mean, std, layout, shape);
    }

    /** The means, one per channel or one for all (a copy). */
    public float[] mean() {
      return mean.clone();
    }

    /** {@code 1 / std} in float32, as many as {@link #mean()} (a copy). */
    public float[] invStd() {
      return invStd.clone();
    }

    private static String join(float[] a) {
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < a.length; i++) {
        sb.append(i == 0 ? "" : ",").append(a[i]);
      }
      return sb.toString();
    }

    @Override
    public void apply(Example ex) {
      eachImage(ex, this::normalize);
    }

    void normalize(float[] v, int off, int ch, int h, int w) {
      {
        if (mean.length != 1 && mean.length != ch) {
          throw new IllegalArgumentException(
              text
                  + " has "
                  + mean.length
                  + " values per channel list; the image has "
                  + ch
                  + " channels");
        }
        for (int k = 0; k < ch; k++) {
          float m = mean[mean.length == 1 ? 0 : k];
          float s = invStd[invStd.length == 1 ? 0 : k];
          if (layout == Layout.CHW) {
            for (int i = off + k * h * w, end = i + h * w; i < end; i++) {
              v[i] = (v[i] - m) * s;
            }
          } else {
            for (int i = off + k, end = off + ch * h * w; i < end; i += ch) {
              v[i] = (v[i] - m) * s;
            }
          }
        }
      }
    }

    @Override
    public String toString() {
      return text;
    }
  }
}
