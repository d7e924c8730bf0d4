/**
 * Where a worker's batches come from: a {@link dev.sparktrainer.train.input.BatchSourceFactory},
 * made on the driver and shipped to every task — the input pipeline's over planned files ({@link
 * dev.sparktrainer.train.input.DatasetSource}), or {@link
 * dev.sparktrainer.train.input.InMemoryDataset} for data that fits in memory; {@link
 * dev.sparktrainer.train.input.DataInput} is data given as files or a DataFrame until it is
 * resolved.
 */
package dev.sparktrainer.train.input;
