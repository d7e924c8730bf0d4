package dev.sparktrainer.tfrecord.codec;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class Crc32cTest {
  private final Crc32c crc = new Crc32c();

  private int crcOf(byte[] b) {
    return crc.crc(b, 0, b.length);
  }

  @Test
  void matchesPublishedTestVectors() {
    // The check value of CRC-32C, and the RFC 3720 (iSCSI) appendix B.4 vectors.
    assertThat(crcOf("123456789".getBytes(StandardCharsets.US_ASCII))).isEqualTo(0xE3069283);
    assertThat(crcOf(new byte[32])).isEqualTo(0x8A9136AA);
    byte[] ones = new byte[32];
    Arrays.fill(ones, (byte) 0xFF);
    assertThat(crcOf(ones)).isEqualTo(0x62A8AB43);
    byte[] up = new byte[32];
    byte[] down = new byte[32];
    for (int i = 0; i < 32; i++) {
      up[i] = (byte) i;
      down[i] = (byte) (31 - i);
    }
    assertThat(crcOf(up)).isEqualTo(0x46DD794E);
    assertThat(crcOf(down)).isEqualTo(0x113FDB5C);
  }

  @Test
  void maskIsTensorFlowsAndInvertible() {
    int c = 0xE3069283;
    int expected = ((c >>> 15) | (c << 17)) + 0xa282ead8;
    assertThat(Crc32c.mask(c)).isEqualTo(expected);
    for (int v : new int[] {0, 1, -1, 0x12345678, c}) {
      assertThat(Crc32c.unmask(Crc32c.mask(v))).isEqualTo(v);
    }
    // TensorFlow's crc32c_test: Mask(crc) != crc and Mask(Mask(crc)) != crc.
    assertThat(Crc32c.mask(c)).isNotEqualTo(c);
    assertThat(Crc32c.mask(Crc32c.mask(c))).isNotEqualTo(c);
  }
}
