package dev.sparktrainer.train.elastic;

/**
 * The driver's elastic loop: runs the job on as many workers as the cluster offers; when a running
 * job loses slots for good (an executor gone, not replaced within the slot wait), relaunches it on
 * the largest count the cluster then offers ({@link ElasticPolicy#workersFor}), from the latest
 * checkpoint, or fails naming the missing slots; when the workers stopped to grow, relaunches it on
 * more. Spark stays behind {@link Cluster}: this class only decides.
 */
public final class ElasticSupervisor {
  private static final System.Logger LOG = System.getLogger(ElasticSupervisor.class.getName());

  /** How one run of the job on the cluster ended. */
  public record Attempt<R>(R results, boolean stoppedToGrow, int offered) {
    /** The job finished with {@code results}. */
    public static <R> Attempt<R> finished(R results) {
      return new Attempt<>(results, false, -1);
    }

    /** The workers stopped at an epoch end, its checkpoint written, for a relaunch on more. */
    public static <R> Attempt<R> grow() {
      return new Attempt<>(null, true, -1);
    }

    /** The job was cancelled: the cluster offered only {@code offered} slots for too long. */
    public static <R> Attempt<R> slotsLost(int offered) {
      return new Attempt<>(null, false, offered);
    }
  }

  /**
   * The finished job.
   *
   * @param results what the last run returned
   * @param workers the workers it ran on
   */
  public record Outcome<R>(R results, int workers) {}

  /** The cluster the supervisor runs the job on (the facade's Spark barrier jobs). */
  public interface Cluster<R> {
    /** Runs the job on {@code workers} workers (from the latest checkpoint, if any). */
    Attempt<R> run(int workers);

    /** The task slots the cluster offers now. */
    int slots();

    /** Checks that the training data can be dealt to {@code workers} workers. */
    void preflight(int workers);

    /** Reports a change of the worker count (after the supervisor has logged it). */
    void workersChanged(int from, int to, String reason);
  }

  private final ElasticPolicy policy;
  private final int numWorkers;
  private final long slotWaitMillis;

  /**
   * @param policy the job's policy (its minimum workers and checkpoint directory)
   * @param numWorkers the job's configured workers
   * @param slotWaitMillis how long the cluster may offer too few slots (named in the failure)
   */
  public ElasticSupervisor(ElasticPolicy policy, int numWorkers, long slotWaitMillis) {
    this.policy = policy;
    this.numWorkers = numWorkers;
    this.slotWaitMillis = slotWaitMillis;
  }

  /** Runs the job, first on {@code workers} workers, until it finishes or cannot go on. */
  public <R> Outcome<R> run(int workers, Cluster<R> cluster) {
    int minWorkers = policy.minWorkers();
    String checkpointDir = policy.checkpointDir();
    if (workers < numWorkers) {
      workersChanged(
          cluster,
          numWorkers,
          workers,
          "the cluster offers " + workers + " task slot(s) at the start");
    }
    while (true) {
      int running = workers;
      Attempt<R> attempt = cluster.run(running);
      if (attempt.stoppedToGrow()) {
        int next = policy.workersFor(Math.min(cluster.slots(), numWorkers));
        if (next > running) {
          workersChanged(
              cluster,
              running,
              next,
              "the cluster offers "
                  + cluster.slots()
                  + " task slots again: growing at an epoch end (--grow)");
          workers = next;
        } else {
          LOG.log(
              System.Logger.Level.WARNING,
              "Stopped to grow, but the cluster offers only "
                  + cluster.slots()
                  + " task slots now: going on with "
                  + running);
        }
        continue;
      }
      if (attempt.offered() < 0) {
        return new Outcome<>(attempt.results(), running);
      }
      int offered = attempt.offered();
      int next = policy.workersFor(Math.min(Math.max(offered, cluster.slots()), numWorkers));
      String missing =
          "the barrier stage needs "
              + running
              + " task slots and the cluster has offered "
              + offered
              + " for "
              + slotWaitMillis / 1000.0
              + " s (executors lost for good?)";
      if (next < minWorkers || checkpointDir == null) {
        throw new IllegalStateException(
            "Training stopped: "
                + missing
                + ". "
                + (minWorkers < numWorkers && checkpointDir == null
                    ? "Continuing on fewer workers (optMinWorkers "
                        + minWorkers
                        + ") needs a checkpoint directory"
                    : "Continuing needs "
                        + running
                        + " slots"
                        + (minWorkers < running
                            ? " or at least "
                                + minWorkers
                                + " (optMinWorkers) with a global batch they divide"
                            : "")
                        + "; with --min-workers (optMinWorkers) below --workers it would go on with fewer")
                + (checkpointDir == null
                    ? ""
                    : "; a rerun resumes from the checkpoint in " + checkpointDir));
      }
      cluster.preflight(next);
      workersChanged(cluster, running, next, missing);
      workers = next;
    }
  }

  /** Logs a change of the worker count and reports it to the cluster (the driver's progress). */
  private void workersChanged(Cluster<?> cluster, int from, int to, String reason) {
    LOG.log(
        System.Logger.Level.WARNING,
        "Training on "
            + to
            + " workers instead of "
            + from
            + " (--workers "
            + numWorkers
            + ", --min-workers "
            + policy.minWorkers()
            + "): "
            + reason
            + (policy.checkpointDir() == null
                ? ""
                : "; resuming from the latest checkpoint in " + policy.checkpointDir()));
    cluster.workersChanged(from, to, reason);
  }
}
