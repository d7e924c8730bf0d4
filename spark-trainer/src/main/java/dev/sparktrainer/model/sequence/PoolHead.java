package dev.sparktrainer.model.sequence;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.internal.NDArrayEx;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

/**
 * The model's exit: {@code (x [B, T, D], mask [B, T], ...)} to logits {@code [B, outputs]}: a final
 * layer norm (the Transformer's; none for the embedding bag), the masked mean over positions {@code
 * sum_t mask_t x_t / max(sum_t mask_t, 1)} (an empty sequence pools to 0, not NaN), dropout when
 * training with a rate above 0, and a dense layer.
 */
final class PoolHead extends AbstractBlock {
  private final int outputs;
  private final float dropout;
  private final Parameter normGamma;
  private final Parameter normBeta;
  private final Parameter weight;
  private final Parameter bias;

  PoolHead(int dim, int outputs, boolean norm, float dropout) {
    super((byte) 1);
    this.outputs = outputs;
    this.dropout = dropout;
    normGamma = norm ? param("norm_gamma", Parameter.Type.GAMMA, new Shape(dim)) : null;
    normBeta = norm ? param("norm_beta", Parameter.Type.BETA, new Shape(dim)) : null;
    weight = param("weight", Parameter.Type.WEIGHT, new Shape(outputs, dim));
    bias = param("bias", Parameter.Type.BIAS, new Shape(outputs));
  }

  private Parameter param(String name, Parameter.Type type, Shape shape) {
    return addParameter(Parameter.builder().setName(name).setType(type).optShape(shape).build());
  }

  @Override
  protected NDList forwardInternal(
      ParameterStore store, NDList in, boolean training, PairList<String, Object> params) {
    NDArray x = in.get(0);
    NDArray mask = in.get(1);
    var device = x.getDevice();
    NDArrayEx ex = x.getNDArrayInternal();
    if (normGamma != null) {
      x =
          EncoderLayer.layerNorm(
              ex,
              x,
              store.getValue(normGamma, device, training),
              store.getValue(normBeta, device, training));
    }
    long b = x.getShape().get(0);
    long d = x.getShape().get(2);
    // [B, 1, T] x [B, T, D]: the masked sum in one batched matrix product
    NDArray sum = mask.expandDims(1).matMul(x).reshape(b, d);
    NDArray count = mask.sum(new int[] {1}, true).clip(1f, 1e9f);
    NDArray pooled = sum.div(count);
    if (training && dropout > 0) {
      pooled = ex.dropout(pooled, dropout, true).head();
    }
    NDArray logits =
        ex.linear(
                pooled,
                store.getValue(weight, device, training),
                store.getValue(bias, device, training))
            .head();
    return new NDList(logits);
  }

  @Override
  public Shape[] getOutputShapes(Shape[] inputs) {
    return new Shape[] {new Shape(inputs[0].get(0), outputs)};
  }
}
