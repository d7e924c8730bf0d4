package dev.sparktrainer.data;

import dev.sparktrainer.data.PipelineOptions.ShardingPolicy;
import dev.sparktrainer.data.PipelineOptions.UnevenPolicy;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Random;

/**
 * Which records one worker owns, and the common number of steps per epoch.
 *
 * <p>FILE policy: whole splits are dealt to workers, largest first, each to the worker with the
 * fewest records so far (ties broken by a seeded shuffle), which balances uneven files. DATA
 * policy: every worker reads every split and owns the records whose position in the canonical order
 * is congruent to its rank modulo the number of workers. Either way a worker owns the same records
 * every epoch — only their order changes, from (seed, epoch) — so every record belongs to exactly
 * one worker per epoch, the step count is the same every epoch, and a cache of decoded records
 * stays valid.
 */
public final class WorkerShard implements Serializable {
  private static final long serialVersionUID = 1L;

  private final int rank;
  private final int numWorkers;
  private final ShardingPolicy policy;
  private final List<Split> splits; // the splits this worker reads, canonical order
  private final long[] firstRecordIndex; // DATA: canonical index of each split's first record
  private final long records;
  private final long stepsPerEpoch;
  private final long[] recordsPerWorker;

  /**
   * A remainder's shard ({@link #remainder}): per split of {@link #splits}, the records this worker
   * owns, and their counts; null for a whole epoch's shard (ownership by the policy).
   */
  private final BitSet[] owned;

  private final long[] ownedCounts;

  private WorkerShard(
      int rank,
      int numWorkers,
      ShardingPolicy policy,
      List<Split> splits,
      long[] firstRecordIndex,
      long records,
      long stepsPerEpoch,
      long[] recordsPerWorker,
      BitSet[] owned,
      long[] ownedCounts) {
    this.rank = rank;
    this.numWorkers = numWorkers;
    this.policy = policy;
    this.splits = Collections.unmodifiableList(splits);
    this.firstRecordIndex = firstRecordIndex;
    this.records = records;
    this.stepsPerEpoch = stepsPerEpoch;
    this.recordsPerWorker = recordsPerWorker;
    this.owned = owned;
    this.ownedCounts = ownedCounts;
  }

  static WorkerShard of(DatasetPlan plan, int rank, int n, PipelineOptions options) {
    if (n < 1 || rank < 0 || rank >= n) {
      throw new IllegalArgumentException("Invalid rank " + rank + " of " + n + " workers");
    }
    List<Split> all = plan.splits();
    ShardingPolicy policy = resolve(options.sharding(), all.size(), n);
    long[] perWorker = new long[n];
    List<Split> mine = new ArrayList<>();
    long[] first = null;
    if (policy == ShardingPolicy.FILE) {
      if (all.size() < n) {
        throw new IllegalArgumentException(
            "FILE sharding needs at least as many splits as workers: "
                + all.size()
                + " splits for "
                + n
                + " workers (use DATA or AUTO, or a smaller split size)");
      }
      List<Split> order = new ArrayList<>(all);
      Collections.shuffle(order, new Random(options.seed()));
      order.sort(Comparator.comparingLong(Split::records).reversed()); // stable: seeded tie order
      int[] owner = new int[all.size()];
      for (Split s : order) {
        int best = 0;
        for (int w = 1; w < n; w++) {
          if (perWorker[w] < perWorker[best]) {
            best = w;
          }
        }
        perWorker[best] += s.records();
        owner[s.index()] = best;
      }
      for (Split s : all) {
        if (owner[s.index()] == rank) {
          mine.add(s);
        }
      }
    } else {
      mine.addAll(all);
      first = new long[all.size()];
      long g = 0;
      for (int i = 0; i < all.size(); i++) {
        first[i] = g;
        g += all.get(i).records();
      }
      for (int w = 0; w < n; w++) {
        perWorker[w] = g / n + (w < g % n ? 1 : 0);
      }
    }
    int b = options.batchSize();
    long steps = commonSteps(perWorker, options);
    if (options.uneven() == UnevenPolicy.NONE) {
      long r = perWorker[rank];
      steps = options.dropRemainder() ? r / b : (r + b - 1) / b;
      return new WorkerShard(rank, n, policy, mine, first, r, steps, perWorker, null, null);
    }
    if (steps <= 0) {
      throw new IllegalArgumentException(
          "Too little data for a step on every worker: "
              + plan.totalRecords()
              + " records over "
              + n
              + " workers ("
              + Arrays.toString(perWorker)
              + " per worker, "
              + policy
              + " sharding) with batch size "
              + b
              + (options.dropRemainder() ? " and dropRemainder" : ""));
    }
    return new WorkerShard(
        rank, n, policy, mine, first, perWorker[rank], steps, perWorker, null, null);
  }

