package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.math.BigDecimal;
import java.math.MathContext;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link FeatureStatistics} (Welford, Chan's merge) and {@link Normalization} (apply, constants,
 * CSV).
 */
class NormalizationTest {
  private static final List<String> NAMES = List.of("a", "v");
  private static final int[] WIDTHS = {1, 3};

  /**
   * Column 0: 1e6 + small noise (a large mean); 1..3: scales 1e-3, 1, 1e4; and a constant one at 3.
   */
  private static float[][] data(int n, long seed) {
    Random r = new Random(seed);
    float[][] x = new float[n][4];
    for (int i = 0; i < n; i++) {
      x[i][0] = (float) (1e6 + r.nextGaussian() * 0.5);
      x[i][1] = (float) (r.nextGaussian() * 1e-3);
      x[i][2] = (float) (r.nextGaussian() + 3);
      x[i][3] = 7f;
    }
    return x;
  }

  @Test
  void mergedSplitsMatchExactTwoPassStatisticsWhateverTheSplitting() {
    float[][] x = data(10_000, 1);
    FeatureStatistics whole = new FeatureStatistics(NAMES, WIDTHS);
    for (float[] row : x) {
      whole.add(row, 0);
    }
    // Uneven parts, merged in order, and one empty part.
    FeatureStatistics merged = new FeatureStatistics(NAMES, WIDTHS);
    int[] cuts = {0, 1, 17, 17, 4000, 9999, 10_000};
    for (int c = 0; c + 1 < cuts.length; c++) {
      FeatureStatistics part = new FeatureStatistics(NAMES, WIDTHS);
      for (int i = cuts[c]; i < cuts[c + 1]; i++) {
        part.add(x[i], 0);
      }
      merged.merge(part);
    }
    assertThat(merged.count()).isEqualTo(10_000);
    MathContext mc = MathContext.DECIMAL128;
    for (int j = 0; j < 4; j++) {
      BigDecimal sum = BigDecimal.ZERO;
      for (float[] row : x) {
        sum = sum.add(new BigDecimal(row[j]));
      }
      BigDecimal mean = sum.divide(BigDecimal.valueOf(x.length), mc);
      BigDecimal ss = BigDecimal.ZERO;
      for (float[] row : x) {
        BigDecimal d = new BigDecimal(row[j]).subtract(mean);
        ss = ss.add(d.multiply(d));
      }
      double std = Math.sqrt(ss.divide(BigDecimal.valueOf(x.length), mc).doubleValue());
      for (FeatureStatistics s : List.of(whole, merged)) {
        assertThat(s.mean(j))
            .isCloseTo(
                mean.doubleValue(), within(1e-9 * Math.max(1, Math.abs(mean.doubleValue()))));
        // The 1e6 column's std (~0.5) survives its mean: sum-of-squares in double would lose it.
        assertThat(s.std(j)).isCloseTo(std, within(1e-9 + 1e-7 * std));
      }
    }
    assertThat(merged.std(3)).isZero();
    assertThat(merged.min(1)).isEqualTo(min(x, 1));
    assertThat(merged.max(2)).isEqualTo(max(x, 2));
  }

  private static double min(float[][] x, int j) {
    double m = Double.POSITIVE_INFINITY;
    for (float[] r : x) {
      m = Math.min(m, r[j]);
    }
    return m;
  }

  private static double max(float[][] x, int j) {
    double m = Double.NEGATIVE_INFINITY;
    for (float[] r : x) {
      m = Math.max(m, r[j]);
    }
    return m;
  }

