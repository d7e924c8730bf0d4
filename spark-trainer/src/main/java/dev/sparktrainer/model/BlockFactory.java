package dev.sparktrainer.model;

import ai.djl.nn.Block;
import java.io.Serializable;

/**
 * Builds a user's custom DJL block on the executors. It is serialized into the Spark task, so it
 * must carry only small, serializable state; to rebuild a saved model without this object, give the
 * class a public no-argument constructor.
 */
@FunctionalInterface
public interface BlockFactory extends Serializable {
  /** A new, uninitialized block; every call builds the same architecture. */
  Block newBlock();
}
