package dev.sparktrainer.optim;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import org.junit.jupiter.api.Test;

/**
 * The device update's scalars: made once per value in use, freed when a step no longer uses them.
 * That the step and the optimizers use no host scalar at all is ArchitectureTest's
 * noHostScalarsOnTheStepPath.
 */
class DeviceScalarsTest {

  @Test
  void aValueIsMadeOnceAndFreedWhenAStepNoLongerUsesIt() {
    try (NDManager m = NDManager.newBaseManager(Device.cpu());
        DeviceScalars s = new DeviceScalars(m)) {
      NDArray half = s.of(0.5f);
      NDArray two = s.of(2f);
      assertThat(s.of(0.5f)).isSameAs(half);
      assertThat(half.getShape().dimension()).isZero();
      assertThat(half.getFloat()).isEqualTo(0.5f);
      assertThat(s.made()).isEqualTo(2);
      s.endStep();
      s.of(0.5f); // used again in the next step; 2 is not
      s.endStep();
      assertThat(half.isReleased()).isFalse();
      assertThat(two.isReleased()).isTrue();
      assertThat(s.made()).isEqualTo(2);
      // -0f and 0f are different floats: both kept as they are
      assertThat(s.of(-0f)).isNotSameAs(s.of(0f));
    }
  }
}
