/**
 * {@code tf.train.Example} and {@code tf.train.SequenceExample} in protobuf wire format. Reading is
 * hand-written, as TensorFlow's fast Example parser is: a scanner finds the features a reader asks
 * for and skips the rest without decoding their values; {@link
 * dev.sparktrainer.tfrecord.example.FeatureValues} decodes one feature (packed or unpacked, merged
 * as protobuf merges) into reusable arrays; what it accepts and rejects is what protobuf-java's
 * generated parser does (ScannerDifferentialTest). Writing, {@link
 * dev.sparktrainer.tfrecord.example.ExampleEncoder}, goes through protobuf-java's {@code
 * CodedOutputStream} with the field numbers of the generated classes in {@code
 * dev.sparktrainer.tfrecord.proto} and produces their bytes exactly. {@link
 * dev.sparktrainer.tfrecord.example.Feature} is a plain value model for inference, tools and tests.
 */
package dev.sparktrainer.tfrecord.example;
