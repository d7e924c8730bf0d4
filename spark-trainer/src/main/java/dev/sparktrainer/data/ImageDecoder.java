package dev.sparktrainer.data;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Iterator;
import javax.imageio.ImageIO;
import javax.imageio.ImageReader;
import javax.imageio.stream.ImageInputStream;
import javax.imageio.stream.MemoryCacheImageInputStream;

/**
 * Encoded images decoded outside the input pipeline, as the pipeline decodes them: batch inference
 * over a column of image bytes (the command line's {@code evaluate} and {@code predict}), and a
 * cheap check of image files before training. One decoder per thread, as the pipeline's.
 */
public final class ImageDecoder {
  private static final ThreadLocal<Images> DECODERS = new ThreadLocal<>();

  private ImageDecoder() {}

  /**
   * Decodes {@code bytes} to {@code [height, width, channels]} (1 or 3 channels) floats in 0..1,
   * HWC, resized by {@code resize} (null: {@link ImageResize#DEFAULT}) as the pipeline does.
   *
   * @throws IOException naming what is wrong with the image
   */
  public static float[] decode(
      byte[] bytes, int height, int width, int channels, ImageResize resize) throws IOException {
    ImageResize r = resize == null ? ImageResize.DEFAULT : resize;
    if (r.random()) {
      throw new IllegalArgumentException(
          "Invalid resize " + r + ": inference takes a fixed box (shorter:N or the default)");
    }
    Images images = DECODERS.get();
    if (images == null || !images.resize().equals(r)) {
      images = new Images(r);
      DECODERS.set(images);
    }
    byte[] px = images.decodeBytes(bytes, 0, bytes.length, height, width, channels);
    int n = height * width * channels;
    float[] out = new float[n];
    for (int i = 0; i < n; i++) {
      out[i] = (px[i] & 0xFF) / 255f;
    }
    return out;
  }

  /**
   * What is wrong with {@code bytes} as an image, read from its header only (no pixel is decoded):
   * null when ImageIO knows the format and can read the size, else the reason. A file cut short
   * after its header passes; the pipeline names it when it decodes it.
   */
  public static String problem(byte[] bytes) {
    if (bytes == null || bytes.length == 0) {
      return "an empty file";
    }
    try (ImageInputStream in = new MemoryCacheImageInputStream(new ByteArrayInputStream(bytes))) {
      Iterator<ImageReader> it = ImageIO.getImageReaders(in);
      if (!it.hasNext()) {
        return "not an image ImageIO can read (" + bytes.length + " bytes)";
      }
      ImageReader reader = it.next();
      try {
        reader.setInput(in, true, true);
        int w = reader.getWidth(0);
        int h = reader.getHeight(0);
        return w > 0 && h > 0 ? null : "an image of " + w + "x" + h + " pixels";
      } finally {
        reader.dispose();
      }
    } catch (IOException | RuntimeException e) {
      return "a corrupt image (" + bytes.length + " bytes): " + e.getMessage();
    }
  }
}
