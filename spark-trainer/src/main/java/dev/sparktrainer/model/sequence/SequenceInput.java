package dev.sparktrainer.model.sequence;

import java.io.Serializable;

/**
 * What a sequence model needs to know of its input before it is built: the vocabulary size (every
 * token id is in {@code [0, vocabSize)}) and the maximum sequence length (every batch's padded
 * length {@code T} is at most {@code maxLength}; the Transformer learns one position embedding per
 * position {@code 0..maxLength-1}).
 *
 * @param vocabSize number of token ids, at least 1
 * @param maxLength longest sequence, at least 1
 */
public record SequenceInput(long vocabSize, int maxLength) implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Validates the values. */
  public SequenceInput {
    if (vocabSize < 1 || vocabSize > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "Invalid vocabulary size " + vocabSize + ": expected 1 to " + Integer.MAX_VALUE);
    }
    if (maxLength < 1) {
      throw new IllegalArgumentException(
          "Invalid maximum sequence length " + maxLength + ": expected >= 1");
    }
  }
}
