package dev.sparktrainer.data;

import java.awt.Rectangle;
import java.awt.color.ColorSpace;
import java.awt.image.BufferedImage;
import java.awt.image.ColorModel;
import java.awt.image.ComponentColorModel;
import java.awt.image.ComponentSampleModel;
import java.awt.image.DataBuffer;
import java.awt.image.DataBufferByte;
import java.awt.image.DataBufferUShort;
import java.awt.image.IndexColorModel;
import java.awt.image.Raster;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Iterator;
import javax.imageio.IIOException;
import javax.imageio.ImageIO;
import javax.imageio.ImageReadParam;
import javax.imageio.ImageReader;
import javax.imageio.stream.ImageInputStream;
import javax.imageio.stream.MemoryCacheImageInputStream;

/**
 * Decodes encoded images (PNG, JPEG, BMP, GIF: whatever ImageIO reads) of any size into the
 * declared {@code [height, width, channels]} as HWC floats in 0..1, each one of the 256 values
 * {@code k / 255f}.
 *
 * <p>Pixels are read from the decoded raster's own buffer (no per-pixel {@code getRGB}): 8-bit sRGB
 * and grey as they are, 16-bit samples rounded to the nearest byte ({@code round(v / 257)}),
 * palettes through their colours, alpha dropped (as PIL's {@code convert("RGB")}); a grey image
 * read into 3 channels repeats its grey; a colour image read into one channel is the rounded
 * weighted grey {@code round(0.299 r + 0.587 g + 0.114 b)}. Only colour spaces other than sRGB and
 * grey (an ICC profile) go through Java2D's colour conversion ({@code getRGB} over the whole image
 * at once). A JPEG's EXIF orientation is applied before anything else (as PIL's {@code
 * ImageOps.exif_transpose}).
 *
 * <p>An image of another size than the declared one is resized by an {@link ImageResize} (default:
 * shorter side to the larger declared side, then the centre), with {@link ImageResample}'s bilinear
 * antialiased filter (PIL's). Only the box that the resize takes is decoded ({@code
 * ImageReadParam.setSourceRegion}). Not thread-safe: one per decoding thread.
 */
final class Images {
  private static final ThreadLocal<ImageReader> JPEG = new ThreadLocal<>();
  private static final ThreadLocal<ImageReader> PNG = new ThreadLocal<>();

  private final ImageResize resize;
  private final ImageResample resample = new ImageResample();
  private final ExampleRandom random = new ExampleRandom();
  private boolean seeded;
  private long seedValue;
  private final int[] box = new int[8];
  private byte[] pixels = new byte[0];
  private byte[] turned = new byte[0];
  private byte[] outBytes = new byte[0];
  private int[] row = new int[0];
  private int[] palette = new int[256];

  /** Where the decoded images and their time are counted; null for nowhere. */
  ImageClock clock;

  /** Decode only the box ({@code setSourceRegion}); off: decode the whole photo (benchmarks). */
  boolean regionDecode = true;

  /**
   * Also subsample the box in the decoder when it is at least twice the output ({@code
   * setSourceSubsampling}: every s-th pixel, no filtering) — measured in bin/bench-images, off.
   */
  boolean subsample;

  Images(ImageResize resize) {
    this.resize = resize == null ? ImageResize.DEFAULT : resize;
  }

  /** The resize this decoder applies. */
  ImageResize resize() {
    return resize;
  }

  /**
   * Seeds the draws of the next image's random box (random-resized-crop): from the example's own
   * seed, so the same example gets the same box whatever the thread or path.
   */
  void seed(long seed) {
    seedValue = seed;
    seeded = true;
  }

  /** Forgets the seed: the next random box needs a new one (one example's images share it). */
  void unseed() {
    seeded = false;
  }

