/**
 * Checks that this JVM's PyTorch engine works before anything trains on it: which libtorch DJL
 * loads (from {@code PYTORCH_LIBRARY_PATH} or the natives bundled in the jar), whether DJL's JNI
 * found for it is built for that libtorch, the CUDA version, and one tiny forward, backward and
 * update on each device ({@link dev.sparktrainer.engine.EngineCheck}).
 *
 * <p>{@code spark-trainer doctor} prints its report; the barrier tasks of a {@code --gpus} job run
 * the same check on each executor first, so that a wrong libtorch or JNI fails the job with one
 * line saying what to do instead of an error deep inside a training step. This package depends on
 * DJL only (no Spark, no other layer of the trainer).
 */
package dev.sparktrainer.engine;