  @Test
  void standardGivesMeanZeroStdOneMinmaxZeroToOneAndConstantsBecomeZero() {
    float[][] x = data(2000, 2);
    FeatureStatistics st = new FeatureStatistics(NAMES, WIDTHS);
    for (float[] row : x) {
      st.add(row, 0);
    }
    for (Normalization.Mode mode :
        List.of(Normalization.Mode.STANDARD, Normalization.Mode.MINMAX)) {
      Normalization n = Normalization.of(mode, st);
      // Column "v" as a batch column buffer (rows of 3 from feature value 1), column "a" as an
      // array.
      FloatBuffer v =
          ByteBuffer.allocateDirect(x.length * 3 * 4)
              .order(ByteOrder.nativeOrder())
              .asFloatBuffer();
      float[] a = new float[x.length];
      for (int i = 0; i < x.length; i++) {
        a[i] = x[i][0];
        v.put(i * 3, x[i], 1, 3);
      }
      n.apply(a, 0, x.length, 1, 0);
      n.apply(v, x.length, 3, 1);
      FeatureStatistics out = new FeatureStatistics(NAMES, WIDTHS);
      float[] row = new float[4];
      for (int i = 0; i < x.length; i++) {
        row[0] = a[i];
        v.get(i * 3, row, 1, 3);
        out.add(row, 0);
      }
      for (int j = 0; j < 3; j++) {
        if (mode == Normalization.Mode.STANDARD) {
          assertThat(out.mean(j)).as("mean %d", j).isCloseTo(0, within(1e-2));
          assertThat(out.std(j)).as("std %d", j).isCloseTo(1, within(1e-2));
        } else {
          assertThat(out.min(j)).isCloseTo(0, within(1e-6));
          assertThat(out.max(j)).isCloseTo(1, within(1e-6));
        }
      }
      assertThat(out.min(3)).isZero(); // constant: no division by zero, no NaN
      assertThat(out.max(3)).isZero();
    }
    assertThat(Normalization.of(Normalization.Mode.NONE, st)).isNull();
  }

  @Test
  void csvRoundTripsAndBadInputIsRefusedNamingWhatIsWrong() {
    FeatureStatistics st = new FeatureStatistics(List.of("a,b", "v"), WIDTHS);
    for (float[] row : data(100, 3)) {
      st.add(row, 0);
    }
    Normalization n = Normalization.of(Normalization.Mode.STANDARD, st);
    Normalization back =
        Normalization.fromCsv(Normalization.Mode.STANDARD, n.toCsv(), "m/normalization.csv");
    assertThat(back.statistics().names()).containsExactly("a,b", "v");
    assertThat(back.statistics().widths()).containsExactly(1, 3);
    assertThat(back.statistics().count()).isEqualTo(100);
    for (int j = 0; j < 4; j++) {
      assertThat(back.statistics().mean(j)).isEqualTo(st.mean(j));
      assertThat(back.statistics().std(j)).isCloseTo(st.std(j), within(1e-12 * (1 + st.std(j))));
      float x = (float) (st.mean(j) + 0.5);
      assertThat(back.apply(j, x)).isEqualTo(n.apply(j, x));
    }
    assertThatThrownBy(
            () ->
                Normalization.fromCsv(
                    Normalization.Mode.MINMAX, "x\n".getBytes(), "m/normalization.csv"))
        .hasMessageContaining("m/normalization.csv: not a normalization table");
    String bad = "feature,index,count,mean,std,min,max\nv,0,3,1.0,zz,0,1\n";
    assertThatThrownBy(
            () ->
                Normalization.fromCsv(
                    Normalization.Mode.MINMAX, bad.getBytes(), "m/normalization.csv"))
        .hasMessageContaining(
            "m/normalization.csv, line 2: invalid normalization entry 'v,0,3,1.0,zz,0,1'");
    assertThatThrownBy(() -> Normalization.Mode.parse("zscore"))
        .hasMessage("Invalid normalization 'zscore': expected standard, minmax or none");
  }

  @Test
  void aNonFiniteValueIsRefusedNamingTheFeature() {
    FeatureStatistics st = new FeatureStatistics(NAMES, WIDTHS);
    assertThatThrownBy(() -> st.add(new float[] {1, 2, Float.NaN, 4}, 0))
        .hasMessage("feature 'v'[1] is NaN: normalization needs finite values");
  }
}
