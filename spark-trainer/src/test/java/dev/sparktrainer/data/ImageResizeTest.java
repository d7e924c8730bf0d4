package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Resize, centre crop and random-resized-crop against this project's own scalar reference (exact:
 * {@link #reference}) and against PIL's bilinear resize of the same box (mean absolute difference
 * at most 2/255; the expected bytes were made by {@code images/make_fixtures.py} with PIL 9.4 and
 * are committed beside it).
 */
class ImageResizeTest {
  static byte[] resource(String name) {
    try (InputStream in = ImageResizeTest.class.getResourceAsStream("/images/" + name)) {
      if (in == null) {
        throw new IllegalStateException("no test resource images/" + name);
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The whole image, decoded at its own size, as bytes (HWC). */
  static byte[] decodeWhole(byte[] file, int h, int w, int ch) throws IOException {
    return new Images(null).decodeBytes(file, 0, file.length, h, w, ch).clone();
  }

  static double meanAbsDiff(byte[] a, byte[] b, int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
      sum += Math.abs((a[i] & 0xFF) - (b[i] & 0xFF));
    }
    return sum / (double) n / 255.0;
  }

  /**
   * The scalar reference: PIL's bilinear resample written out per output value, each value's filter
   * weights worked out afresh (no tables), with PIL's fixed-point rounding: a horizontal pass over
   * every row of the box, then a vertical one.
   */
  static byte[] reference(
      byte[] src,
      int srcW,
      int ch,
      int top,
      int left,
      int boxH,
      int boxW,
      int fullH,
      int fullW,
      int oy,
      int ox,
      int outH,
      int outW) {
    int[][] tmp = new int[boxH][outW * ch];
    for (int y = 0; y < boxH; y++) {
      for (int x = 0; x < outW; x++) {
        int[] k = weights(boxW, fullW, ox + x);
        for (int c = 0; c < ch; c++) {
          int ss = 1 << 21;
          for (int i = 0; i < k.length - 1; i++) {
            ss += (src[((top + y) * srcW + left + k[0] + i) * ch + c] & 0xFF) * k[i + 1];
          }
          tmp[y][x * ch + c] = clamp(ss >> 22);
        }
      }
    }
    byte[] out = new byte[outH * outW * ch];
    for (int y = 0; y < outH; y++) {
      int[] k = weights(boxH, fullH, oy + y);
      for (int j = 0; j < outW * ch; j++) {
        int ss = 1 << 21;
        for (int i = 0; i < k.length - 1; i++) {
          ss += tmp[k[0] + i][j] * k[i + 1];
        }
        out[y * outW * ch + j] = (byte) clamp(ss >> 22);
      }
    }
    return out;
  }

  private static int clamp(int v) {
    return Math.max(0, Math.min(255, v));
  }

  /** {first input, weights...} of output {@code o} of {@code in} pixels resized to {@code out}. */
  private static int[] weights(int in, int out, int o) {
    double scale = (double) in / out;
    double fs = Math.max(scale, 1);
    double support = fs;
    double center = (o + 0.5) * scale;
    int lo = Math.max(0, (int) (center - support + 0.5));
    int hi = Math.min(in, (int) (center + support + 0.5));
    double[] w = new double[hi - lo];
    double total = 0;
    for (int x = lo; x < hi; x++) {
      double d = Math.abs((x - center + 0.5) / fs);
      w[x - lo] = d < 1 ? 1 - d : 0;
      total += w[x - lo];
    }
    int[] k = new int[w.length + 1];
    k[0] = lo;
    for (int i = 0; i < w.length; i++) {
      double v = (total == 0 ? w[i] : w[i] / total) * (1 << 22);
      k[i + 1] = (int) (v < 0 ? v - 0.5 : v + 0.5);
    }
    return k;
  }

  private record Case(String name, String source, String[] args) {}

  private static List<Case> cases() {
    List<Case> out = new ArrayList<>();
    for (String line : new String(resource("cases.txt"), StandardCharsets.UTF_8).split("\n")) {
      if (line.isBlank()) {
        continue;
      }
      String[] p = line.trim().split(" ");
      String[] args = new String[p.length - 2];
      System.arraycopy(p, 2, args, 0, args.length);
      out.add(new Case(p[0], p[1], args));
    }
    return out;
  }

  @Test
  void cropBoxesResizeAsPilAndAsTheReference() throws IOException {
    int checked = 0;
    for (Case c : cases()) {
      if (c.args[0].equals("shorter")) {
        continue;
      }
      int[] a = new int[7];
      for (int i = 0; i < 7; i++) {
        a[i] = Integer.parseInt(c.args[i]);
      }
      int top = a[0];
      int left = a[1];
      int bh = a[2];
      int bw = a[3];
      int oh = a[4];
      int ow = a[5];
      int ch = a[6];
      byte[] file = resource(c.source);
      byte[] src = decodeWhole(file, 61, 83, ch);
      byte[] got = new byte[oh * ow * ch];
      new ImageResample().resample(src, 61, 83, ch, top, left, bh, bw, oh, ow, 0, 0, oh, ow, got);
      byte[] ref = reference(src, 83, ch, top, left, bh, bw, oh, ow, 0, 0, oh, ow);
      assertThat(got).as(c.name + " against the scalar reference").isEqualTo(ref);
      byte[] pil = resource(c.name + ".raw");
      assertThat(pil).hasSize(got.length);
      double mad = meanAbsDiff(got, pil, got.length);
      assertThat(mad)
          .as(c.name + ": mean absolute difference from PIL")
          .isLessThanOrEqualTo(2 / 255.0);
      if (c.source.endsWith(".png") && ch == 3) {
        // the same bytes in, PIL's arithmetic: the same bytes out
        assertThat(got).as(c.name + " against PIL, exactly").isEqualTo(pil);
      }
      checked++;
    }
    assertThat(checked).isEqualTo(7);
  }

  @Test
  void resizeShorterThenCentreCropAsTorchvision() throws IOException {
    int checked = 0;
    for (Case c : cases()) {
      if (!c.args[0].equals("shorter")) {
        continue;
      }
      int n = Integer.parseInt(c.args[1]);
      int oh = Integer.parseInt(c.args[2]);
      int ow = Integer.parseInt(c.args[3]);
      int ch = Integer.parseInt(c.args[4]);
      byte[] file = resource(c.source);
      byte[] got =
          new Images(ImageResize.shorter(n)).decodeBytes(file, 0, file.length, oh, ow, ch).clone();
      byte[] pil = resource(c.name + ".raw");
      assertThat(meanAbsDiff(got, pil, got.length)).as(c.name).isLessThanOrEqualTo(2 / 255.0);
      // The reference on the whole resized image, cropped afterwards
      byte[] src = decodeWhole(file, 61, 83, ch);
      int fh = n;
      int fw = (int) ((long) n * 83 / 61);
      int oy = (int) Math.rint((fh - oh) / 2.0);
      int ox = (int) Math.rint((fw - ow) / 2.0);
      byte[] ref = reference(src, 83, ch, 0, 0, 61, 83, fh, fw, oy, ox, oh, ow);
      assertThat(got).as(c.name + " against the scalar reference").isEqualTo(ref);
      if (ch == 3) {
        assertThat(got).as(c.name + " against PIL, exactly").isEqualTo(pil);
      }
      checked++;
    }
    assertThat(checked).isEqualTo(3);
  }

  @Test
  void defaultResizeIsShorterSideToTheTargetThenCentre() throws IOException {
    byte[] file = resource("src.png");
    byte[] viaDefault = new Images(null).decodeBytes(file, 0, file.length, 40, 40, 3).clone();
    byte[] shorter40 =
        new Images(ImageResize.shorter(40)).decodeBytes(file, 0, file.length, 40, 40, 3).clone();
    assertThat(viaDefault).isEqualTo(shorter40);
    // an image of the declared size is left as it is
    assertThat(decodeWhole(file, 61, 83, 3)).hasSize(61 * 83 * 3);
  }

  /** torchvision's RandomResizedCrop.get_params, written out independently (Python's round). */
  private static int[] torchvisionBox(
      int height, int width, double[] scale, double[] ratio, ExampleRandom r) {
    double area = height * (double) width;
    double lr0 = Math.log(ratio[0]);
    double lr1 = Math.log(ratio[1]);
    for (int t = 0; t < 10; t++) {
      double targetArea = area * (scale[0] + r.nextDouble() * (scale[1] - scale[0]));
      double aspect = Math.exp(lr0 + r.nextDouble() * (lr1 - lr0));
      int w = (int) Math.rint(Math.sqrt(targetArea * aspect)); // Python's round: half to even
      int h = (int) Math.rint(Math.sqrt(targetArea / aspect));
      if (w > 0 && w <= width && h > 0 && h <= height) {
        int i = r.nextInt(height - h + 1);
        int j = r.nextInt(width - w + 1);
        return new int[] {i, j, h, w};
      }
    }
    double inRatio = (double) width / height;
    int w;
    int h;
    if (inRatio < Math.min(ratio[0], ratio[1])) {
      w = width;
      h = (int) Math.rint(w / Math.min(ratio[0], ratio[1]));
    } else if (inRatio > Math.max(ratio[0], ratio[1])) {
      h = height;
      w = (int) Math.rint(h * Math.max(ratio[0], ratio[1]));
    } else {
      w = width;
      h = height;
    }
    return new int[] {(height - h) / 2, (width - w) / 2, h, w};
  }

  @Test
  void randomResizedCropDrawsAsTorchvisionGetParams() {
    ImageResize rrc = ImageResize.randomResizedCrop(0.08, 1, 3.0 / 4, 4.0 / 3);
    ExampleRandom a = new ExampleRandom();
    ExampleRandom b = new ExampleRandom();
    int[] box = new int[8];
    int[][] sizes = {{61, 83}, {375, 500}, {500, 333}, {10, 300}, {224, 224}, {1, 1}};
    for (int[] s : sizes) {
      for (long seed = 0; seed < 500; seed++) {
        a.reset(seed);
        b.reset(seed);
        rrc.box(s[0], s[1], 24, 24, a, box);
        int[] want =
            torchvisionBox(s[0], s[1], new double[] {0.08, 1}, new double[] {3.0 / 4, 4.0 / 3}, b);
        assertThat(new int[] {box[0], box[1], box[2], box[3]})
            .as("%dx%d seed %d", s[0], s[1], seed)
            .containsExactly(want);
        assertThat(box[0] + box[2]).isLessThanOrEqualTo(s[0]);
        assertThat(box[1] + box[3]).isLessThanOrEqualTo(s[1]);
        assertThat(new int[] {box[4], box[5], box[6], box[7]}).containsExactly(24, 24, 0, 0);
      }
    }
  }

  @Test
  void randomResizedCropFallsBackToTheCentreAsTorchvision() {
    // Whole-image area with ratios 2..3 never fits a square image: 10 misses, then the centre
    // box at the nearest ratio (w = width, h = round(width / 2)).
    ImageResize rrc = ImageResize.randomResizedCrop(1, 1, 2, 3);
    ExampleRandom r = new ExampleRandom();
    r.reset(5);
    int[] box = new int[8];
    rrc.box(100, 100, 24, 24, r, box);
    assertThat(new int[] {box[0], box[1], box[2], box[3]}).containsExactly(25, 0, 50, 100);
    // A very wide image with the default ratios: full height, width = round(h * 4/3)
    ImageResize def = ImageResize.randomResizedCrop(1, 1, 3.0 / 4, 4.0 / 3);
    r.reset(6);
    def.box(30, 300, 24, 24, r, box);
    assertThat(new int[] {box[0], box[1], box[2], box[3]}).containsExactly(0, 130, 30, 40);
  }

  @Test
  void randomResizedCropDecodesItsBoxResized() throws IOException {
    byte[] file = resource("src.png");
    byte[] whole = decodeWhole(file, 61, 83, 3);
    ImageResize rrc = ImageResize.randomResizedCrop(0.08, 1, 3.0 / 4, 4.0 / 3);
    for (long seed = 0; seed < 20; seed++) {
      Images images = new Images(rrc);
      images.seed(seed);
      byte[] got = images.decodeBytes(file, 0, file.length, 16, 16, 3).clone();
      ExampleRandom r = new ExampleRandom();
      r.reset(seed);
      int[] box = new int[8];
      rrc.box(61, 83, 16, 16, r, box);
      byte[] ref = reference(whole, 83, 3, box[0], box[1], box[2], box[3], 16, 16, 0, 0, 16, 16);
      assertThat(got).as("seed " + seed).isEqualTo(ref);
    }
  }

  @Test
  void randomResizedCropWithoutASeedFailsClearly() {
    byte[] file = resource("src.png");
    Images images = new Images(ImageResize.randomResizedCrop(0.5, 1, 1, 1));
    assertThatThrownBy(() -> images.decodeBytes(file, 0, file.length, 8, 8, 3))
        .hasMessageContaining("needs each example's seed");
  }

  @Test
  void parsesTheAugmentationAndTheResize() {
    ImageAugment a = ImageAugment.parse("random-resized-crop,flip", ImageAugment.Layout.HWC);
    assertThat(ImageAugment.resizeOf(a.training()))
        .hasToString("random-resized-crop:0.08-1,0.75-1.3333333333333333");
    assertThat(a.inference()).isNull();
    ImageAugment b =
        ImageAugment.parse("random-resized-crop:0.25-1,3/4-4/3,flip", ImageAugment.Layout.CHW);
    assertThat(ImageAugment.resizeOf(b.training()).toString())
        .isEqualTo("random-resized-crop:0.25-1,0.75-1.3333333333333333");
    ImageAugment c = ImageAugment.parse("random-resized-crop:0.5-1", ImageAugment.Layout.CHW);
    assertThat(ImageAugment.resizeOf(c.training()).toString())
        .startsWith("random-resized-crop:0.5-1,");
    assertThatThrownBy(
            () -> ImageAugment.parse("flip,random-resized-crop", ImageAugment.Layout.HWC))
        .hasMessageContaining("random-resized-crop must come first");
    assertThatThrownBy(
            () -> ImageAugment.parse("random-resized-crop:0.5-2", ImageAugment.Layout.HWC))
        .hasMessageContaining("expected 0 < min <= max <= 1");
    assertThatThrownBy(() -> ImageAugment.parse("random-resized-crop:x", ImageAugment.Layout.HWC))
        .hasMessageContaining("is not a range");
    assertThat(ImageResize.parse("shorter:256").shorterSide()).isEqualTo(256);
    assertThatThrownBy(() -> ImageResize.parse("longer:3"))
        .hasMessageContaining("expected shorter:N");
  }
}
