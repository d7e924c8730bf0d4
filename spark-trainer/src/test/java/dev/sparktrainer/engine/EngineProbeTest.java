package dev.sparktrainer.engine;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.pytorch.jni.JniUtils;
import org.junit.jupiter.api.Test;

/**
 * The engine check's test step trains whatever the calling thread's grad mode: PyTorch keeps it per
 * thread, a new thread has it on, and an in-place update of a parameter with recording on fails ("a
 * leaf Variable that requires grad is being used in an in-place operation"), which the doctor would
 * report as an engine that cannot train.
 */
class EngineProbeTest {
  @Test
  void theTestStepTrainsWithGradModeOnOrOff() {
    ai.djl.engine.Engine.getEngine("PyTorch"); // loads the natives JniUtils calls into
    boolean before = JniUtils.isGradMode();
    try {
      for (boolean mode : new boolean[] {true, false}) {
        JniUtils.setGradMode(mode);
        EngineCheck.DeviceResult r = EngineProbe.step(Device.cpu());
        assertThat(r.error()).as("the test step with grad mode " + mode).isNull();
        assertThat(r.lossAfter()).isLessThan(r.lossBefore());
        assertThat(JniUtils.isGradMode())
            .as("the thread's grad mode is left as it was")
            .isEqualTo(mode);
      }
    } finally {
      JniUtils.setGradMode(before);
    }
  }
}
