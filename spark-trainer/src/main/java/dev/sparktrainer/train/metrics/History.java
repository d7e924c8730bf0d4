package dev.sparktrainer.train.metrics;

import java.io.Serializable;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The per-epoch metrics of a training run, resumed attempts included (epochs restored from a
 * checkpoint keep the metrics recorded when they ran), and the resumes themselves.
 *
 * @param epochs one entry per completed epoch, in order
 * @param resumes every start from a checkpoint (stage retries, reruns), in order, and every start
 *     from scratch because all checkpoints were corrupt; each lists the checkpoints it skipped;
 *     empty for a run that went through without one
 * @param stragglers per epoch with more than one worker, which rank was slowest and by how much
 *     (the epochs this attempt ran: after a resume, earlier epochs' reports are in the earlier
 *     attempts' logs and progress)
 */
public record History(
    List<EpochMetrics> epochs, List<Resume> resumes, List<StragglerReport> stragglers)
    implements Serializable {
  /** Copies the lists. */
  public History {
    epochs = List.copyOf(epochs);
    resumes = List.copyOf(resumes);
    stragglers = List.copyOf(stragglers);
  }

  /** A history without straggler reports. */
  public History(List<EpochMetrics> epochs, List<Resume> resumes) {
    this(epochs, resumes, List.of());
  }

  /** A history without resumes. */
  public History(List<EpochMetrics> epochs) {
    this(epochs, List.of());
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