  /**
   * Decodes into {@code out[off ..]} as {@code [height, width, channels]} with 1 (grey) or 3 (RGB)
   * channels, with the default resize.
   *
   * @throws IOException if the bytes are not an image
   */
  static void decode(
      byte[] buf, int bOff, int bLen, int height, int width, int channels, float[] out, int off)
      throws IOException {
    new Images(null).decodeImage(buf, bOff, bLen, height, width, channels, out, off);
  }

  /**
   * Decodes into {@code out[off ..]} as {@code [height, width, channels]} (1 or 3 channels),
   * resized as this decoder's {@link ImageResize} says.
   *
   * @throws IOException naming what is wrong with the image
   */
  void decodeImage(
      byte[] buf, int bOff, int bLen, int height, int width, int channels, float[] out, int off)
      throws IOException {
    long start = clock == null ? 0 : System.nanoTime();
    byte[] bytes = decodeBytes(buf, bOff, bLen, height, width, channels);
    int n = height * width * channels;
    for (int i = 0; i < n; i++) {
      out[off + i] = (bytes[i] & 0xFF) / 255f;
    }
    if (clock != null) {
      clock.add(System.nanoTime() - start);
    }
  }

  /**
   * Decodes into {@code out[off ..]} as bytes (HWC), four to a float slot as raw bits ({@link
   * DatasetSpec.Feature#bytes()}): {@code ceil(height * width * channels / 4)} slots, in native
   * byte order, the last slot's unused bytes 0. No float arithmetic touches them.
   *
   * @throws IOException naming what is wrong with the image
   */
  void decodeImageBytes(
      byte[] buf, int bOff, int bLen, int height, int width, int channels, float[] out, int off)
      throws IOException {
    long start = clock == null ? 0 : System.nanoTime();
    byte[] bytes = decodeBytes(buf, bOff, bLen, height, width, channels);
    pack(bytes, height * width * channels, out, off);
    if (clock != null) {
      clock.add(System.nanoTime() - start);
    }
  }

  /**
   * Decodes into {@code column} (a batch column, native order) at byte {@code at}: {@code height *
   * width * channels} bytes, then zeros up to the row's whole slots (as {@link #decodeImageBytes}).
   *
   * @throws IOException naming what is wrong with the image
   */
  void decodeImageBytesInto(
      byte[] buf,
      int bOff,
      int bLen,
      int height,
      int width,
      int channels,
      java.nio.ByteBuffer column,
      int at)
      throws IOException {
    long start = clock == null ? 0 : System.nanoTime();
    byte[] bytes = decodeBytes(buf, bOff, bLen, height, width, channels);
    int n = height * width * channels;
    column.put(at, bytes, 0, n);
    for (int i = n; i % 4 != 0; i++) {
      column.put(at + i, (byte) 0);
    }
    if (clock != null) {
      clock.add(System.nanoTime() - start);
    }
  }

  /**
   * Packs {@code n} bytes into {@code ceil(n / 4)} float slots from {@code off}: each slot the raw
   * bits of four bytes in native order (a bulk copy), so that the slots copied as floats into a
   * native-order buffer are the bytes again.
   */
  static void pack(byte[] bytes, int n, float[] out, int off) {
    int whole = n / 4;
    java.nio.ByteBuffer.wrap(bytes, 0, 4 * whole)
        .order(java.nio.ByteOrder.nativeOrder())
        .asFloatBuffer()
        .get(out, off, whole);
    if (n % 4 != 0) {
      byte[] last = new byte[4];
      System.arraycopy(bytes, 4 * whole, last, 0, n % 4);
      out[off + whole] =
          java.nio.ByteBuffer.wrap(last).order(java.nio.ByteOrder.nativeOrder()).getFloat(0);
    }
  }

