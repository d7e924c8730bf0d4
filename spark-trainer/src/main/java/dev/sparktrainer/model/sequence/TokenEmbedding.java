package dev.sparktrainer.model.sequence;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.ndarray.types.SparseFormat;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.NormalInitializer;
import ai.djl.util.PairList;

/**
 * The model's entry: {@code (ids [B, T] int64, mask [B, T])} to {@code (x [B, T, D], mask)}, the
 * token embedding of each id (plus the learned embedding of its position with {@code positions >
 * 0}). With positions it also hands on the attention's additive key mask {@code (mask - 1) * 1e9}
 * shaped {@code [B, 1, 1, T]}, made once here for every layer.
 */
final class TokenEmbedding extends AbstractBlock {
  /** What a masked key adds to its attention scores: its weight is exactly 0 after softmax. */
  static final float MASKED = 1e9f;

  private final int dim;
  private final Parameter tokens;
  private final Parameter positions;

  /**
   * @param vocab number of token ids
   * @param dim embedding size
   * @param maxLength number of learned positions; 0 for none (and no attention mask)
   */
  TokenEmbedding(long vocab, int dim, int maxLength) {
    super((byte) 1);
    this.dim = dim;
    tokens =
        addParameter(
            Parameter.builder()
                .setName("tokens")
                .setType(Parameter.Type.WEIGHT)
                .optShape(new Shape(vocab, dim))
                .optInitializer(new NormalInitializer(0.02f))
                .build());
    positions =
        maxLength == 0
            ? null
            : addParameter(
                Parameter.builder()
                    .setName("positions")
                    .setType(Parameter.Type.WEIGHT)
                    .optShape(new Shape(maxLength, dim))
                    .optInitializer(new NormalInitializer(0.02f))
                    .build());
  }

  @Override
  protected NDList forwardInternal(
      ParameterStore store, NDList in, boolean training, PairList<String, Object> params) {
    NDArray ids = in.get(0);
    NDArray mask = in.get(1);
    NDArray table = store.getValue(tokens, ids.getDevice(), training);
    NDArray x = ids.getNDArrayInternal().embedding(ids, table, SparseFormat.DENSE).head();
    if (positions == null) {
      return new NDList(x, mask);
    }
    long b = ids.getShape().get(0);
    long t = ids.getShape().get(1);
    NDArray pos = store.getValue(positions, ids.getDevice(), training);
    x = x.add(pos.get(new NDIndex("0:{}", t)));
    NDArray bias =
        mask.reshape(b, 1, 1, t)
            .sub(EncoderLayer.scalar(mask, 1f))
            .mul(EncoderLayer.scalar(mask, MASKED));
    return new NDList(x, mask, bias);
  }

  @Override
  public Shape[] getOutputShapes(Shape[] inputs) {
    Shape ids = inputs[0];
    Shape x = new Shape(ids.get(0), ids.get(1), dim);
    if (positions == null) {
      return new Shape[] {x, inputs[1]};
    }
    return new Shape[] {x, inputs[1], new Shape(ids.get(0), 1, 1, ids.get(1))};
  }
}
