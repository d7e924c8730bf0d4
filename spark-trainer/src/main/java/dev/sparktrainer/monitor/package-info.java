/**
 * Watching a run: live progress from rank 0 to the driver ({@link
 * dev.sparktrainer.monitor.TrainingMonitor}, a progress bar on a terminal, log lines otherwise,
 * each epoch's line naming its slowest rank), TensorBoard event files (the generated {@code Event}
 * protos in the project's own TFRecord writer, {@link dev.sparktrainer.monitor.TensorBoardWriter}),
 * the per-epoch metrics as JSON ({@link dev.sparktrainer.monitor.MetricsReport}) and a PNG of the
 * training curves ({@link dev.sparktrainer.monitor.TrainingPlot}).
 */
package dev.sparktrainer.monitor;
