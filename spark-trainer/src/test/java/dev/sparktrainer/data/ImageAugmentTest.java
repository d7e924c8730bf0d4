package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.data.ImageAugment.Layout;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The built-in image augmentations on small images whose results are known. */
class ImageAugmentTest {
  /**
   * One image column [c, h, w] (CHW) or [h, w, c] (HWC), plus a tabular column that must stay as it
   * is.
   */
  private static Example example(Layout layout, int c, int h, int w, float[] pixels, long seed) {
    DatasetSpec.Builder b = DatasetSpec.builder().addPath("x");
    if (layout == Layout.CHW) {
      b.addFeature("img", c, h, w);
    } else {
      b.addFeature("img", h, w, c);
    }
    DatasetSpec spec = b.addFeature("side", 2).setLabel("y", DatasetSpec.LabelType.INT).build();
    Example ex = new Example(spec);
    float[] values = new float[pixels.length + 2];
    System.arraycopy(pixels, 0, values, 0, pixels.length);
    values[pixels.length] = 7;
    values[pixels.length + 1] = 8;
    ex.reset(values, 3, 0, 0, 0, seed);
    return ex;
  }

  private static float[] image(Example ex) {
    return Arrays.copyOf(ex.values(), ex.size(0));
  }

  private static float[] seq(int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) {
      a[i] = i + 1;
    }
    return a;
  }

  /** The first draws of the generator an example with {@code seed} gets. */
  private static ExampleRandom draws(long seed) {
    ExampleRandom r = new ExampleRandom();
    r.reset(seed);
    return r;
  }

  @Test
  void flipMirrorsRowsOfEveryChannelOrNothing() throws Exception {
    // 2 channels of 2x3: 1 2 3 / 4 5 6 and 7 8 9 / 10 11 12
    float[] mirrored = {3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10};
    int flipped = 0;
    for (long seed = 0; seed < 40; seed++) {
      Example ex = example(Layout.CHW, 2, 2, 3, seq(12), seed);
      ImageAugment.horizontalFlip(Layout.CHW).apply(ex);
      boolean flip = draws(seed).nextBoolean();
      assertThat(image(ex)).containsExactly(flip ? mirrored : seq(12));
      assertThat(ex.get(1, 0)).isEqualTo(7f);
      assertThat(ex.get(1, 1)).isEqualTo(8f);
      flipped += flip ? 1 : 0;
    }
    assertThat(flipped).as("about half of the examples").isBetween(10, 30);
  }

  @Test
  void flipOfAnHwcImageKeepsEachPixelsChannelsTogether() throws Exception {
    // 1 row of 3 pixels, RGB: (1,2,3) (4,5,6) (7,8,9)
    long seed = firstSeed(true);
    Example ex = example(Layout.HWC, 3, 1, 3, seq(9), seed);
    ImageAugment.horizontalFlip(Layout.HWC).apply(ex);
    assertThat(image(ex)).containsExactly(7, 8, 9, 4, 5, 6, 1, 2, 3);
  }

  private static long firstSeed(boolean flip) {
    for (long s = 0; ; s++) {
      if (draws(s).nextBoolean() == flip) {
        return s;
      }
    }
  }

  /**
   * A shift of (dy, dx) with zeros coming in, as padding then cropping at (p + dy, p + dx) does.
   */
  @Test
  void cropShiftsByTheDrawnOffsetWithZeroPadding() throws Exception {
    int c = 2;
    int h = 4;
    int w = 5;
    int p = 2;
    boolean sawShift = false;
    for (long seed = 0; seed < 60; seed++) {
      Example ex = example(Layout.CHW, c, h, w, seq(c * h * w), seed);
      ImageAugment.randomCrop(p, Layout.CHW).apply(ex);
      ExampleRandom r = draws(seed);
      int dy = r.nextInt(2 * p + 1) - p;
      int dx = r.nextInt(2 * p + 1) - p;
      float[] want = new float[c * h * w];
      for (int k = 0; k < c; k++) {
        for (int y = 0; y < h; y++) {
          for (int x = 0; x < w; x++) {
            int sy = y + dy;
            int sx = x + dx;
            want[(k * h + y) * w + x] =
                sy < 0 || sy >= h || sx < 0 || sx >= w ? 0 : (k * h + sy) * w + sx + 1;
          }
        }
      }
      assertThat(image(ex)).as("seed %d, shift (%d, %d)", seed, dy, dx).containsExactly(want);
      assertThat(ex.get(1, 0)).isEqualTo(7f);
      sawShift |= dy == -p && dx == p;
    }
    assertThat(sawShift).as("extreme shifts are drawn").isTrue();
  }

  /**
   * By hand: a 3x3 single-channel image shifted down-left by one pixel (window at the padded
   * image's (0, 2)).
   */
  @Test
  void cropOfAKnownImage() throws Exception {
    long seed = 0;
    while (true) {
      ExampleRandom r = draws(seed);
      if (r.nextInt(3) == 0 && r.nextInt(3) == 2) {
        break; // dy = -1, dx = +1
      }
      seed++;
    }
    Example ex = example(Layout.HWC, 1, 3, 3, seq(9), seed);
    ImageAugment.randomCrop(1, Layout.HWC).apply(ex);
    // 1 2 3 / 4 5 6 / 7 8 9  ->  out(y, x) = in(y - 1, x + 1)
    assertThat(image(ex)).containsExactly(0, 0, 0, 2, 3, 0, 5, 6, 0);
  }

  /** The same crop and flip in both layouts: the HWC result is the transpose of the CHW one. */
  @Test
  void layoutsAgree() throws Exception {
    int c = 3;
    int h = 4;
    int w = 6;
    for (long seed = 0; seed < 20; seed++) {
      float[] chw = seq(c * h * w);
      float[] hwc = new float[chw.length];
      for (int k = 0; k < c; k++) {
        for (int i = 0; i < h * w; i++) {
          hwc[i * c + k] = chw[k * h * w + i];
        }
      }
      ExampleTransform t1 = ImageAugment.parse("crop:2,flip", Layout.CHW).training();
      ExampleTransform t2 = ImageAugment.parse("crop:2,flip", Layout.HWC).training();
      Example a = example(Layout.CHW, c, h, w, chw, seed);
      Example b = example(Layout.HWC, c, h, w, hwc, seed);
      t1.apply(a);
      t2.apply(b);
      for (int k = 0; k < c; k++) {
        for (int i = 0; i < h * w; i++) {
          assertThat(b.get(0, i * c + k)).isEqualTo(a.get(0, k * h * w + i));
        }
      }
    }
  }

  @Test
  void normalizeUsesEachChannelsMeanAndStd() throws Exception {
    // CHW, 2 channels of 1x2: (1, 3) and (10, 30)
    Example ex = example(Layout.CHW, 2, 1, 2, new float[] {1, 3, 10, 30}, 0);
    ImageAugment.normalize(new float[] {2, 20}, new float[] {0.5f, 10}, Layout.CHW).apply(ex);
    assertThat(image(ex)).containsExactly(-2, 2, -1, 1);
    assertThat(ex.get(1, 0)).isEqualTo(7f);
    // HWC: the channel is the last index
    Example hwc = example(Layout.HWC, 2, 1, 2, new float[] {1, 10, 3, 30}, 0);
    ImageAugment.parse("normalize:2,20/0.5,10", Layout.HWC).training().apply(hwc);
    assertThat(image(hwc)).containsExactly(-2, -1, 2, 1);
    assertThat(hwc.label()).isEqualTo(3);
  }

  @Test
  void parseKeepsOnlyNormalizationForInference() throws Exception {
    ImageAugment a =
        ImageAugment.parse("flip, crop:4, normalize:0.5,0.25,0.75/2,4,0.5", Layout.CHW);
    assertThat(a.inference()).isNotNull();
    assertThat(ImageAugment.parse("flip,crop:1", Layout.CHW).inference()).isNull();
    long seed = firstSeed(true);
    Example ex = example(Layout.CHW, 3, 1, 2, new float[] {1, 2, 3, 4, 5, 6}, seed);
    a.inference().apply(ex); // no flip, no crop: only (x - m) / s
    assertThat(image(ex)).containsExactly(0.25f, 0.75f, 0.6875f, 0.9375f, 8.5f, 10.5f);
  }

  @Test
  void badSpecsAndShapesAreClearErrors() {
    assertThatThrownBy(() -> ImageAugment.parse("flip,rotate:3", Layout.CHW))
        .hasMessageContaining("Invalid augmentation 'flip,rotate:3': unknown step 'rotate:3'")
        .hasMessageContaining("flip, crop:PADDING and normalize");
    assertThatThrownBy(() -> ImageAugment.parse("crop", Layout.CHW)).hasMessageContaining("crop:4");
    assertThatThrownBy(() -> ImageAugment.parse("crop:0", Layout.CHW))
        .hasMessageContaining("at least 1");
    assertThatThrownBy(() -> ImageAugment.parse("normalize:0.5,0.5", Layout.CHW))
        .hasMessageContaining("MEAN/STD");
    assertThatThrownBy(() -> ImageAugment.parse("normalize:0.5,0.5/1", Layout.CHW))
        .hasMessageContaining("as many means as standard deviations");
    assertThatThrownBy(() -> ImageAugment.parse("normalize:0.5/0", Layout.CHW))
        .hasMessageContaining("positive");
    ImageAugment a = ImageAugment.parse("flip,normalize:0.5,0.5,0.5/1,1,1", Layout.CHW);
    assertThatThrownBy(() -> a.check(new long[][] {{784}}, Layout.CHW))
        .hasMessageContaining("needs an image-shaped feature")
        .hasMessageContaining("[784]");
    assertThatThrownBy(() -> a.check(new long[][] {{1, 28, 28}}, Layout.CHW))
        .hasMessageContaining("the image [1, 28, 28] (CHW) has 1 channels");
    a.check(new long[][] {{3, 32, 32}, {5}}, Layout.CHW);
    Example flat = new Example(DatasetSpec.builder().addPath("x").addFeature("v", 4).build());
    flat.reset(new float[4], 0, 0, 0, 0, firstSeed(true));
    assertThatThrownBy(() -> ImageAugment.horizontalFlip(Layout.CHW).apply(flat))
        .hasMessageContaining("needs an image-shaped feature");
  }
}
