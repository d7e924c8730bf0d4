/**
 * Models of token sequences: {@link dev.sparktrainer.model.sequence.EmbedSpec} (an embedding bag,
 * fastText style) and {@link dev.sparktrainer.model.sequence.TransformerSpec} (a pre-norm
 * Transformer encoder), both trained by the flat step like the other built-in models.
 *
 * <p>Their input contract: a sequence feature column is two tensors, {@code ids [B, T]} int64
 * (padding holds the pad id) and {@code mask [B, T]} float32 (1 real, 0 padding), padded to the
 * batch's own longest sequence ({@code 1 <= T <= maxLength}, any {@code T} per batch and rank).
 * What they must know before they are built, the vocabulary size and the maximum length, is a
 * {@link dev.sparktrainer.model.sequence.SequenceInput}.
 */
package dev.sparktrainer.model.sequence;
