package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.training.ParameterStore;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model cut into consecutive segments for segment-by-segment backward, so that the gradients of
 * the last layers can be all-reduced while backward goes on through the earlier ones (what DDP's
 * autograd hooks give PyTorch; DJL has no per-parameter hooks).
 *
 * <p>A model built as a {@link SequentialBlock} (nested ones are flattened: the MLP, the CNN, a
 * ResNet's stem, stages and head, a user's sequential model) is cut before every leaf block that
 * has parameters; parameter-free leaves (activations, pooling, reshapes) stay with the segment
 * before them. Any other model is one segment: backward runs whole.
 *
 * <p>In forward, each segment after the first gets its input detached and made a gradient leaf;
 * backward then goes from the loss through the last segment, and through each earlier segment from
 * its output's gradient (the vector-Jacobian product with the next segment's input gradient). Each
 * segment's parameter gradients equal those of one whole backward and are final when its call
 * returns.
 */
final class ModelSegments {
  /** Leaf blocks of each segment, in forward order. */
  private final List<List<Block>> segments;

  /**
   * For each segment, the indices (into the model's parameter list) of its parameters, in order.
   */
  final int[][] parameters;

  private ModelSegments(List<List<Block>> segments, int[][] parameters) {
    this.segments = segments;
    this.parameters = parameters;
  }

  /**
   * Segments of {@code root}, whose parameters are {@code params} (in {@code getParameters()}
   * order). With {@code segmented} false, or a model that is not sequential, one segment.
   */
  static ModelSegments of(Block root, Parameter[] params, boolean segmented) {
    List<Block> leaves = new ArrayList<>();
    if (segmented && root.getClass() == SequentialBlock.class) {
      flatten(root, leaves);
    } else {
      leaves.add(root);
    }
    List<List<Block>> segments = new ArrayList<>();
    for (Block leaf : leaves) {
      if (segments.isEmpty()
          || !leaf.getParameters().isEmpty() && hasParameters(segments.get(segments.size() - 1))) {
        segments.add(new ArrayList<>());
      }
      segments.get(segments.size() - 1).add(leaf);
    }
    Map<Parameter, Integer> index = new IdentityHashMap<>();
    for (int i = 0; i < params.length; i++) {
      index.put(params[i], i);
    }
    int[][] parameters = new int[segments.size()][];
    int assigned = 0;
    for (int s = 0; s < segments.size(); s++) {
      List<Integer> ids = new ArrayList<>();
      for (Block b : segments.get(s)) {
        for (Parameter p : b.getParameters().values()) {
          Integer i = index.get(p);
          if (i == null) {
            throw new IllegalStateException(
                "Parameter " + p.getName() + " of segment " + s + " is not the model's");
          }
          ids.add(i);
        }
      }
      parameters[s] = ids.stream().mapToInt(Integer::intValue).toArray();
      assigned += parameters[s].length;
    }
    if (assigned != params.length) {
      // A parameter shared between blocks, or one outside the leaves: do not risk a wrong split.
      return of(root, params, false);
    }
    return new ModelSegments(segments, parameters);
  }

  private static boolean hasParameters(List<Block> segment) {
    for (Block b : segment) {
      if (!b.getParameters().isEmpty()) {
        return true;
      }
    }
    return false;
  }

  private static void flatten(Block block, List<Block> leaves) {
    if (block.getClass() == SequentialBlock.class) {
      for (Block child : block.getChildren().values()) {
        flatten(child, leaves);
      }
    } else {
      leaves.add(block);
    }
  }

  /** Number of segments (1: backward runs whole). */
  int count() {
    return segments.size();
  }

  /**
   * Training forward pass: fills {@code inputs[s]} (the detached gradient-leaf input of each
   * segment after the first; null for the first) and {@code outputs[s]}, and returns the model's
   * output.
   */
  NDList forward(ParameterStore store, NDList x, NDList[] inputs, NDList[] outputs) {
    NDList current = x;
    for (int s = 0; s < segments.size(); s++) {
      if (s > 0) {
        NDList leaf = new NDList(current.size());
        for (NDArray a : current) {
          NDArray d = a.stopGradient();
          if (HalfParameters.isFloating(a)) { // bfloat16 reports an unknown type
            d.setRequiresGradient(true);
          }
          leaf.add(d);
        }
        current = leaf;
        inputs[s] = leaf;
      }
      for (Block b : segments.get(s)) {
        current = b.forward(store, current, true);
      }
      outputs[s] = current;
    }
    return current;
  }
}
