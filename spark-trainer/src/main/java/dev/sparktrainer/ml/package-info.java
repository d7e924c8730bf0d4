/**
 * Spark ML integration: {@link dev.sparktrainer.ml.SparkTrainerEstimator} and {@link
 * dev.sparktrainer.ml.SparkTrainerModel} (Params, Pipelines, MLWritable/MLReadable; the Params they
 * share defined once in {@link dev.sparktrainer.ml.SharedParams}, the Estimator's training ones in
 * {@link dev.sparktrainer.ml.TrainingParams}, named after the option table, {@link
 * dev.sparktrainer.train.TrainerOption}), and {@link dev.sparktrainer.ml.BatchInference}, the
 * distributed batch inference behind {@code transform}, the command line's {@code predict} and
 * {@code evaluate}: each executor loads a model once and runs batches of rows through it.
 */
package dev.sparktrainer.ml;
