package dev.sparktrainer.optim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.data.Offset.offset;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import org.junit.jupiter.api.Test;

class OptimizerTest {
  private static float[][] vec(float... v) {
    return new float[][] {v};
  }

  @Test
  void sgdMomentumFollowsTheClosedForm() {
    Optimizer sgd = OptimizerSpec.sgd().optMomentum(0.9f).build().newOptimizer(new int[] {1});
    float[][] p = vec(1f);
    sgd.update(p, vec(1f), 0.1f); // v = 1, p = 0.9
    sgd.update(p, vec(1f), 0.1f); // v = 1.9, p = 0.71
    sgd.update(p, vec(-2f), 0.1f); // v = -0.29, p = 0.739
    assertThat(p[0][0]).isCloseTo(0.739f, offset(1e-6f));
  }

  @Test
  void adamFirstStepMovesByLearningRateAndAdamWDecaysDecoupled() {
    Optimizer adam = OptimizerSpec.adam().build().newOptimizer(new int[] {2});
    float[][] p = vec(1f, 1f);
    adam.update(p, vec(0.5f, -3f), 0.01f); // m^ = g, v^ = g^2: step = lr * sign(g)
    assertThat(p[0][0]).isCloseTo(0.99f, offset(1e-6f));
    assertThat(p[0][1]).isCloseTo(1.01f, offset(1e-6f));

    Optimizer adamW =
        OptimizerSpec.adamW().optWeightDecay(0.1f).build().newOptimizer(new int[] {1});
    float[][] q = vec(2f);
    adamW.update(q, vec(0f), 0.01f); // zero gradient: only the decoupled decay, p (1 - lr wd)
    assertThat(q[0][0]).isCloseTo(2f * (1 - 0.001f), offset(1e-6f));
  }

  @Test
  void adamMatchesAReferenceImplementationOverManySteps() {
    Optimizer adam = OptimizerSpec.adam().optBetas(0.9f, 0.99f).build().newOptimizer(new int[] {1});
    float[][] p = vec(0.3f);
    double ref = 0.3;
    double m = 0;
    double v = 0;
    for (int t = 1; t <= 50; t++) {
      float g = (float) Math.sin(t);
      adam.update(p, vec(g), 0.05f);
      m = 0.9 * m + 0.1 * g;
      v = 0.99 * v + 0.01 * g * g;
      ref -= 0.05 * (m / (1 - Math.pow(0.9, t))) / (Math.sqrt(v / (1 - Math.pow(0.99, t))) + 1e-8);
    }
    assertThat((double) p[0][0]).isCloseTo(ref, offset(1e-5));
  }

  @Test
  void stateRoundTripContinuesBitForBit() throws Exception {
    OptimizerSpec spec = OptimizerSpec.adamW().build();
    Optimizer a = spec.newOptimizer(new int[] {3, 2});
    float[][] p = {{1, 2, 3}, {4, 5}};
    float[][] g = {{0.1f, -0.2f, 0.3f}, {1, -1}};
    a.update(p, g, 0.01f);
    a.update(p, g, 0.01f);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    a.writeState(new DataOutputStream(bytes));
    Optimizer b = spec.newOptimizer(new int[] {3, 2});
    b.readState(new DataInputStream(new ByteArrayInputStream(bytes.toByteArray())));
    assertThat(b.steps()).isEqualTo(2);
    float[][] pb = {p[0].clone(), p[1].clone()};
    a.update(p, g, 0.01f);
    b.update(pb, g, 0.01f);
    assertThat(pb[0]).containsExactly(p[0]);
    assertThat(pb[1]).containsExactly(p[1]);

    Optimizer sgd = OptimizerSpec.sgd().optMomentum(0.5f).build().newOptimizer(new int[] {3, 2});
    assertThatThrownBy(
            () -> sgd.readState(new DataInputStream(new ByteArrayInputStream(bytes.toByteArray()))))
        .hasMessageContaining("written by adamw, restoring into sgd");
  }

