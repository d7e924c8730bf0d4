package dev.sparktrainer.model.sequence;

import static dev.sparktrainer.model.sequence.SequenceFixtures.newStep;
import static dev.sparktrainer.model.sequence.SequenceFixtures.randomBatch;
import static org.assertj.core.api.Assertions.assertThat;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.train.step.Precision;
import dev.sparktrainer.train.step.ReplicaSet;
import dev.sparktrainer.train.step.TrainStep;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What a checkpoint and a saved model hold: a run resumed from its state after step 3 (parameters,
 * optimizer slots, step count) ends bit for bit where the uninterrupted run ends; the trained
 * parameters saved and restored into a spec rebuilt from its properties predict bit for bit what
 * the trained replica predicts.
 */
class SequenceCheckpointTest {
  private static final int[] LENGTHS = {7, 16, 2, 11, 5};

  static void steps(TrainStep step, ReplicaSet replicas, int from, int to) {
    for (int s = from; s < to; s++) {
      try (Batch b = randomBatch(replicas.manager().newSubManager(), 6, LENGTHS[s], 40, 3, s)) {
        step.run(b, 1000 + s, 1e-2f, new double[3]);
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"embed", "transformer"})
  void resumesBitForBitAndTheSavedModelPredictsAsTheTrainedOne(String name) throws Exception {
    ModelSpec spec = SequenceMaskingTest.model(name);
    float[][] end;
    float[][] midValues;
    float[][][] midSlots;
    long midSteps;
    byte[] saved;
    float[] trained;
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, Precision.FP32, 1 << 20)) {
      steps(step, replicas, 0, 3);
      midValues = step.parameterValues();
      midSlots = step.optimizerSlots();
      midSteps = step.optimizerSteps();
      steps(step, replicas, 3, 5);
      end = step.parameterValues();
      saved = replicas.saveParameters();
      try (NDManager m = NDManager.newBaseManager(Device.cpu());
          Batch b = randomBatch(m, 6, 9, 40, 3, 99)) {
        // a block holding the trained values, written in one by one
        Block block = spec.build(m);
        List<Parameter> params = block.getParameters().values();
        for (int i = 0; i < params.size(); i++) {
          params.get(i).getArray().set(end[i]);
        }
        trained = forward(block, m, b);
      }
    }
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(Device.cpu()), 7);
        TrainStep step = newStep(replicas, null, Precision.FP32, 1 << 20)) {
      step.restore(midValues, midSlots, midSteps);
      steps(step, replicas, 3, 5);
      float[][] resumed = step.parameterValues();
      for (int i = 0; i < end.length; i++) {
        assertThat(resumed[i]).as(replicas.parameterNames().get(i)).containsExactly(end[i]);
      }
    }
    ModelSpec rebuilt = ModelSpec.fromProperties(spec.toProperties());
    assertThat(rebuilt).isEqualTo(spec);
    try (NDManager m = NDManager.newBaseManager(Device.cpu());
        Batch b = randomBatch(m, 6, 9, 40, 3, 99)) {
      float[] got = forward(rebuilt.restore(m, saved), m, b);
      assertThat(got).containsExactly(trained);
    }
  }

  private static float[] forward(Block block, NDManager m, Batch b) {
    return block.forward(new ParameterStore(m, false), b.features(), false).head().toFloatArray();
  }
}
