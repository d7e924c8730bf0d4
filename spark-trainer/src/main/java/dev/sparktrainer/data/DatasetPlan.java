package dev.sparktrainer.data;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The splits of a dataset with their record counts, made once on the driver and shipped to every
 * worker, which derives its own shard from it ({@link #shard}) — so all workers agree on who reads
 * what and on the number of steps without talking to each other.
 */
public final class DatasetPlan implements Serializable {
  private static final long serialVersionUID = 1L;

  private final DatasetSpec spec;
  private final List<Split> splits;
  private final long totalRecords;

  DatasetPlan(DatasetSpec spec, List<Split> splits) {
    this.spec = spec;
    this.splits = Collections.unmodifiableList(new ArrayList<>(splits));
    long n = 0;
    for (Split s : splits) {
      n += s.records();
    }
    this.totalRecords = n;
  }

  public DatasetSpec spec() {
    return spec;
  }

  public List<Split> splits() {
    return splits;
  }

  public long totalRecords() {
    return totalRecords;
  }

  /**
   * The same splits with every image column held as bytes on the host ({@link
   * DatasetSpec#withImageBytes()}).
   */
  public DatasetPlan withImageBytes() {
    return spec.hasImageBytes() ? this : new DatasetPlan(spec.withImageBytes(), splits);
  }

  /** The shard of worker {@code rank} of {@code numWorkers}; see {@link WorkerShard}. */
  public WorkerShard shard(int rank, int numWorkers, PipelineOptions options) {
    return WorkerShard.of(this, rank, numWorkers, options);
  }

  @Override
  public String toString() {
    return splits.size() + " splits, " + totalRecords + " records of " + spec;
  }
}
