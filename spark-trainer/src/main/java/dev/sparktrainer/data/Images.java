package dev.sparktrainer.data;

import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import javax.imageio.IIOException;
import javax.imageio.ImageIO;

/**
 * Decodes encoded images (PNG, JPEG, BMP, GIF: whatever ImageIO reads) into HWC floats in 0..1,
 * each one of the 256 values {@code k / 255f}: 8-bit grey read as it is, anything else through its
 * sRGB colour ({@code getRGB}), and one channel from a colour as the rounded weighted grey {@code
 * round(0.299 r + 0.587 g + 0.114 b)}.
 */
final class Images {
  private Images() {}

  /**
   * Decodes into {@code out[off ..]} as {@code [height, width, channels]} with 1 (grey) or 3 (RGB)
   * channels.
   *
   * @throws IOException if the bytes are not an image of that size
   */
  static void decode(
      byte[] buf, int bOff, int bLen, int height, int width, int channels, float[] out, int off)
      throws IOException {
    BufferedImage img;
    try {
      img = ImageIO.read(new ByteArrayInputStream(buf, bOff, bLen));
    } catch (IIOException e) {
      // ImageIO's JPEG reader refuses some 4-component (CMYK, YCCK) JPEGs, those with an ICC
      // profile as Photoshop writes them, with a bare "Unsupported Image Type".
      if (jpegComponents(buf, bOff, bLen) == 4) {
        throw new IOException(
            "a CMYK JPEG (4 colour components), which ImageIO cannot decode ("
                + e.getMessage()
                + "): write the images as RGB or grey (JPEG or PNG) when making the data",
            e);
      }
      throw e;
    }
    if (img == null) {
      throw new IOException("not an image ImageIO can read (" + bLen + " bytes)");
    }
    if (img.getHeight() != height || img.getWidth() != width) {
      throw new IOException(
          "image is "
              + img.getHeight()
              + "x"
              + img.getWidth()
              + ", expected "
              + height
              + "x"
              + width);
    }
    if (channels != 1 && channels != 3) {
      throw new IOException("images need 1 or 3 channels, not " + channels);
    }
    boolean grey = img.getType() == BufferedImage.TYPE_BYTE_GRAY;
    int i = off;
    for (int y = 0; y < height; y++) {
      for (int x = 0; x < width; x++) {
        if (grey && channels == 1) {
          out[i++] = img.getRaster().getSample(x, y, 0) / 255f;
          continue;
        }
        int rgb = img.getRGB(x, y);
        int r = (rgb >> 16) & 0xFF;
        int g = (rgb >> 8) & 0xFF;
        int b = rgb & 0xFF;
        if (channels == 1) {
          // The weighted grey rounded to a byte: every value an image decodes to is k / 255f, so
          // image transfer uint8 (one byte per pixel, DeviceImages) carries it exactly and both
          // paths give the same tensors.
          out[i++] = Math.round(0.299f * r + 0.587f * g + 0.114f * b) / 255f;
        } else {
          out[i++] = r / 255f;
          out[i++] = g / 255f;
          out[i++] = b / 255f;
        }
      }
    }
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
