package dev.sparktrainer.train;

import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;

/** The bundled digits sample (1797 rows, 64 pixels 0..16 scaled to 0..1, class 0-9). */
public final class Digits {
  private Digits() {}

  /** The bundled digits sample (1,797 8x8 images, pixels scaled to 0..1), in file order. */
  public static InMemoryDataset load() {
    try (InputStream raw = Digits.class.getResourceAsStream("/sample-data/digits.csv.gz");
        BufferedReader r =
            new BufferedReader(
                new InputStreamReader(new GZIPInputStream(raw), StandardCharsets.US_ASCII))) {
      List<float[]> rows = new ArrayList<>();
      List<Long> labels = new ArrayList<>();
      for (String line; (line = r.readLine()) != null; ) {
        if (line.isBlank()) {
          continue;
        }
        String[] f = line.split(",");
        float[] px = new float[64];
        for (int i = 0; i < 64; i++) {
          px[i] = Float.parseFloat(f[i]) / 16f;
        }
        rows.add(px);
        labels.add(Long.parseLong(f[64].trim()));
      }
      float[] features = new float[rows.size() * 64];
      long[] y = new long[rows.size()];
      for (int i = 0; i < rows.size(); i++) {
        System.arraycopy(rows.get(i), 0, features, i * 64, 64);
        y[i] = labels.get(i);
      }
      return InMemoryDataset.ofClasses(features, new Shape(64), y);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
