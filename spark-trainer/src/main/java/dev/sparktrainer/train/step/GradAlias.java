package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import java.util.function.Supplier;

/**
 * Points the engine's gradients ({@code .grad}) of a bucket's parameters at slices of one flat
 * tensor, with their current values, in one engine call ({@code grad_alias.pt}, a TorchScript
 * function: DJL's API has no way to set a {@code .grad}; bin/make-grad-alias.py writes it). From
 * then on autograd adds each gradient into its slice in place, so the bucket's gradient is the flat
 * tensor itself: no {@code cat} to gather it, one fill to zero it.
 */
final class GradAlias implements AutoCloseable {
  static final String RESOURCE = "grad_alias.pt";

  private final PtSymbolBlock module;

  private GradAlias(PtSymbolBlock module) {
    this.module = module;
  }

  static GradAlias load(PtNDManager manager) {
    return new GradAlias(
        TorchScripts.load(manager, RESOURCE, "the gradient aliasing", "make-grad-alias.py"));
  }

  /**
   * Copies {@code grads} (the engine's {@code .grad} tensors, in bucket order) into consecutive
   * slices of {@code flat} and points each at its slice.
   */
  void alias(PtNDArray[] grads, NDArray flat) {
    try (IValue list = IValue.listFrom(grads);
        IValue f = IValue.from((PtNDArray) flat);
        IValue out = module.forward(list, f)) {
      // out is flat itself
    }
  }

  /**
   * Whether every gradient of {@code grads} now reads through {@code flat}: with the flat tensor
   * set to ones, each must read all ones (checked once per bucket; the values are restored).
   */
  static boolean holds(NDArray flat, PtNDArray[] grads, Supplier<NDArray> one) {
    try (NDArray saved = flat.duplicate()) {
      FlatState.copy(flat, one.get());
      try {
        for (PtNDArray g : grads) {
          try (NDArray min = g.min();
              NDArray max = g.max()) {
            if (min.getFloat() != 1f || max.getFloat() != 1f) {
              return false;
            }
          }
        }
        return true;
      } finally {
        FlatState.copy(flat, saved);
      }
    }
  }

  @Override
  public void close() {
    module.close();
  }
}