  /**
   * Decodes to bytes: the returned array (this decoder's, valid until the next call) holds {@code
   * height * width * channels} bytes, HWC.
   */
  byte[] decodeBytes(byte[] buf, int bOff, int bLen, int height, int width, int channels)
      throws IOException {
    if (channels != 1 && channels != 3) {
      throw new IOException("images need 1 or 3 channels, not " + channels);
    }
    boolean jpeg = bLen > 3 && (buf[bOff] & 0xFF) == 0xFF && (buf[bOff + 1] & 0xFF) == 0xD8;
    boolean png =
        bLen > 8
            && (buf[bOff] & 0xFF) == 0x89
            && buf[bOff + 1] == 'P'
            && buf[bOff + 2] == 'N'
            && buf[bOff + 3] == 'G';
    int orientation = jpeg ? exifOrientation(buf, bOff, bLen) : 1;
    ImageReader reader = reader(jpeg, png, buf, bOff, bLen);
    boolean own = !jpeg && !png; // a reader of another format, made for this image
    ImageInputStream in =
        new MemoryCacheImageInputStream(new ByteArrayInputStream(buf, bOff, bLen));
    String[] warning = new String[1];
    BufferedImage img;
    int srcH;
    int srcW;
    int regionTop = 0;
    int regionLeft = 0;
    try {
      reader.setInput(in, true, true);
      reader.addIIOReadWarningListener((source, w) -> warning[0] = w);
      srcW = reader.getWidth(0);
      srcH = reader.getHeight(0);
      boolean swapped = orientation >= 5;
      int h = swapped ? srcW : srcH;
      int w = swapped ? srcH : srcW;
      planBox(h, w, height, width);
      ImageReadParam param = reader.getDefaultReadParam();
      if (orientation == 1 && regionDecode && (box[2] != srcH || box[3] != srcW)) {
        // Decode only the box (the JPEG reader still parses the rows above it, but converts and
        // keeps only the window).
        param.setSourceRegion(new Rectangle(box[1], box[0], box[3], box[2]));
        regionTop = box[0];
        regionLeft = box[1];
      }
      int step = 1;
      while (subsample
          && orientation == 1
          && box[2] / (2 * step) >= box[4]
          && box[3] / (2 * step) >= box[5]) {
        step *= 2;
      }
      if (step > 1) {
        param.setSourceRegion(new Rectangle(box[1], box[0], box[3], box[2]));
        param.setSourceSubsampling(step, step, 0, 0);
      }
      img = reader.read(0, param);
      if (step > 1) { // the box is now the whole subsampled image
        regionTop = 0;
        regionLeft = 0;
        box[0] = 0;
        box[1] = 0;
        box[2] = img.getHeight();
        box[3] = img.getWidth();
      }
    } catch (IIOException e) {
      // ImageIO's JPEG reader refuses some 4-component (CMYK, YCCK) JPEGs, those with an ICC
      // profile as Photoshop writes them, with a bare "Unsupported Image Type".
      if (jpeg && jpegComponents(buf, bOff, bLen) == 4) {
        throw new IOException(
            "a CMYK JPEG (4 colour components), which ImageIO cannot decode ("
                + e.getMessage()
                + "): write the images as RGB or grey (JPEG or PNG) when making the data",
            e);
      }
      throw new IOException(
          "not an image ImageIO can read (" + bLen + " bytes): " + e.getMessage(), e);
    } catch (RuntimeException e) { // ImageIO's readers throw these on some corrupt input
      throw new IOException("a corrupt image (" + bLen + " bytes): " + e, e);
    } finally {
      reader.removeAllIIOReadWarningListeners();
      reader.setInput(null);
      if (own) {
        reader.dispose();
      }
      in.close();
    }
    if (warning[0] != null && jpeg) {
      // libjpeg's warnings are damaged data (a premature end, corrupt entropy-coded bytes): ImageIO
      // would hand back a half-grey image
      throw new IOException("a corrupt or truncated image (" + bLen + " bytes): " + warning[0]);
    }
    if (jpeg && img.getRaster().getNumBands() == 4 && jpegComponents(buf, bOff, bLen) == 4) {
      throw new IOException(
          "a CMYK JPEG (4 colour components), which ImageIO reads without converting its colours:"
              + " write the images as RGB or grey (JPEG or PNG) when making the data");
    }
    int rh = img.getHeight();
    int rw = img.getWidth();
    int size = rh * rw * channels;
    if (pixels.length < size) {
      pixels = new byte[size];
    }
    toBytes(img, channels, pixels);
    byte[] src = pixels;
    if (orientation != 1) {
      if (turned.length < size) {
        turned = new byte[size];
      }
      orient(pixels, rh, rw, channels, orientation, turned);
      src = turned;
      if (orientation >= 5) {
        int t = rh;
        rh = rw;
        rw = t;
      }
    }
    int n = height * width * channels;
    if (outBytes.length < n) {
      outBytes = new byte[n];
    }
    if (rh == height
        && rw == width
        && box[4] == height
        && box[5] == width
        && box[2] == rh
        && box[3] == rw) {
      System.arraycopy(src, 0, outBytes, 0, n); // already the size
      return outBytes;
    }
    resample.resample(
        src,
        rh,
        rw,
        channels,
        box[0] - regionTop,
        box[1] - regionLeft,
        box[2],
        box[3],
        box[4],
        box[5],
        box[6],
        box[7],
        height,
        width,
        outBytes);
    return outBytes;
  }

