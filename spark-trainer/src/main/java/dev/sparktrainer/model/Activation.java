package dev.sparktrainer.model;

import ai.djl.nn.Block;
import java.util.Locale;

/** Activation functions of the built-in models. */
public enum Activation {
  /** max(0, x). */
  RELU,
  /** tanh(x). */
  TANH,
  /** 1 / (1 + e^-x). */
  SIGMOID,
  /** Gaussian error linear unit. */
  GELU;

  Block block() {
    switch (this) {
      case RELU:
        return ai.djl.nn.Activation.reluBlock();
      case TANH:
        return ai.djl.nn.Activation.tanhBlock();
      case SIGMOID:
        return ai.djl.nn.Activation.sigmoidBlock();
      case GELU:
        return ai.djl.nn.Activation.geluBlock();
      default:
        throw new AssertionError(this);
    }
  }

  /** Parses {@code relu}, {@code tanh}, {@code sigmoid} or {@code gelu} (any case). */
  public static Activation parse(String s) {
    try {
      return valueOf(s.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "Invalid activation '" + s + "': expected relu, tanh, sigmoid or gelu", e);
    }
  }
}
