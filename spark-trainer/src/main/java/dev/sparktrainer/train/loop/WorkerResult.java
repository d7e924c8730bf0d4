package dev.sparktrainer.train.loop;

import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.StragglerReport;
import java.io.Serializable;
import java.util.List;

/**
 * What a worker task returns to the driver: its rank, the history and resumes and, from rank 0
 * only, the final parameters in DJL's format and the straggler reports (empty elsewhere); {@code
 * stoppedToGrow}: the workers stopped at an epoch end (its checkpoint written) for the driver to
 * relaunch on more ({@code optGrow}).
 */
public record WorkerResult(
    int rank,
    List<EpochMetrics> history,
    List<Resume> resumes,
    byte[] parameters,
    String parameterHash,
    List<StragglerReport> stragglers,
    boolean stoppedToGrow)
    implements Serializable {}
