package dev.sparktrainer.train;

import java.io.Serializable;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The per-epoch metrics of a training run, resumed attempts included (epochs restored from a
 * checkpoint keep the metrics recorded when they ran).
 *
 * @param epochs one entry per completed epoch, in order
 */
public record History(List<EpochMetrics> epochs) implements Serializable {
  /** Copies the list. */
  public History {
    epochs = List.copyOf(epochs);
  }

  /** The last epoch's metrics. */
  public EpochMetrics last() {
    if (epochs.isEmpty()) {
      throw new IllegalStateException("No epoch completed");
    }
    return epochs.get(epochs.size() - 1);
  }

  /** A JSON array of the epochs. */
  public String toJson() {
    return epochs.stream().map(EpochMetrics::toJson).collect(Collectors.joining(",\n ", "[", "]"));
  }
}
