/**
 * Text to token ids where the data is converted ({@code convert --tokenize}): a word-level {@link
 * dev.sparktrainer.data.text.Tokenizer} with one documented rule, and a {@link
 * dev.sparktrainer.data.text.Vocabulary} counted from the training split by a Spark job ({@code
 * <pad>}=0, {@code <unk>}=1, then the most frequent tokens), stored as {@code vocab.txt}.
 */
package dev.sparktrainer.data.text;
