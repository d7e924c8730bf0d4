/**
 * Optimizers (SGD with momentum, Adam, AdamW) and learning-rate schedules (warm-up, step and cosine
 * decay, the linear scaling rule) whose state the trainer can checkpoint and restore.
 *
 * <p>They work on plain {@code float[]} copies of the parameters and the averaged gradients, in
 * Java arithmetic: every replica runs exactly the same operations in the same order on the same
 * bits, so replicas stay bit-identical whatever the device or native library; and the state is
 * plain arrays, written by {@link dev.sparktrainer.optim.Optimizer#writeState} and read back by
 * {@link dev.sparktrainer.optim.Optimizer#readState}.
 */
package dev.sparktrainer.optim;