  @Test
  void scheduleWarmsUpThenDecays() {
    OptimizerSpec cosine =
        OptimizerSpec.sgd()
            .optLearningRate(0.1f)
            .optWarmupSteps(10)
            .optCosineDecay(100, 0.001f)
            .optLinearScaling(true)
            .build();
    assertThat(cosine.learningRate(0, 2)).isCloseTo(0.02f, offset(1e-7f)); // 0.1 x 2 x 1/10
    assertThat(cosine.learningRate(9, 2)).isCloseTo(0.2f, offset(1e-7f));
    assertThat(cosine.learningRate(60, 2)).isCloseTo((float) (0.002 + 0.198 * 0.5), offset(1e-6f));
    assertThat(cosine.learningRate(500, 2)).isCloseTo(0.002f, offset(1e-7f));

    OptimizerSpec step = OptimizerSpec.adam().optLearningRate(1f).optStepDecay(10, 0.5f).build();
    assertThat(step.learningRate(9, 4)).isEqualTo(1f);
    assertThat(step.learningRate(10, 4)).isEqualTo(0.5f);
    assertThat(step.learningRate(25, 4)).isEqualTo(0.25f);
  }

  @Test
  void invalidValuesAreRejectedWithTheirName() {
    assertThatThrownBy(() -> OptimizerSpec.sgd().optMomentum(1.5f).build())
        .hasMessage("Invalid momentum 1.5: expected in [0, 1)");
    assertThatThrownBy(() -> OptimizerSpec.adam().optLearningRate(0).build())
        .hasMessage("Invalid learningRate 0.0: expected > 0");
  }

  /**
   * The host paths agree bit for bit: a whole parameter up to {@link Optimizer#ALIGNED_MAX} (its
   * gradient copied to the values' indices, vectorized loops), one above it (copied in chunks,
   * scalar loops), and the same parameter updated in two ranges as the host updater's threads do.
   */
  @Test
  void vectorizedAndChunkedHostPathsAreBitIdentical() {
    int n = Optimizer.ALIGNED_MAX + 4099;
    for (OptimizerSpec spec :
        new OptimizerSpec[] {
          OptimizerSpec.adam().optWeightDecay(0.01f).build(),
          OptimizerSpec.adamW().optWeightDecay(0.1f).build(),
          OptimizerSpec.sgd().optMomentum(0.9f).optWeightDecay(0.001f).build(),
          OptimizerSpec.sgd().build()
        }) {
      java.nio.FloatBuffer grad =
          java.nio.ByteBuffer.allocateDirect(4 * (n + 3))
              .order(java.nio.ByteOrder.nativeOrder())
              .asFloatBuffer();
      float[] whole = new float[n];
      float[] split = new float[n];
      for (int i = 0; i < n; i++) {
        whole[i] = split[i] = (float) Math.cos(i * 0.37);
      }
      Optimizer a = spec.newOptimizer(new int[] {n});
      Optimizer b = spec.newOptimizer(new int[] {n});
      int cut = n / 3; // [0, cut) takes the aligned path, [cut, n) the chunked one
      for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < n + 3; i++) {
          grad.put(i, (float) Math.sin(i * 0.011 + t));
        }
        a.beginStep();
        b.beginStep();
        a.apply(0, whole, grad, 3, 0, n, 0.01f); // above the cap: chunks
        b.apply(0, split, grad, 3, 0, cut, 0.01f); // within the cap: aligned
        b.apply(0, split, grad, 3 + cut, cut, n, 0.01f); // to > cap: chunks
      }
      assertThat(firstDifference(split, whole, n)).as(spec.toString()).isEqualTo(-1);
      float[] head = new float[cut];
      float[] ref = new float[cut];
      for (int i = 0; i < cut; i++) {
        head[i] = ref[i] = (float) Math.cos(i * 0.37);
      }
      Optimizer c = spec.newOptimizer(new int[] {cut});
      Optimizer d = spec.newOptimizer(new int[] {cut});
      for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < n + 3; i++) {
          grad.put(i, (float) Math.sin(i * 0.011 + t));
        }
        c.beginStep();
        d.beginStep();
        c.apply(0, head, grad, 3, 0, cut, 0.01f); // whole, aligned
        for (int at = 0; at < cut; at += 1000) { // pieces, as the updater's threads
          d.apply(0, ref, grad, 3 + at, at, Math.min(cut, at + 1000), 0.01f);
        }
      }
      assertThat(firstDifference(head, ref, cut)).as(spec.toString()).isEqualTo(-1);
      assertThat(firstDifference(head, whole, cut))
          .as("%s: the aligned path against the chunked one", spec)
          .isEqualTo(-1);
    }
  }

  /** The first index below n where the bits differ, or -1. */
  private static int firstDifference(float[] a, float[] b, int n) {
    for (int i = 0; i < n; i++) {
      if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(b[i])) {
        return i;
      }
    }
    return -1;
  }
}
