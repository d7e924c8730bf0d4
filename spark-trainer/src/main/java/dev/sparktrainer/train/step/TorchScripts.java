package dev.sparktrainer.train.step;

import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.JniUtils;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * The step's TorchScript helpers (what DJL's API cannot do: make bfloat16 tensors, point a {@code
 * .grad} at a slice), loaded from this package's resources; each is written by a script in bin/.
 */
final class TorchScripts {
  private TorchScripts() {}

  /**
   * Loads resource {@code name} ({@code what} it is, for the error; {@code script}: the bin/ script
   * that writes it) onto {@code manager}'s device.
   */
  static PtSymbolBlock load(PtNDManager manager, String name, String what, String script) {
    try (InputStream in = TorchScripts.class.getResourceAsStream(name)) {
      if (in == null) {
        throw new IllegalStateException(
            "Missing resource "
                + name
                + " ("
                + what
                + "): rebuild the trainer jar, or run bin/"
                + script);
      }
      return JniUtils.loadModule(manager, in, false, false);
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot load " + what + " " + name, e);
    }
  }
}
