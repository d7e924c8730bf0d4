package dev.sparktrainer.model.sequence;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.ModelSpec;
import java.util.Locale;
import java.util.Map;

/**
 * A Transformer encoder classifier of token sequences ({@code --model
 * transformer:layers=L,dim=D,heads=H[,ff=F]}): token embeddings plus learned position embeddings
 * (positions {@code 0..maxLength-1}), {@code layers} pre-norm encoder layers (PyTorch's {@code
 * nn.TransformerEncoderLayer(D, H, F, batch_first=True, norm_first=True, activation=...)} with the
 * padding as {@code src_key_padding_mask}), a final layer norm, the masked mean over positions and
 * a dense layer to {@code outputs} logits.
 *
 * <p>Input as for {@link EmbedSpec}: {@code ids [B, T]} int64 and {@code mask [B, T]} float32, any
 * {@code T <= maxLength} per batch. Padding positions change no output; an empty sequence gives
 * finite logits (those of a zero pooled vector). Dropout ({@code dropout > 0}) is applied where
 * PyTorch's layer applies it: the attention weights, the attention's and the feed-forward's outputs
 * before their residual additions, after the feed-forward's activation; and on the pooled vector.
 *
 * @param vocabSize number of token ids
 * @param maxLength longest sequence: the number of learned positions
 * @param layers number of encoder layers
 * @param dim model width D
 * @param heads attention heads; must divide {@code dim}
 * @param ff feed-forward width F ({@code 4 * dim} by default on the command line)
 * @param outputs number of logits
 * @param activation the feed-forward's activation: {@link Activation#RELU} (PyTorch's default) or
 *     {@link Activation#GELU}
 * @param dropout dropout rate, 0 for none
 */
public record TransformerSpec(
    long vocabSize,
    int maxLength,
    int layers,
    int dim,
    int heads,
    int ff,
    int outputs,
    Activation activation,
    float dropout)
    implements ModelSpec {
  private static final long serialVersionUID = 1L;

  /** The {@code type} of its properties and the command line's model name. */
  public static final String TYPE = "transformer";

  /** Validates the values. */
  public TransformerSpec {
    new SequenceInput(vocabSize, maxLength);
    SequenceSpecs.positive("layers", layers);
    SequenceSpecs.positive("dim", dim);
    SequenceSpecs.positive("heads", heads);
    SequenceSpecs.positive("ff", ff);
    SequenceSpecs.positive("outputs", outputs);
    if (dim % heads != 0) {
      throw new IllegalArgumentException("Invalid heads " + heads + ": it must divide dim " + dim);
    }
    if (activation != Activation.RELU && activation != Activation.GELU) {
      throw new IllegalArgumentException(
          "Invalid activation " + activation + " for a Transformer: expected relu or gelu");
    }
    SequenceSpecs.dropout(dropout);
  }

  /**
   * {@code layers} layers of width {@code dim}, {@code heads} heads, ff 4 x dim, ReLU, no dropout.
   */
  public static TransformerSpec of(
      SequenceInput input, int layers, int dim, int heads, int outputs) {
    return new TransformerSpec(
        input.vocabSize(),
        input.maxLength(),
        layers,
        dim,
        heads,
        4 * dim,
        outputs,
        Activation.RELU,
        0f);
  }

  @Override
  public Block newBlock() {
    SequentialBlock net = new SequentialBlock();
    net.add(new TokenEmbedding(vocabSize, dim, maxLength));
    for (int i = 0; i < layers; i++) {
      net.add(new EncoderLayer(dim, heads, ff, activation, dropout));
    }
    net.add(new PoolHead(dim, outputs, true, dropout));
    return net;
  }

  /** {@code ids} and {@code mask}, each {@code [maxLength]} (a batch has its own {@code T}). */
  @Override
  public Shape[] inputShapes() {
    return SequenceSpecs.inputShapes(maxLength);
  }

  @Override
  public Map<String, String> toProperties() {
    Map<String, String> m = ModelSpec.newProperties(TYPE);
    m.put("vocabSize", Long.toString(vocabSize));
    m.put("maxLength", Integer.toString(maxLength));
    m.put("layers", Integer.toString(layers));
    m.put("dim", Integer.toString(dim));
    m.put("heads", Integer.toString(heads));
    m.put("ff", Integer.toString(ff));
    m.put("outputs", Integer.toString(outputs));
    m.put("activation", activation.name().toLowerCase(Locale.ROOT));
    m.put("dropout", Float.toString(dropout));
    return m;
  }

  /** Rebuilds a spec saved with {@link #toProperties()}. */
  public static TransformerSpec fromProperties(Map<String, String> p) {
    return new TransformerSpec(
        Long.parseLong(SequenceSpecs.required(p, "vocabSize")),
        SequenceSpecs.requiredInt(p, "maxLength"),
        SequenceSpecs.requiredInt(p, "layers"),
        SequenceSpecs.requiredInt(p, "dim"),
        SequenceSpecs.requiredInt(p, "heads"),
        SequenceSpecs.requiredInt(p, "ff"),
        SequenceSpecs.requiredInt(p, "outputs"),
        Activation.parse(p.getOrDefault("activation", "relu")),
        Float.parseFloat(p.getOrDefault("dropout", "0")));
  }
}
