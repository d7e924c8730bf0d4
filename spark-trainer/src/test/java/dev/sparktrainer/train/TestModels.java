package dev.sparktrainer.train;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.train.metrics.History;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;

/** Untrained models for tests that need a {@link TrainedModel} but no training. */
public final class TestModels {
  private TestModels() {}

  /** {@code spec} with parameters initialized from {@code seed}. */
  public static TrainedModel random(ModelSpec spec, LossSpec loss, int seed) {
    try (NDManager m = NDManager.newBaseManager()) {
      Engine.getInstance().setRandomSeed(seed);
      Block b = spec.newBlock();
      b.initialize(m, DataType.FLOAT32, spec.batchInputShapes(1));
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (DataOutputStream out = new DataOutputStream(bytes)) {
        b.saveParameters(out);
      }
      return new TrainedModel(spec, loss, bytes.toByteArray(), new History(List.of()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