  private static ShardingPolicy resolve(ShardingPolicy policy, int splits, int n) {
    if (policy == ShardingPolicy.AUTO) {
      return splits >= n ? ShardingPolicy.FILE : ShardingPolicy.DATA;
    }
    return policy;
  }

  /** The steps every worker takes: PAD the most any worker needs, TRUNCATE the fewest. */
  private static long commonSteps(long[] perWorker, PipelineOptions options) {
    int b = options.batchSize();
    long steps = options.uneven() == UnevenPolicy.PAD ? 0 : Long.MAX_VALUE;
    for (long r : perWorker) {
      long s = options.dropRemainder() ? r / b : (r + b - 1) / b;
      steps = options.uneven() == UnevenPolicy.PAD ? Math.max(steps, s) : Math.min(steps, s);
    }
    return steps;
  }

  /**
   * The shard of worker {@code rank} of {@code n} in the rest of an epoch: the records of {@code
   * plan} that {@code consumed} does not hold, dealt with the sharding policy in effect for {@code
   * n} workers. DATA: the remaining records in canonical order, one to each worker in turn. FILE:
   * each split's remaining records as a whole, largest first to the worker with the fewest (as a
   * whole epoch's FILE shard); when fewer splits than workers have records left, they are dealt as
   * DATA. Every remaining record belongs to exactly one worker; the steps follow the uneven policy
   * over the remaining counts, and may be 0 (nothing, or under TRUNCATE too little, is left). Under
   * PAD, when fewer records than workers are left, a worker without one repeats the remaining
   * record number {@code rank % left}.
   */
  static WorkerShard remainder(
      DatasetPlan plan, int rank, int n, PipelineOptions options, ConsumedRecords consumed) {
    if (n < 1 || rank < 0 || rank >= n) {
      throw new IllegalArgumentException("Invalid rank " + rank + " of " + n + " workers");
    }
    List<Split> all = plan.splits();
    long[] left = new long[all.size()];
    int splitsLeft = 0;
    long total = 0;
    for (Split s : all) {
      left[s.index()] = s.records() - consumed.count(s.index());
      total += left[s.index()];
      splitsLeft += left[s.index()] > 0 ? 1 : 0;
    }
    ShardingPolicy policy = resolve(options.sharding(), all.size(), n);
    if (policy == ShardingPolicy.FILE && splitsLeft < n) {
      policy = ShardingPolicy.DATA;
    }
    long[] perWorker = new long[n];
    List<Split> mine = new ArrayList<>();
    List<BitSet> bits = new ArrayList<>();
    if (policy == ShardingPolicy.FILE) {
      List<Split> order = new ArrayList<>(all);
      Collections.shuffle(order, new Random(options.seed()));
      order.sort(Comparator.comparingLong((Split s) -> left[s.index()]).reversed());
      int[] owner = new int[all.size()];
      Arrays.fill(owner, -1);
      for (Split s : order) {
        if (left[s.index()] == 0) {
          continue;
        }
        int best = 0;
        for (int w = 1; w < n; w++) {
          if (perWorker[w] < perWorker[best]) {
            best = w;
          }
        }
        perWorker[best] += left[s.index()];
        owner[s.index()] = best;
      }
      for (Split s : all) {
        if (owner[s.index()] == rank) {
          mine.add(s);
          bits.add(consumed.remaining(s));
        }
      }
    } else {
      for (int w = 0; w < n; w++) {
        perWorker[w] = total / n + (w < total % n ? 1 : 0);
      }
      boolean repeatOne = total > 0 && total < n && options.uneven() == UnevenPolicy.PAD;
      long target = repeatOne ? rank % total : -1;
      long g = 0; // position among the remaining records
      for (Split s : all) {
        BitSet rest = consumed.remaining(s);
        BitSet b = new BitSet();
        for (int j = rest.nextSetBit(0); j >= 0; j = rest.nextSetBit(j + 1), g++) {
          if (repeatOne ? g == target : g % n == rank) {
            b.set(j);
          }
        }
        if (!b.isEmpty()) {
          mine.add(s);
          bits.add(b);
        }
      }
      if (repeatOne) {
        Arrays.fill(perWorker, 1);
      }
    }
    long[] counts = new long[bits.size()];
    long records = 0;
    for (int i = 0; i < counts.length; i++) {
      counts[i] = bits.get(i).cardinality();
      records += counts[i];
    }
    long steps = total == 0 ? 0 : Math.max(0, commonSteps(perWorker, options));
    return new WorkerShard(
        rank,
        n,
        policy,
        mine,
        null,
        records,
        steps,
        perWorker,
        bits.toArray(new BitSet[0]),
        counts);
  }

