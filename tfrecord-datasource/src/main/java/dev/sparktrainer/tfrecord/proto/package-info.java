/**
 * TensorFlow's protos as protobuf-java classes, generated at build time by protoc from {@code
 * src/main/proto} (written from TensorFlow's example.proto, feature.proto, event.proto and
 * summary.proto; Apache License 2.0, see src/main/proto/NOTICE): {@code Example}, {@code
 * SequenceExample}, {@code Feature} and its lists, and the TensorBoard {@code Event} and {@code
 * Summary}. The package name is the project's, not {@code org.tensorflow.*}, so Google's own
 * generated classes can sit on the same class path.
 */
package dev.sparktrainer.tfrecord.proto;
