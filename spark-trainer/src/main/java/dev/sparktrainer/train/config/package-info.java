/**
 * The training job's configuration: one immutable {@link
 * dev.sparktrainer.train.config.TrainingConfig} of groups (model, devices, data, comm, checkpoints,
 * elastic), built and validated by the trainer's builder and changed only by withers. It sits below
 * the loop, the job and the facade that read it, and above the step, the input and the elastic
 * policy whose values it holds.
 */
package dev.sparktrainer.train.config;
