package dev.sparktrainer.train.step;

import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.GradientCollector;
import org.junit.jupiter.api.Test;

/**
 * The engine's gradients pointed at slices of one flat tensor: autograd then adds into the flat
 * tensor in place, and one fill of it zeroes every gradient.
 */
class GradAliasTest {

  @Test
  void backwardAddsIntoTheFlatTensorAndOneFillZeroesEveryGradient() {
    try (NDManager m = NDManager.newBaseManager(Device.cpu());
        GradAlias alias = GradAlias.load((PtNDManager) m)) {
      NDArray w1 = m.create(new float[] {1, 2, 3, 4}, new Shape(2, 2));
      NDArray w2 = m.create(new float[] {5, 6, 7}, new Shape(3));
      w1.setRequiresGradient(true);
      w2.setRequiresGradient(true);
      NDArray flat = m.create(new Shape(7), DataType.FLOAT32, Device.cpu());
      NDArray zero = m.full(new Shape(), 0f, DataType.FLOAT32);
      NDArray one = m.full(new Shape(), 1f, DataType.FLOAT32);
      for (int step = 1; step <= 3; step++) {
        backward(m, w1, w2, step);
        if (step == 1) {
          PtNDArray g1 = JniUtils.getGradient((PtNDArray) w1);
          PtNDArray g2 = JniUtils.getGradient((PtNDArray) w2);
          PtNDArray[] grads = {g1, g2};
          alias.alias(grads, flat);
          assertThat(GradAlias.holds(flat, grads, () -> one)).isTrue();
          g1.close();
          g2.close();
        }
        // d/dw1 of sum(w1^2) is 2 w1; d/dw2 of sum(step * w2) is step
        float s = step;
        assertThat(flat.toFloatArray()).containsExactly(2, 4, 6, 8, s, s, s);
        assertThat(w2.getGradient().toFloatArray()).containsExactly(s, s, s);
        FlatState.copy(flat, zero); // what the step does before the next backward
        assertThat(w1.getGradient().toFloatArray()).containsOnly(0f);
        assertThat(w2.getGradient().toFloatArray()).containsOnly(0f);
      }
    }
  }

  @Test
  void holdsIsFalseForGradientsThatAreNotTheFlatTensorsSlices() {
    try (NDManager m = NDManager.newBaseManager(Device.cpu())) {
      NDArray w = m.create(new float[] {1, 2}, new Shape(2));
      w.setRequiresGradient(true);
      backward(m, w, null, 1);
      NDArray flat = m.create(new float[] {7, 7});
      NDArray one = m.full(new Shape(), 1f, DataType.FLOAT32);
      try (PtNDArray g = JniUtils.getGradient((PtNDArray) w)) {
        assertThat(GradAlias.holds(flat, new PtNDArray[] {g}, () -> one)).isFalse();
      }
      assertThat(flat.toFloatArray()).as("restored").containsExactly(7, 7);
    }
  }

  private static void backward(NDManager m, NDArray w1, NDArray w2, int step) {
    try (GradientCollector gc = m.getEngine().newGradientCollector();
        NDManager scope = m.newSubManager()) {
      NDArray loss = w1.mul(w1).sum();
      loss.attach(scope);
      if (w2 != null) {
        NDArray f = scope.full(new Shape(), (float) step, DataType.FLOAT32);
        loss = loss.add(w2.mul(f).sum());
      }
      gc.backward(loss);
    }
  }
}
