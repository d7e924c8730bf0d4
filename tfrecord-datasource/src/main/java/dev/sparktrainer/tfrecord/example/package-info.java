/**
 * {@code tf.train.Example} and {@code tf.train.SequenceExample} in protobuf wire format, decoded
 * without generated classes: a scanner finds the features a reader asks for and skips the rest
 * without decoding their values; {@link dev.sparktrainer.tfrecord.example.FeatureValues} decodes
 * one feature (packed or unpacked, merged as protobuf merges) into reusable arrays; an encoder
 * writes records TensorFlow reads. {@link dev.sparktrainer.tfrecord.example.Feature} is a plain
 * value model for inference, tools and tests.
 */
package dev.sparktrainer.tfrecord.example;
