package dev.sparktrainer.data;

import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import javax.imageio.ImageIO;

/** Decodes encoded images (PNG, JPEG, BMP, GIF: whatever ImageIO reads) into HWC floats in 0..1. */
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
    BufferedImage img = ImageIO.read(new ByteArrayInputStream(buf, bOff, bLen));
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
          out[i++] = (0.299f * r + 0.587f * g + 0.114f * b) / 255f;
        } else {
          out[i++] = r / 255f;
          out[i++] = g / 255f;
          out[i++] = b / 255f;
        }
      }
    }
  }
}
