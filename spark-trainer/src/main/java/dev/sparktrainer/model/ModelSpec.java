package dev.sparktrainer.model;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import dev.sparktrainer.model.sequence.EmbedSpec;
import dev.sparktrainer.model.sequence.TransformerSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A model, as a small serializable description: the driver validates it, the executors build their
 * replica from it with {@link #newBlock()}.
 *
 * <p>Implementations must be deterministic: two calls of {@link #newBlock()} give blocks with the
 * same parameters (names, shapes, order), which is what lets replicas exchange gradients by
 * position.
 */
public interface ModelSpec extends Serializable {
  /** A new, uninitialized block. */
  Block newBlock();

  /**
   * A block with fresh parameters, its arrays owned by {@code manager} (on its device): {@link
   * #newBlock()} initialized for float32 inputs of {@link #inputShapes()}. A TorchScript module is
   * loaded instead, with the parameters its file holds.
   */
  default Block build(NDManager manager) {
    Block block = newBlock();
    block.initialize(manager, DataType.FLOAT32, batchInputShapes(1));
    return block;
  }

  /**
   * A block with the parameters {@code parameters} ({@code Block.saveParameters}'s format), its
   * arrays owned by {@code manager}.
   *
   * @throws MalformedModelException if the parameters do not fit the block
   */
  default Block restore(NDManager manager, byte[] parameters) throws MalformedModelException {
    Block block = build(manager);
    try {
      block.loadParameters(manager, new DataInputStream(new ByteArrayInputStream(parameters)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return block;
  }

  /** The shape of one example of each feature tensor, without the batch dimension. */
  Shape[] inputShapes();

  /** The input shapes with a leading batch dimension of {@code batch}, for initialization. */
  default Shape[] batchInputShapes(long batch) {
    Shape[] per = inputShapes();
    Shape[] out = new Shape[per.length];
    for (int i = 0; i < per.length; i++) {
      out[i] = new Shape(batch).addAll(per[i]);
    }
    return out;
  }

  /**
   * A description from which {@link #fromProperties(Map)} rebuilds this spec; key {@code type}
   * names the kind. Custom blocks record their factory's class name.
   */
  Map<String, String> toProperties();

  /** Rebuilds a spec saved with {@link #toProperties()}. */
  static ModelSpec fromProperties(Map<String, String> props) {
    String type = Specs.required(props, "type");
    switch (type) {
      case MlpSpec.TYPE:
        return MlpSpec.fromProperties(props);
      case CnnSpec.TYPE:
        return CnnSpec.fromProperties(props);
      case ResNetSpec.TYPE:
        return ResNetSpec.fromProperties(props);
      case CustomSpec.TYPE:
        return CustomSpec.fromProperties(props);
      case TorchScriptSpec.TYPE:
        return TorchScriptSpec.fromProperties(props);
      case EmbedSpec.TYPE:
        return EmbedSpec.fromProperties(props);
      case TransformerSpec.TYPE:
        return TransformerSpec.fromProperties(props);
      default:
        throw new IllegalArgumentException(
            "Invalid model type '"
                + type
                + "': expected mlp, cnn, resnet, custom, torchscript, embed or transformer");
    }
  }

  /** An ordered, mutable map for {@link #toProperties()} implementations. */
  static Map<String, String> newProperties(String type) {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("type", type);
    return m;
  }
}
