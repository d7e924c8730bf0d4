package dev.sparktrainer.data;

import java.io.Serializable;
import java.util.Objects;

/**
 * A user-defined per-example map, as tf.data's {@code map(fn, num_parallel_calls=AUTOTUNE)}: it
 * reads and rewrites one decoded {@link Example} — its features and its label — in place. It runs
 * in the pipeline's parallel decode stage (the reader threads, whose number AUTOTUNE adjusts),
 * before the shuffle buffer and batching, on the executors: it must be serializable, and one
 * instance is called from several threads at once (keep per-call state in locals or {@link
 * Example#scratch}).
 *
 * <p>Randomness comes from {@link Example#random()}, seeded from (seed, epoch, rank, example): the
 * same example of the same epoch gets the same draws in every run, and after a resume.
 *
 * <p>Java: {@code ex -> ex.setLabel(ex.label() * 2)}. Scala (a notebook): {@code
 * PipelineOptions.builder().optTransform((ex: Example) => ex.set(0, 0, ex.get(0, 0) * 2))}. The
 * output has the shapes the {@link DatasetSpec} declares (the model's input shapes): a transform
 * changes values, never sizes. Built-in image augmentations: {@link ImageAugment}.
 */
@FunctionalInterface
public interface ExampleTransform extends Serializable {
  /**
   * Transforms {@code example} in place. An exception fails the epoch with an error naming the file
   * and the record.
   */
  void apply(Example example) throws Exception;

  /** This transform, then {@code next}. */
  default ExampleTransform andThen(ExampleTransform next) {
    Objects.requireNonNull(next, "next");
    ExampleTransform first = this;
    return ex -> {
      first.apply(ex);
      next.apply(ex);
    };
  }
}
