/**
 * Spark ML integration: {@link dev.sparktrainer.ml.SparkTrainerEstimator} and {@link
 * dev.sparktrainer.ml.SparkTrainerModel} (Params, Pipelines, MLWritable/MLReadable), and {@link
 * dev.sparktrainer.ml.BatchInference}, the distributed batch inference behind {@code transform},
 * the command line's {@code predict} and {@code evaluate}: each executor loads a model once and
 * runs batches of rows through it.
 */
package dev.sparktrainer.ml;
