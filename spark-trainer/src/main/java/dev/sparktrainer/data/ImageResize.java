package dev.sparktrainer.data;

import java.io.Serializable;
import java.util.Locale;
import java.util.random.RandomGenerator;

/**
 * How a decoded image of any size becomes the declared {@code [height, width]}: which box of the
 * photo is taken and at what scale it is resampled (bilinear, antialiased when shrinking, as PIL's
 * and torchvision's {@code antialias=True}; see {@link ImageResample}).
 *
 * <ul>
 *   <li>{@link #shorter(int) shorter:N}: the photo resized so that its shorter side is N (the
 *       longer {@code floor(N * long / short)}, torchvision's {@code Resize(N)}), then the centre
 *       {@code height x width} taken ({@code CenterCrop}): validation, evaluation and prediction's
 *       classic 256 then 224.
 *   <li>{@link #DEFAULT}: {@code shorter:max(height, width)}, and nothing at all for a photo
 *       already of the declared size.
 *   <li>{@link #randomResizedCrop}: torchvision's {@code RandomResizedCrop(size, scale, ratio)} for
 *       training: a box of a random area (a fraction of the photo's in {@code scale}) and aspect
 *       ratio (log-uniform in {@code ratio}), 10 tries, then the centre box of the photo clamped to
 *       the ratio range, resampled to the declared size. Its draws come from each example's own
 *       generator (see {@link #box}).
 * </ul>
 */
public final class ImageResize implements Serializable {
  private static final long serialVersionUID = 1L;

  /** {@code shorter:max(H, W)} then the centre crop; a photo of the declared size untouched. */
  public static final ImageResize DEFAULT = new ImageResize(0, null);

  private final int shorter; // > 0: shorter:N; 0: the default
  private final double[] rrc; // scaleMin, scaleMax, ratioMin, ratioMax; null: not random

  private ImageResize(int shorter, double[] rrc) {
    this.shorter = shorter;
    this.rrc = rrc;
  }

  /** Resize so that the shorter side is {@code n}, then take the centre. */
  public static ImageResize shorter(int n) {
    if (n < 1) {
      throw new IllegalArgumentException("Invalid resize shorter:" + n + ": expected a size >= 1");
    }
    return new ImageResize(n, null);
  }

  /** torchvision's {@code RandomResizedCrop} with {@code scale} and {@code ratio} ranges. */
  public static ImageResize randomResizedCrop(
      double scaleMin, double scaleMax, double ratioMin, double ratioMax) {
    if (!(scaleMin > 0 && scaleMin <= scaleMax && scaleMax <= 1)) {
      throw new IllegalArgumentException(
          "Invalid random-resized-crop scale "
              + scaleMin
              + "-"
              + scaleMax
              + ": expected 0 < min <= max <= 1 (a fraction of the photo's area)");
    }
    if (!(ratioMin > 0 && ratioMin <= ratioMax && Double.isFinite(ratioMax))) {
      throw new IllegalArgumentException(
          "Invalid random-resized-crop ratio "
              + ratioMin
              + "-"
              + ratioMax
              + ": expected 0 < min <= max (width / height)");
    }
    return new ImageResize(0, new double[] {scaleMin, scaleMax, ratioMin, ratioMax});
  }

  /**
   * Parses {@code shorter:N} (the command line's {@code --resize}).
   *
   * @throws IllegalArgumentException naming the value and what is allowed
   */
  public static ImageResize parse(String text) {
    String t = text.trim().toLowerCase(Locale.ROOT);
    if (t.startsWith("shorter:")) {
      try {
        int n = Integer.parseInt(t.substring("shorter:".length()).trim());
        if (n >= 1) {
          return shorter(n);
        }
      } catch (NumberFormatException e) {
        // below
      }
    }
    throw new IllegalArgumentException(
        "Invalid resize '" + text + "': expected shorter:N (N >= 1 pixels, e.g. shorter:256)");
  }

  /** Whether the box is drawn at random (random-resized-crop). */
  public boolean random() {
    return rrc != null;
  }

  /** The shorter side of {@code shorter:N}; 0 for the default and random-resized-crop. */
  public int shorterSide() {
    return shorter;
  }