  /** The box of an oriented {@code h x w} image (see {@link ImageResize#box}). */
  private void planBox(int h, int w, int height, int width) throws IOException {
    if (resize.random() && !seeded) {
      throw new IllegalStateException(
          "random-resized-crop needs each example's seed: the decoder was not seeded");
    }
    random.reset(seedValue); // every image of the example gets the same draws
    try {
      resize.box(h, w, height, width, random, box);
    } catch (IllegalArgumentException e) {
      throw new IOException(e.getMessage(), e);
    }
  }

  private static ImageReader reader(boolean jpeg, boolean png, byte[] buf, int off, int len)
      throws IOException {
    ThreadLocal<ImageReader> cached = jpeg ? JPEG : png ? PNG : null;
    ImageReader r = cached == null ? null : cached.get();
    if (r != null) {
      return r;
    }
    if (cached != null) {
      Iterator<ImageReader> it = ImageIO.getImageReadersByFormatName(jpeg ? "jpeg" : "png");
      if (!it.hasNext()) {
        throw new IOException("ImageIO has no " + (jpeg ? "JPEG" : "PNG") + " reader");
      }
      r = it.next();
      cached.set(r);
      return r;
    }
    try (ImageInputStream probe =
        new MemoryCacheImageInputStream(new ByteArrayInputStream(buf, off, len))) {
      Iterator<ImageReader> it = ImageIO.getImageReaders(probe);
      if (!it.hasNext()) {
        throw new IOException("not an image ImageIO can read (" + len + " bytes)");
      }
      return it.next();
    }
  }

