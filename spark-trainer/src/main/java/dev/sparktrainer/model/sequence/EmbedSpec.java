package dev.sparktrainer.model.sequence;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import dev.sparktrainer.model.ModelSpec;
import java.util.Map;

/**
 * A fastText-style classifier of token sequences ({@code --model embed:DIM}): an embedding of
 * {@code dim} values per token id, the masked mean over the sequence's real positions, dropout when
 * {@code dropout > 0}, and a dense layer to {@code outputs} logits.
 *
 * <p>Its input is one sequence column as two tensors: {@code ids [B, T]} int64 and {@code mask [B,
 * T]} float32 (1 for real positions, 0 for padding), {@code T <= maxLength}, any {@code T} per
 * batch. Parameters: {@code tokens [vocab, dim]}, the head's {@code weight [outputs, dim]} and
 * {@code bias}.
 *
 * @param vocabSize number of token ids (ids are in {@code [0, vocabSize)})
 * @param maxLength longest sequence (T of the batches is at most this)
 * @param dim embedding size
 * @param outputs number of logits (classes)
 * @param dropout dropout rate on the pooled vector, 0 for none
 */
public record EmbedSpec(long vocabSize, int maxLength, int dim, int outputs, float dropout)
    implements ModelSpec {
  private static final long serialVersionUID = 1L;

  /** The {@code type} of its properties and the command line's model name. */
  public static final String TYPE = "embed";

  /** Validates the values. */
  public EmbedSpec {
    new SequenceInput(vocabSize, maxLength);
    SequenceSpecs.positive("embedding dim", dim);
    SequenceSpecs.positive("outputs", outputs);
    SequenceSpecs.dropout(dropout);
  }

  /** An embedding bag of {@code dim} for {@code input}, {@code outputs} logits, no dropout. */
  public static EmbedSpec of(SequenceInput input, int dim, int outputs) {
    return new EmbedSpec(input.vocabSize(), input.maxLength(), dim, outputs, 0f);
  }

  @Override
  public Block newBlock() {
    SequentialBlock net = new SequentialBlock();
    net.add(new TokenEmbedding(vocabSize, dim, 0));
    net.add(new PoolHead(dim, outputs, false, dropout));
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
    m.put("dim", Integer.toString(dim));
    m.put("outputs", Integer.toString(outputs));
    m.put("dropout", Float.toString(dropout));
    return m;
  }

  /** Rebuilds a spec saved with {@link #toProperties()}. */
  public static EmbedSpec fromProperties(Map<String, String> p) {
    return new EmbedSpec(
        Long.parseLong(SequenceSpecs.required(p, "vocabSize")),
        SequenceSpecs.requiredInt(p, "maxLength"),
        SequenceSpecs.requiredInt(p, "dim"),
        SequenceSpecs.requiredInt(p, "outputs"),
        Float.parseFloat(p.getOrDefault("dropout", "0")));
  }
}
