/**
 * Test support: a Spark standalone cluster of separate JVMs (master, workers, executors, drivers)
 * started from Spark's Maven jars on 127.0.0.1, for integration tests and benchmarks that need
 * executors in different processes.
 */
package dev.sparktrainer.cluster;
