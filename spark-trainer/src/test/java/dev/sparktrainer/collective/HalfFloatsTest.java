package dev.sparktrainer.collective;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class HalfFloatsTest {
  @Test
  void everyHalfRoundTrips() {
    for (int h = 0; h < 65536; h++) {
      float f16 = HalfFloats.fromFp16((short) h);
      float bf = HalfFloats.fromBf16((short) h);
      if (Float.isNaN(f16)) {
        assertThat(Float.isNaN(HalfFloats.fromFp16(HalfFloats.toFp16(f16)))).isTrue();
      } else {
        assertThat(HalfFloats.toFp16(f16) & 0xffff).as("fp16 0x%04x", h).isEqualTo(h);
      }
      if (Float.isNaN(bf)) {
        assertThat(Float.isNaN(HalfFloats.fromBf16(HalfFloats.toBf16(bf)))).isTrue();
      } else {
        assertThat(HalfFloats.toBf16(bf) & 0xffff).as("bf16 0x%04x", h).isEqualTo(h);
      }
    }
  }

  @Test
  void knownValuesAndTiesToEven() {
    assertThat(HalfFloats.toFp16(1f)).isEqualTo((short) 0x3c00);
    assertThat(HalfFloats.toFp16(65504f)).isEqualTo((short) 0x7bff);
    assertThat(HalfFloats.toFp16(65520f)).isEqualTo((short) 0x7c00); // tie rounds up to infinity
    assertThat(HalfFloats.toFp16(1 + 0x1p-11f)).isEqualTo((short) 0x3c00); // tie to even
    assertThat(HalfFloats.toFp16(1 + 3 * 0x1p-11f)).isEqualTo((short) 0x3c02);
    assertThat(HalfFloats.toFp16(0x1p-24f)).isEqualTo((short) 0x0001);
    assertThat(HalfFloats.toFp16(0x1p-25f)).isEqualTo((short) 0x0000);
    assertThat(HalfFloats.toFp16(1.5f * 0x1p-25f)).isEqualTo((short) 0x0001);
    assertThat(HalfFloats.toFp16(-2f)).isEqualTo((short) 0xc000);
    assertThat(HalfFloats.toBf16(1 + 0x1p-8f)).isEqualTo((short) 0x3f80);
    assertThat(HalfFloats.toBf16(1 + 3 * 0x1p-8f)).isEqualTo((short) 0x3f82);
    assertThat(HalfFloats.fromBf16(HalfFloats.toBf16(Float.POSITIVE_INFINITY))).isInfinite();
  }

  /** Random floats: the chosen half is the nearest one (no neighbour is strictly closer). */
  @Test
  void conversionPicksTheNearestValue() {
    SplittableRandom random = new SplittableRandom(42);
    for (int i = 0; i < 200_000; i++) {
      float f = (float) ((random.nextDouble() - 0.5) * Math.pow(2, random.nextInt(-26, 17)));
      for (WirePrecision w : new WirePrecision[] {WirePrecision.BF16, WirePrecision.FP16}) {
        short h = HalfFloats.encode(f, w);
        double err = Math.abs((double) HalfFloats.decode(h, w) - f);
        for (int d : new int[] {-1, 1}) {
          float neighbour = HalfFloats.decode((short) (h + d), w);
          if (!Float.isNaN(neighbour) && !Float.isInfinite(neighbour)) {
            assertThat(err).as("%s %s", w, f).isLessThanOrEqualTo(Math.abs((double) neighbour - f));
          }
        }
      }
    }
  }
}
