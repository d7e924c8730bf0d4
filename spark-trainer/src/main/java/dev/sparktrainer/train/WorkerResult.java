package dev.sparktrainer.train;

import java.io.Serializable;
import java.util.List;

/**
 * What a worker task returns to the driver: its rank, the history and, from rank 0 only, the final
 * parameters in DJL's format.
 */
record WorkerResult(int rank, List<EpochMetrics> history, byte[] parameters, String parameterHash)
    implements Serializable {}