  public int rank() {
    return rank;
  }

  public int numWorkers() {
    return numWorkers;
  }

  /** The policy in effect (AUTO resolved). */
  public ShardingPolicy policy() {
    return policy;
  }

  /** The splits this worker reads, in canonical order. */
  public List<Split> splits() {
    return splits;
  }

  /** Records this worker owns per epoch. */
  public long records() {
    return records;
  }

  /** Records each worker owns, by rank. */
  public long[] recordsPerWorker() {
    return recordsPerWorker.clone();
  }

  public long stepsPerEpoch() {
    return stepsPerEpoch;
  }

  /**
   * Whether record {@code j} of split number {@code i} of {@link #splits()} belongs to this worker.
   */
  boolean owns(int i, long j) {
    if (owned != null) {
      return owned[i].get((int) j);
    }
    return policy == ShardingPolicy.FILE || (firstRecordIndex[i] + j) % numWorkers == rank;
  }

  /**
   * How many records of split number {@code i} of {@link #splits()} belong to this worker (the
   * plan's count).
   */
  long ownedRecords(int i) {
    if (owned != null) {
      return ownedCounts[i];
    }
    long r = splits.get(i).records();
    if (policy == ShardingPolicy.FILE) {
      return r;
    }
    long first = firstRecordIndex[i];
    return Math.floorDiv(first + r - 1 - rank, numWorkers)
        - Math.floorDiv(first - 1 - rank, numWorkers);
  }

  /**
   * The first record at or after {@code j} (an index in split number {@code i} of {@link
   * #splits()}) that belongs to this worker, or -1: walks the owned records in order.
   */
  long nextOwned(int i, long j) {
    if (owned != null) {
      return owned[i].nextSetBit((int) j);
    }
    long r = splits.get(i).records();
    if (policy != ShardingPolicy.FILE) {
      long g = firstRecordIndex[i] + j;
      j += Math.floorMod(rank - g, numWorkers);
    }
    return j < r ? j : -1;
  }

  /** Position in {@link #splits()} of each split, in the order of {@code epoch}. */
  int[] epochOrder(int epoch, PipelineOptions options) {
    int[] order = new int[splits.size()];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    if (options.shuffleSplits()) {
      Random rnd = new Random(Seeds.mix(options.seed(), epoch, rank, 1));
      for (int i = order.length - 1; i > 0; i--) {
        int j = rnd.nextInt(i + 1);
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
    }
    return order;
  }
}
