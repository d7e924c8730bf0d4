package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.index.NDIndex;
import java.nio.Buffer;

/**
 * Overwrites a tensor's values in place from a host buffer, bit for bit.
 *
 * <p>DJL's {@code NDArray.set(Buffer)} does this natively ({@code PyTorchLibrary.torchSet}) under
 * libtorch's deprecated {@code AutoNonVariableTypeMode} guard, which prints a deprecation warning
 * to stderr that a user cannot act on. Here the buffer becomes a tensor and is copied into a
 * detached view of the target (same storage, outside autograd, so a parameter that requires a
 * gradient keeps it): the same bits, and no warning.
 */
final class TensorWrites {
  /** Every element; unlike an empty index it is accepted by libtorch, and it covers scalars too. */
  private static final NDIndex ALL = new NDIndex("...");

  private TensorWrites() {}

  /** Copies {@code values} (as many elements as {@code target} has) into {@code target}. */
  static void overwrite(NDArray target, Buffer values) {
    try (NDArray src = target.getManager().create(values, target.getShape(), target.getDataType());
        NDArray view = target.stopGradient()) {
      view.set(ALL, src);
    }
  }
}