  /**
   * The decoded raster's pixels as {@code channels} bytes each, row-major: from the data buffer
   * itself for component images in sRGB or grey (8 or 16 bits) and for palettes.
   */
  private void toBytes(BufferedImage img, int channels, byte[] dst) {
    Raster r = img.getRaster();
    int h = r.getHeight();
    int w = r.getWidth();
    ColorModel cm = img.getColorModel();
    ColorSpace cs = cm.getColorSpace();
    DataBuffer db = r.getDataBuffer();
    int colours = cm.getNumColorComponents();
    boolean known =
        (colours == 3 && cs.isCS_sRGB()) || (colours == 1 && cs.getType() == ColorSpace.TYPE_GRAY);
    if (cm instanceof ComponentColorModel
        && known
        && r.getSampleModel() instanceof ComponentSampleModel sm
        && r.getSampleModelTranslateX() == 0
        && r.getSampleModelTranslateY() == 0
        && db.getNumBanks() == 1
        && (db instanceof DataBufferByte || db instanceof DataBufferUShort)) {
      int[] bands = sm.getBandOffsets();
      int ps = sm.getPixelStride();
      int ss = sm.getScanlineStride();
      int base = db.getOffset();
      byte[] b8 = db instanceof DataBufferByte bb ? bb.getData() : null;
      short[] b16 = db instanceof DataBufferUShort bs ? bs.getData() : null;
      int c0 = bands[0];
      int c1 = colours == 3 ? bands[1] : c0;
      int c2 = colours == 3 ? bands[2] : c0;
      int o = 0;
      for (int y = 0; y < h; y++) {
        int p = base + y * ss;
        for (int x = 0; x < w; x++, p += ps) {
          int rr;
          int gg;
          int bv;
          if (b8 != null) {
            rr = b8[p + c0] & 0xFF;
            if (colours == 1) {
              dst[o++] = (byte) rr;
              if (channels == 3) {
                dst[o++] = (byte) rr;
                dst[o++] = (byte) rr;
              }
              continue;
            }
            gg = b8[p + c1] & 0xFF;
            bv = b8[p + c2] & 0xFF;
          } else {
            rr = ((b16[p + c0] & 0xFFFF) * 2 + 257) / 514; // round(v / 257)
            gg = ((b16[p + c1] & 0xFFFF) * 2 + 257) / 514;
            bv = ((b16[p + c2] & 0xFFFF) * 2 + 257) / 514;
          }
          o = put(dst, o, channels, rr, gg, bv);
        }
      }
      return;
    }
    if (cm instanceof IndexColorModel icm) {
      int size = icm.getMapSize();
      if (palette.length < size) {
        palette = new int[size];
      }
      icm.getRGBs(palette);
      if (row.length < w) {
        row = new int[w];
      }
      int o = 0;
      for (int y = 0; y < h; y++) {
        r.getSamples(0, y, w, 1, 0, row);
        for (int x = 0; x < w; x++) {
          int rgb = palette[row[x]];
          o = put(dst, o, channels, (rgb >> 16) & 0xFF, (rgb >> 8) & 0xFF, rgb & 0xFF);
        }
      }
      return;
    }
    // Another colour space (an ICC profile): Java2D converts to sRGB, the whole image at once.
    int[] argb = img.getRGB(0, 0, w, h, null, 0, w);
    int o = 0;
    for (int rgb : argb) {
      o = put(dst, o, channels, (rgb >> 16) & 0xFF, (rgb >> 8) & 0xFF, rgb & 0xFF);
    }
  }

  private static int put(byte[] dst, int o, int channels, int r, int g, int b) {
    if (channels == 1) {
      // The weighted grey rounded to a byte: every value an image decodes to is k / 255f, so
      // image transfer uint8 (one byte per pixel, DeviceImages) carries it exactly.
      dst[o] = (byte) Math.round(0.299f * r + 0.587f * g + 0.114f * b);
      return o + 1;
    }
    dst[o] = (byte) r;
    dst[o + 1] = (byte) g;
    dst[o + 2] = (byte) b;
    return o + 3;
  }

  /**
   * Writes the {@code h x w} image {@code src} turned upright by EXIF orientation {@code o} (2..8)
   * to {@code dst}: 2 mirrored, 3 rotated 180°, 4 flipped, 5 transposed, 6 rotated 90° clockwise, 7
   * transversed, 8 rotated 90° counter-clockwise (what PIL's {@code exif_transpose} does).
   */
  static void orient(byte[] src, int h, int w, int ch, int o, byte[] dst) {
    boolean swap = o >= 5;
    int oh = swap ? w : h;
    int ow = swap ? h : w;
    int d = 0;
    for (int y = 0; y < oh; y++) {
      for (int x = 0; x < ow; x++) {
        int sy;
        int sx;
        switch (o) {
          case 2 -> {
            sy = y;
            sx = w - 1 - x;
          }
          case 3 -> {
            sy = h - 1 - y;
            sx = w - 1 - x;
          }
          case 4 -> {
            sy = h - 1 - y;
            sx = x;
          }
          case 5 -> {
            sy = x;
            sx = y;
          }
          case 6 -> {
            sy = h - 1 - x;
            sx = y;
          }
          case 7 -> {
            sy = h - 1 - x;
            sx = w - 1 - y;
          }
          case 8 -> {
            sy = x;
            sx = w - 1 - y;
          }
          default -> {
            sy = y;
            sx = x;
          }
        }
        System.arraycopy(src, (sy * w + sx) * ch, dst, d, ch);
        d += ch;
      }
    }
  }

