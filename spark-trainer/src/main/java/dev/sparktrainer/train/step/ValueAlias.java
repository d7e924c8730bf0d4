package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import java.util.function.Supplier;

/**
 * Points tensors that a TorchScript module computes with (its parameters, its float buffers) at
 * consecutive slices of one flat tensor, with their current values, in one engine call ({@code
 * value_alias.pt}: {@code t.set_(flat.narrow(0, off, n).view(t.shape))} under no_grad; written by
 * bin/make-value-alias.py). The module's own tensors keep their identity and {@code requires_grad};
 * only their storage moves into the flat tensor, so an optimizer that updates the flat tensor in
 * place updates the module, as {@link FlatState}'s views do for the models the trainer builds
 * (whose DJL arrays it can re-point on the Java side; a module's tensors it cannot).
 */
final class ValueAlias implements AutoCloseable {
  static final String RESOURCE = "value_alias.pt";

  private final PtSymbolBlock module;

  private ValueAlias(PtSymbolBlock module) {
    this.module = module;
  }

  static ValueAlias load(PtNDManager manager) {
    return new ValueAlias(
        TorchScripts.load(manager, RESOURCE, "the value aliasing", "make-value-alias.py"));
  }

  /**
   * Copies {@code tensors} into consecutive slices of {@code flat} and points each at its slice.
   */
  void alias(PtNDArray[] tensors, NDArray flat) {
    try (IValue list = IValue.listFrom(tensors);
        IValue f = IValue.from((PtNDArray) flat);
        IValue out = module.forward(list, f)) {
      // out is flat itself
    }
  }

  /**
   * Whether every tensor of {@code tensors} now reads through {@code flat} (checked once: see
   * {@link GradAlias#holds}).
   */
  static boolean holds(NDArray flat, PtNDArray[] tensors, Supplier<NDArray> one) {
    return GradAlias.holds(flat, tensors, one);
  }

  @Override
  public void close() {
    module.close();
  }
}
