/** The TFRecord demo job: the bundled digits data to sharded TFRecord files and back. */
package dev.sparktrainer.tfrecord.demo;
