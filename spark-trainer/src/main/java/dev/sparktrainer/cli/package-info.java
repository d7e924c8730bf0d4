/**
 * The command line ({@code bin/spark-trainer}, or {@code spark-submit --class
 * dev.sparktrainer.cli.SparkTrainerCli spark-trainer-<version>-all.jar}): {@code train}, {@code
 * evaluate}, {@code predict}, {@code inspect} and {@code convert}. Flags are parsed and checked
 * once on the driver ({@code Flags}), optionally filled from a YAML config file; the trainer's
 * settings map onto its builders in one place ({@code TrainerFlags}, after the option table {@link
 * dev.sparktrainer.train.TrainerOption}); the data's paths, columns, types and labels are checked
 * ({@code DataChecks}) before any training or inference job starts, each problem a one-line error
 * naming the thing and what is expected.
 */
package dev.sparktrainer.cli;