  /**
   * The EXIF orientation (1..8) of a JPEG, from its APP1 {@code Exif} segment's first IFD (tag
   * 0x0112); 1 when it has none or it does not parse.
   */
  static int exifOrientation(byte[] b, int off, int len) {
    int end = off + len;
    int i = off + 2;
    while (i + 4 <= end && (b[i] & 0xFF) == 0xFF) {
      int marker = b[i + 1] & 0xFF;
      int length = (b[i + 2] & 0xFF) << 8 | (b[i + 3] & 0xFF);
      if (marker == 0xDA || marker == 0xD9 || length < 2) {
        return 1;
      }
      int seg = i + 4;
      int segEnd = Math.min(end, i + 2 + length);
      if (marker == 0xE1
          && segEnd - seg > 14
          && b[seg] == 'E'
          && b[seg + 1] == 'x'
          && b[seg + 2] == 'i'
          && b[seg + 3] == 'f'
          && b[seg + 4] == 0
          && b[seg + 5] == 0) {
        return tiffOrientation(b, seg + 6, segEnd);
      }
      i += 2 + length;
    }
    return 1;
  }

  private static int tiffOrientation(byte[] b, int t, int end) {
    boolean le = b[t] == 'I' && b[t + 1] == 'I';
    if (!le && !(b[t] == 'M' && b[t + 1] == 'M')) {
      return 1;
    }
    long ifd = t + u32(b, t + 4, le);
    if (ifd < t || ifd + 2 > end) {
      return 1;
    }
    int entries = u16(b, (int) ifd, le);
    for (int e = 0; e < entries; e++) {
      int p = (int) ifd + 2 + 12 * e;
      if (p + 12 > end) {
        return 1;
      }
      if (u16(b, p, le) == 0x0112 && u16(b, p + 2, le) == 3) { // SHORT
        int v = u16(b, p + 8, le);
        return v >= 1 && v <= 8 ? v : 1;
      }
    }
    return 1;
  }

  private static int u16(byte[] b, int p, boolean le) {
    int x = b[p] & 0xFF;
    int y = b[p + 1] & 0xFF;
    return le ? y << 8 | x : x << 8 | y;
  }

  private static long u32(byte[] b, int p, boolean le) {
    long hi = u16(b, le ? p + 2 : p, le);
    long lo = u16(b, le ? p : p + 2, le);
    return hi << 16 | lo;
  }

  /**
   * The number of colour components of a JPEG (from its frame header), or -1 if the bytes are not a
   * JPEG or have no frame header.
   */
  static int jpegComponents(byte[] b, int off, int len) {
    int end = off + len;
    if (len < 4 || (b[off] & 0xFF) != 0xFF || (b[off + 1] & 0xFF) != 0xD8) {
      return -1;
    }
    int i = off + 2;
    while (i + 4 <= end && (b[i] & 0xFF) == 0xFF) {
      int marker = b[i + 1] & 0xFF;
      int length = (b[i + 2] & 0xFF) << 8 | (b[i + 3] & 0xFF);
      // SOF0..SOF15, except DHT (C4), JPG (C8) and DAC (CC): precision, height, width, components
      if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
        return i + 9 < end ? b[i + 9] & 0xFF : -1;
      }
      if (marker == 0xDA || length < 2) {
        return -1; // the scan before any frame header, or a broken segment
      }
      i += 2 + length;
    }
    return -1;
  }
}
