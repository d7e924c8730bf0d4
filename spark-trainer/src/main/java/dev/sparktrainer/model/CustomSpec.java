package dev.sparktrainer.model;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import java.lang.reflect.Constructor;
import java.util.Map;

/**
 * Any DJL block, through a serializable {@link BlockFactory}.
 *
 * @param factory builds the block
 * @param inputDims per-example shape of each feature tensor
 */
public record CustomSpec(BlockFactory factory, long[][] inputDims) implements ModelSpec {
  private static final long serialVersionUID = 1L;
  static final String TYPE = "custom";

  /** Validates the values. */
  public CustomSpec {
    if (factory == null) {
      throw new IllegalArgumentException("Invalid factory null: a BlockFactory is required");
    }
    inputDims = Specs.copy(inputDims);
    Specs.checkShapes(Specs.toShapes(inputDims));
  }

  /** A spec for {@code factory}'s blocks taking features of these per-example shapes. */
  public static CustomSpec of(BlockFactory factory, Shape... inputShapes) {
    return new CustomSpec(factory, Specs.toDims(inputShapes));
  }

  @Override
  public Shape[] inputShapes() {
    return Specs.toShapes(inputDims);
  }

  @Override
  public Block newBlock() {
    return factory.newBlock();
  }

  @Override
  public Map<String, String> toProperties() {
    Map<String, String> m = ModelSpec.newProperties(TYPE);
    m.put("factory", factory.getClass().getName());
    m.put("inputShapes", Specs.formatShapes(inputShapes()));
    return m;
  }

  static CustomSpec fromProperties(Map<String, String> p) {
    String cls = Specs.required(p, "factory");
    try {
      Constructor<?> c =
          Class.forName(cls, true, Thread.currentThread().getContextClassLoader())
              .getDeclaredConstructor();
      return of(
          (BlockFactory) c.newInstance(), Specs.parseShapes(Specs.required(p, "inputShapes")));
    } catch (ReflectiveOperationException | ClassCastException e) {
      throw new IllegalArgumentException(
          "Invalid custom model factory '"
              + cls
              + "': expected a BlockFactory class with a public"
              + " no-argument constructor on the class path",
          e);
    }
  }
}
