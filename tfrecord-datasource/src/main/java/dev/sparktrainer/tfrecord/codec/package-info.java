/**
 * The TFRecord file format, independent of Spark: framing (uint64 length, masked CRC-32C of the
 * length, data, masked CRC-32C of the data), compression (none, GZIP, ZLIB) and a split-aware
 * reader that resynchronises on the first valid record after an arbitrary byte offset.
 */
package dev.sparktrainer.tfrecord.codec;
