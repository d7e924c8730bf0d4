/**
 * What training reports, as values: each epoch's {@link
 * dev.sparktrainer.train.metrics.EpochMetrics}, {@link
 * dev.sparktrainer.train.metrics.StepProgress}, the {@link
 * dev.sparktrainer.train.metrics.StragglerReport} built from every rank's {@link
 * dev.sparktrainer.train.metrics.StepTimes}, the resumes, the whole {@link
 * dev.sparktrainer.train.metrics.History}, and the {@link
 * dev.sparktrainer.train.metrics.TrainingCallback} that receives them on rank 0.
 */
package dev.sparktrainer.train.metrics;
