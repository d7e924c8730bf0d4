package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.idx;
import static dev.sparktrainer.train.BenchSupport.subsetTFRecords;

import dev.sparktrainer.train.input.InMemoryDataset;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One model's settings in bin/bench-scaling: its parameter count, per-worker batch, steps per
 * epoch, and its data for 1 and for 2 workers ({@code data1}, {@code data2}).
 */
record ScalingSetup(String model, long params, int batch, int steps, Path data1, Path data2) {
  /**
   * Shards of each data subset: one file per worker with 2 workers (FILE sharding), both with 1.
   */
  private static final int SHARDS = 2;

  /**
   * Each model's parameter count and its data: the first steps x batch x workers training examples
   * as {@value #SHARDS} TFRecord shards, for 1 and for 2 workers, so that both take {@code steps}
   * steps per epoch.
   */
  static List<ScalingSetup> of(
      Path data,
      Path work,
      List<String> models,
      Map<String, Integer> batch,
      Map<String, Integer> steps)
      throws IOException {
    InMemoryDataset train =
        idx(data.resolve("train-images-idx3-ubyte.gz"), data.resolve("train-labels-idx1-ubyte.gz"));
    List<ScalingSetup> setups = new ArrayList<>();
    for (String m : models) {
      int b = batch.get(m);
      int s = steps.get(m);
      Path[] dirs = new Path[2];
      for (int w = 1; w <= 2; w++) {
        int examples = b * s * w;
        dirs[w - 1] =
            subsetTFRecords(
                train,
                examples,
                ScalingModels.side(m),
                SHARDS,
                work.resolve(
                    "data/fashion-mnist-" + ScalingModels.side(m) + "px-first-" + examples));
      }
      setups.add(
          new ScalingSetup(
              m, ScalingModels.parameterCount(ScalingModels.spec(m)), b, s, dirs[0], dirs[1]));
    }
    return setups;
  }
}
