package dev.sparktrainer.model.sequence;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.internal.NDArrayEx;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import dev.sparktrainer.model.Activation;

/**
 * One pre-norm Transformer encoder layer on {@code (x [B, T, D], mask [B, T], bias [B, 1, 1, T])}
 * (see {@link TokenEmbedding}), as PyTorch's {@code nn.TransformerEncoderLayer(D, H, F,
 * batch_first=True, norm_first=True)} computes it with {@code src_key_padding_mask}: {@code x +
 * attention(LayerNorm(x))}, then {@code x + W2 act(W1 LayerNorm(x))}. Its parameters are PyTorch's,
 * in PyTorch's order and shapes ({@code in_proj_weight [3D, D]} and so on).
 *
 * <p>Attention adds {@code bias} (0 for real keys, -1e9 for padding) to the scores, so a padding
 * key gets weight exactly 0 and a row of only padding (an empty sequence) gets uniform weights
 * instead of NaN. Nothing depends on {@code T} but the tensors: every batch may have its own.
 *
 * <p>In a bf16 step the tensors are bfloat16 and layer norm's scale and shift float32 (PyTorch
 * computes a mixed layer norm in float32). Softmax is then written out ({@code exp(s - max) /
 * sum}): DJL's softmax names the input's data type to the engine, which for bfloat16 it cannot.
 */
final class EncoderLayer extends AbstractBlock {
  static final float EPS = 1e-5f;

  private final int dim;
  private final int heads;
  private final Activation activation;
  private final float dropout;
  private final Parameter norm1Gamma;
  private final Parameter norm1Beta;
  private final Parameter inWeight;
  private final Parameter inBias;
  private final Parameter outWeight;
  private final Parameter outBias;
  private final Parameter norm2Gamma;
  private final Parameter norm2Beta;
  private final Parameter ff1Weight;
  private final Parameter ff1Bias;
  private final Parameter ff2Weight;
  private final Parameter ff2Bias;

  EncoderLayer(int dim, int heads, int ff, Activation activation, float dropout) {
    super((byte) 1);
    this.dim = dim;
    this.heads = heads;
    this.activation = activation;
    this.dropout = dropout;
    norm1Gamma = param("norm1_gamma", Parameter.Type.GAMMA, new Shape(dim));
    norm1Beta = param("norm1_beta", Parameter.Type.BETA, new Shape(dim));
    inWeight = param("in_proj_weight", Parameter.Type.WEIGHT, new Shape(3L * dim, dim));
    inBias = param("in_proj_bias", Parameter.Type.BIAS, new Shape(3L * dim));
    outWeight = param("out_proj_weight", Parameter.Type.WEIGHT, new Shape(dim, dim));
    outBias = param("out_proj_bias", Parameter.Type.BIAS, new Shape(dim));
    norm2Gamma = param("norm2_gamma", Parameter.Type.GAMMA, new Shape(dim));
    norm2Beta = param("norm2_beta", Parameter.Type.BETA, new Shape(dim));
    ff1Weight = param("linear1_weight", Parameter.Type.WEIGHT, new Shape(ff, dim));
    ff1Bias = param("linear1_bias", Parameter.Type.BIAS, new Shape(ff));
    ff2Weight = param("linear2_weight", Parameter.Type.WEIGHT, new Shape(dim, ff));
    ff2Bias = param("linear2_bias", Parameter.Type.BIAS, new Shape(dim));
  }

  private Parameter param(String name, Parameter.Type type, Shape shape) {
    return addParameter(Parameter.builder().setName(name).setType(type).optShape(shape).build());
  }

  @Override
  protected NDList forwardInternal(
      ParameterStore store, NDList in, boolean training, PairList<String, Object> params) {
    NDArray x = in.get(0);
    NDArray bias = in.get(2);
    long b = x.getShape().get(0);
    long t = x.getShape().get(1);
    long dh = dim / heads;
    NDArrayEx ex = x.getNDArrayInternal();
    var device = x.getDevice();

    // attention block
    NDArray h =
        layerNorm(
            ex,
            x,
            store.getValue(norm1Gamma, device, training),
            store.getValue(norm1Beta, device, training));
    NDArray qkv =
        ex.linear(
                h,
                store.getValue(inWeight, device, training),
                store.getValue(inBias, device, training))
            .head();
    NDList parts = qkv.split(3, 2);
    // [B, T, D] -> [B, H, T, dh]; keys as [B, H, dh, T]
    NDArray q = parts.get(0).reshape(b, t, heads, dh).transpose(0, 2, 1, 3);
    NDArray k = parts.get(1).reshape(b, t, heads, dh).transpose(0, 2, 3, 1);
    NDArray v = parts.get(2).reshape(b, t, heads, dh).transpose(0, 2, 1, 3);
    NDArray scores = q.mul(scalar(x, (float) (1 / Math.sqrt(dh)))).matMul(k).add(bias);
    NDArray weights = softmax(scores);
    if (training && dropout > 0) {
      weights = ex.dropout(weights, dropout, true).head();
    }
    NDArray attn = weights.matMul(v).transpose(0, 2, 1, 3).reshape(b, t, dim);
    attn =
        ex.linear(
                attn,
                store.getValue(outWeight, device, training),
                store.getValue(outBias, device, training))
            .head();
    x = x.add(drop(ex, attn, training));

    // feed-forward block
    h =
        layerNorm(
            ex,
            x,
            store.getValue(norm2Gamma, device, training),
            store.getValue(norm2Beta, device, training));
    h =
        ex.linear(
                h,
                store.getValue(ff1Weight, device, training),
                store.getValue(ff1Bias, device, training))
            .head();
    h =
        activation == Activation.GELU
            ? h.getNDArrayInternal().gelu()
            : ai.djl.nn.Activation.relu(h);
    h = drop(ex, h, training);
    h =
        ex.linear(
                h,
                store.getValue(ff2Weight, device, training),
                store.getValue(ff2Bias, device, training))
            .head();
    x = x.add(drop(ex, h, training));
    return new NDList(x, in.get(1), bias);
  }

  private NDArray drop(NDArrayEx ex, NDArray a, boolean training) {
    return training && dropout > 0 ? ex.dropout(a, dropout, true).head() : a;
  }

  /**
   * {@code v} as a 0-dim float32 tensor filled on {@code like}'s device: DJL's arithmetic with a
   * Java number copies it from the host, which on a GPU waits for the queued work. Times a bfloat16
   * tensor it stays bfloat16.
   */
  static NDArray scalar(NDArray like, float v) {
    return like.getManager().full(new Shape(), v, DataType.FLOAT32, like.getDevice());
  }

  static NDArray layerNorm(NDArrayEx ex, NDArray x, NDArray gamma, NDArray beta) {
    return ex.layerNorm(x, new Shape(gamma.getShape().get(0)), gamma, beta, EPS).head();
  }

  /** Softmax over the last axis; written out for bfloat16 (see the class comment). */
  static NDArray softmax(NDArray scores) {
    if (scores.getDataType() == DataType.FLOAT32) {
      return scores.softmax(-1);
    }
    NDArray e = scores.sub(scores.max(new int[] {-1}, true).stopGradient()).exp();
    return e.div(e.sum(new int[] {-1}, true));
  }

  @Override
  public Shape[] getOutputShapes(Shape[] inputs) {
    return inputs;
  }
}