  /**
   * The box of a {@code srcH x srcW} photo taken for an {@code outH x outW} image, and the size it
   * is resampled to: {@code box = {top, left, height, width}} (source pixels, of the photo resized
   * to {@code {fullH, fullW}} = {@code box[4], box[5]}), and {@code box[6], box[7]} the first
   * output row and column of that resized image kept (the centre crop). {@code random} draws
   * random-resized-crop's choices: the draw order and arithmetic of torchvision's {@code
   * RandomResizedCrop.get_params} (uniform scale, log-uniform ratio, Python's round half to even,
   * then the top and left offsets), each uniform a {@code nextDouble()} of {@code random}.
   */
  void box(int srcH, int srcW, int outH, int outW, RandomGenerator random, int[] box) {
    if (rrc != null) {
      randomBox(srcH, srcW, random, box);
      box[4] = outH;
      box[5] = outW;
      box[6] = 0;
      box[7] = 0;
      return;
    }
    int n = shorter > 0 ? shorter : Math.max(outH, outW);
    box[0] = 0;
    box[1] = 0;
    box[2] = srcH;
    box[3] = srcW;
    if (shorter == 0 && srcH == outH && srcW == outW) {
      box[4] = outH;
      box[5] = outW;
    } else if (srcW <= srcH) { // torchvision's _compute_resized_output_size
      box[5] = n;
      box[4] = (int) ((long) n * srcH / srcW);
    } else {
      box[4] = n;
      box[5] = (int) ((long) n * srcW / srcH);
    }
    if (box[4] < outH || box[5] < outW) {
      throw new IllegalArgumentException(
          "resize shorter:"
              + n
              + " makes a "
              + srcH
              + "x"
              + srcW
              + " image "
              + box[4]
              + "x"
              + box[5]
              + ", smaller than the "
              + outH
              + "x"
              + outW
              + " the model takes: give a resize of at least "
              + Math.max(outH, outW));
    }
    // CenterCrop: int(round((size - crop) / 2.0)), Python's round (half to even)
    box[6] = (int) Math.rint((box[4] - outH) / 2.0);
    box[7] = (int) Math.rint((box[5] - outW) / 2.0);
  }

  private void randomBox(int height, int width, RandomGenerator r, int[] box) {
    double area = (double) height * width;
    double logMin = Math.log(rrc[2]);
    double logMax = Math.log(rrc[3]);
    for (int attempt = 0; attempt < 10; attempt++) {
      double target = area * (rrc[0] + (rrc[1] - rrc[0]) * r.nextDouble());
      double aspect = Math.exp(logMin + (logMax - logMin) * r.nextDouble());
      int w = (int) Math.rint(Math.sqrt(target * aspect));
      int h = (int) Math.rint(Math.sqrt(target / aspect));
      if (0 < w && w <= width && 0 < h && h <= height) {
        box[0] = r.nextInt(height - h + 1);
        box[1] = r.nextInt(width - w + 1);
        box[2] = h;
        box[3] = w;
        return;
      }
    }
    // Fallback to the centre crop, as torchvision
    double inRatio = (double) width / height;
    int w;
    int h;
    if (inRatio < rrc[2]) {
      w = width;
      h = (int) Math.rint(w / rrc[2]);
    } else if (inRatio > rrc[3]) {
      h = height;
      w = (int) Math.rint(h * rrc[3]);
    } else {
      w = width;
      h = height;
    }
    box[0] = (height - h) / 2;
    box[1] = (width - w) / 2;
    box[2] = h;
    box[3] = w;
  }

  /** The text form: {@code shorter:N}, {@code default} or {@code random-resized-crop:...}. */
  @Override
  public String toString() {
    if (rrc != null) {
      return "random-resized-crop:"
          + num(rrc[0])
          + "-"
          + num(rrc[1])
          + ","
          + num(rrc[2])
          + "-"
          + num(rrc[3]);
    }
    return shorter > 0 ? "shorter:" + shorter : "default";
  }

  private static String num(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e9 ? Long.toString((long) v) : Double.toString(v);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ImageResize r && r.toString().equals(toString());
  }

  @Override
  public int hashCode() {
    return toString().hashCode();
  }
}
