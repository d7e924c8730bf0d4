package dev.sparktrainer.data;

/**
 * Bilinear resampling of 8-bit interleaved pixels with PIL's arithmetic ({@code Image.resize(size,
 * BILINEAR, box)}, what torchvision's transforms run on PIL images): the triangle filter widened by
 * the scale when shrinking (antialiasing), coefficients normalized then fixed to 22 fractional
 * bits, a horizontal pass into bytes (rounded, clamped), then a vertical one. Output pixels {@code
 * [o0, o0 + n)} of a resize to {@code full} pixels are computed alone, each exactly as in the whole
 * resize (torchvision's {@code Resize} then {@code CenterCrop}). Not thread-safe: one per decoding
 * thread (it keeps its tables and scratch rows).
 */
final class ImageResample {
  static final int PRECISION_BITS = 32 - 8 - 2;

  // Coefficient tables of the two passes: per output index its first input index, its count, and
  // `support` weights from k[i * stride].
  private int[] xMin = new int[0];
  private int[] xCount = new int[0];
  private int[] xK = new int[0];
  private int xStride;
  private int[] yMin = new int[0];
  private int[] yCount = new int[0];
  private int[] yK = new int[0];
  private int yStride;
  private byte[] tmp = new byte[0];
  private int[] acc = new int[0];

  /**
   * Resamples the box {@code (top, left, boxH, boxW)} of {@code src} ({@code srcH x srcW x ch},
   * row-major) as if resized to {@code fullH x fullW}, writing output rows {@code [oy, oy + outH)}
   * and columns {@code [ox, ox + outW)} to {@code dst} ({@code outH x outW x ch}).
   */
  void resample(
      byte[] src,
      int srcH,
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
      int outW,
      byte[] dst) {
    boolean identityX = boxW == fullW;
    boolean identityY = boxH == fullH;
    if (identityX && identityY) { // a plain crop: scale 1 at integer offsets is the identity
      for (int y = 0; y < outH; y++) {
        System.arraycopy(
            src, ((top + oy + y) * srcW + left + ox) * ch, dst, y * outW * ch, outW * ch);
      }
      return;
    }
    // torchvision crops the box, then resizes it: the filter stops at the box's edges
    xStride = coefficients(boxW, fullW, ox, outW, true);
    yStride = coefficients(boxH, fullH, oy, outH, false);
    // Rows of the box the vertical pass reads
    int yFirst = yMin[0];
    int yLast = yMin[outH - 1] + yCount[outH - 1];
    int rows = yLast - yFirst;
    int rowBytes = outW * ch;
    if (tmp.length < rows * rowBytes) {
      tmp = new byte[rows * rowBytes];
    }
    // Horizontal pass (PIL's ImagingResampleHorizontal_8bpc) over the rows needed
    int half = 1 << (PRECISION_BITS - 1);
    for (int r = 0; r < rows; r++) {
      int srow = ((top + yFirst + r) * srcW + left) * ch;
      int trow = r * rowBytes;
      if (ch == 3) { // the three channels of a pixel at once
        for (int x = 0; x < outW; x++) {
          int k0 = x * xStride;
          int p = srow + xMin[x] * 3;
          int cnt = xCount[x];
          int s0 = half;
          int s1 = half;
          int s2 = half;
          for (int i = 0; i < cnt; i++, p += 3) {
            int k = xK[k0 + i];
            s0 += (src[p] & 0xFF) * k;
            s1 += (src[p + 1] & 0xFF) * k;
            s2 += (src[p + 2] & 0xFF) * k;
          }
          int t = trow + x * 3;
          tmp[t] = clip8(s0);
          tmp[t + 1] = clip8(s1);
          tmp[t + 2] = clip8(s2);
        }
        continue;
      }
      for (int x = 0; x < outW; x++) {
        int k0 = x * xStride;
        int base = srow + xMin[x] * ch;
        int cnt = xCount[x];
        for (int c = 0; c < ch; c++) {
          int ss = half;
          for (int i = 0, p = base + c; i < cnt; i++, p += ch) {
            ss += (src[p] & 0xFF) * xK[k0 + i];
          }
          tmp[trow + x * ch + c] = clip8(ss);
        }
      }
    }
    // Vertical pass (ImagingResampleVertical_8bpc)
    if (acc.length < rowBytes) {
      acc = new int[rowBytes];
    }
    for (int y = 0; y < outH; y++) {
      int k0 = y * yStride;
      int first = yMin[y] - yFirst;
      int cnt = yCount[y];
      int drow = y * rowBytes;
      // whole rows at a time (sequential, the same sums in the same order as per value)
      java.util.Arrays.fill(acc, 0, rowBytes, half);
      for (int i = 0; i < cnt; i++) {
        int k = yK[k0 + i];
        int p = (first + i) * rowBytes;
        for (int j = 0; j < rowBytes; j++) {
          acc[j] += (tmp[p + j] & 0xFF) * k;
        }
      }
      for (int j = 0; j < rowBytes; j++) {
        dst[drow + j] = clip8(acc[j]);
      }
    }
  }

  static byte clip8(int ss) {
    int v = ss >> PRECISION_BITS;
    return (byte) (v < 0 ? 0 : Math.min(v, 255));
  }

  /**
   * PIL's {@code precompute_coeffs} for the bilinear filter, {@code inSize} pixels resized to
   * {@code outSize}, for outputs {@code [o0, o0 + n)}, fixed to {@link #PRECISION_BITS} ({@code
   * normalize_coeffs_8bpc}); returns the table's stride.
   */
  private int coefficients(int inSize, int outSize, int o0, int n, boolean horizontal) {
    double in0 = 0;
    double scale = (double) inSize / outSize;
    double filterscale = Math.max(scale, 1.0);
    double support = 1.0 * filterscale; // the triangle filter's support is 1
    int ksize = (int) Math.ceil(support) * 2 + 1;
    int[] mins = horizontal ? xMin : yMin;
    int[] counts = horizontal ? xCount : yCount;
    int[] ks = horizontal ? xK : yK;
    if (mins.length < n) {
      mins = new int[n];
      counts = new int[n];
    }
    if (ks.length < n * ksize) {
      ks = new int[n * ksize];
    }
    double[] k = new double[ksize];
    double ss = 1.0 / filterscale;
    for (int o = 0; o < n; o++) {
      int xx = o0 + o;
      double center = in0 + (xx + 0.5) * scale;
      double ww = 0.0;
      int xmin = (int) (center - support + 0.5); // C's truncation toward zero
      if (xmin < 0) {
        xmin = 0;
      }
      int xmax = (int) (center + support + 0.5);
      if (xmax > inSize) {
        xmax = inSize;
      }
      xmax -= xmin;
      for (int x = 0; x < xmax; x++) {
        double w = triangle((x + xmin - center + 0.5) * ss);
        k[x] = w;
        ww += w;
      }
      for (int x = 0; x < xmax; x++) {
        if (ww != 0.0) {
          k[x] /= ww;
        }
        double v = k[x] * (1 << PRECISION_BITS);
        ks[o * ksize + x] = (int) (v < 0 ? v - 0.5 : v + 0.5); // trunc toward zero after +-0.5
      }
      mins[o] = xmin;
      counts[o] = xmax;
    }
    if (horizontal) {
      xMin = mins;
      xCount = counts;
      xK = ks;
    } else {
      yMin = mins;
      yCount = counts;
      yK = ks;
    }
    return ksize;
  }

  private static double triangle(double x) {
    if (x < 0.0) {
      x = -x;
    }
    return x < 1.0 ? 1.0 - x : 0.0;
  }
}
