/**
 * Elastic training, below the trainer that uses it: {@code ElasticPolicy} decides, with no
 * communicator, logging or Spark, which worker counts a job can run on and how a state written by
 * one layout continues on another (the single copy of the divisibility rule); {@code GrowRequest}
 * owns the file by which the driver asks running workers to stop and grow; {@code
 * ElasticSupervisor} is the driver's relaunch loop, with Spark behind an interface. Nothing here
 * depends on the rest of {@code dev.sparktrainer.train} (an ArchUnit rule): rank 0's start-up
 * negotiation, which fills the training state, stays there ({@code ResumeNegotiation}) and asks the
 * policy.
 */
package dev.sparktrainer.train.elastic;
