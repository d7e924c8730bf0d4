package dev.sparktrainer.train.job;

import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.elastic.ElasticPolicy;
import dev.sparktrainer.train.elastic.GrowRequest;
import dev.sparktrainer.train.loop.TrainingRuntime;
import dev.sparktrainer.train.loop.WorkerResult;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.stream.IntStream;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.util.SerializableConfiguration;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * One run of the N barrier tasks on Spark, with all its plumbing: the job's description and call
 * site in the UI, a job tag and the listener that cancels it at a failure a retry would repeat,
 * interrupt-on-cancel, the slot watch that cancels it when the cluster loses slots (or asks it to
 * grow), and the shuffle that makes the barrier stage retryable as a whole. Everything it sets on
 * the {@link SparkContext} it restores, whatever the outcome.
 */
public final class BarrierJob {
  private final SparkContext sc;
  private final String ringHost;
  private final long slotWaitMillis;

  /**
   * @param ringHost the address each task binds its ring listener on (null: the executor's host)
   * @param slotWaitMillis how long the slot watch lets a lost slot come back before cancelling
   */
  public BarrierJob(SparkContext sc, String ringHost, long slotWaitMillis) {
    this.sc = sc;
    this.ringHost = ringHost;
    this.slotWaitMillis = slotWaitMillis;
  }

  /**
   * The slot watch cancelled the barrier job: the cluster offered {@code offered} slots, too few.
   */
  public static final class SlotsLost extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int offered;

    SlotsLost(int offered, Throwable cause) {
      super("the cluster offered " + offered + " task slots", cause);
      this.offered = offered;
    }

    /** The slots the cluster offered when the job was cancelled. */
    public int offered() {
      return offered;
    }
  }

  /**
   * Runs {@code job} on its {@code numWorkers} barrier tasks and returns their results.
   *
   * @throws SlotsLost when the cluster lost slots and the watch cancelled the job
   * @throws IllegalStateException at once for a failure a retry would repeat
   */
  public List<WorkerResult> run(TrainingConfig job, TrainingRuntime runtime, ElasticPolicy policy) {
    int workers = job.numWorkers();
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(sc);
    Broadcast<SerializableConfiguration> hadoop =
        jsc.broadcast(new SerializableConfiguration(sc.hadoopConfiguration()));
    List<Integer> ranks = IntStream.range(0, workers).boxed().toList();
    String previous = sc.getLocalProperty("spark.job.description");
    sc.setJobDescription(
        "spark-trainer: "
            + workers
            + " workers, "
            + job.data().epochs()
            + " epochs, "
            + job.model().spec());
    // The Spark UI names stages after the call site: name them after the job, not a Spark internal.
    sc.setCallSite(
        "spark-trainer: train " + workers + " workers x " + job.data().epochs() + " epochs");
    // A job tag (not a job group: the caller's group stays theirs) lets the listener cancel exactly
    // this job when a task fails in a way a stage retry would only repeat.
    String jobTag = "spark-trainer-" + UUID.randomUUID();
    NonRetryableFailureListener failFast = new NonRetryableFailureListener(sc, jobTag);
    String previousInterrupt = sc.getLocalProperty("spark.job.interruptOnCancel");
    sc.addSparkListener(failFast);
    sc.addJobTag(jobTag);
    // Cancelled tasks are interrupted, so none keeps its executor slot blocked on a dead ring.
    sc.setInterruptOnCancel(true);
    List<WorkerResult> results;
    TrainingConfig.Elastic elastic = job.elastic();
    boolean grow =
        elastic.grow() && job.checkpoints().dir() != null && workers < elastic.plannedWorkers();
    GrowRequest request = GrowRequest.in(job.checkpoints().dir());
    request.delete(sc.hadoopConfiguration());
    SlotWatch watch =
        new SlotWatch(
            sc,
            workers,
            slotWaitMillis,
            jobTag,
            !grow
                ? null
                : slots -> {
                  if (policy.workersFor(Math.min(slots, elastic.plannedWorkers())) > workers) {
                    request.ask(sc.hadoopConfiguration(), slots, workers);
                  }
                });
    try {
      ClassTag<WorkerResult> tag = ClassTag$.MODULE$.apply(WorkerResult.class);
      RDD<WorkerResult> trained =
          jsc.parallelize(ranks, workers)
              .rdd()
              .barrier()
              .mapPartitions(new BarrierTrainingTask(job, runtime, hadoop, ringHost), false, tag);
      // The shuffle makes the barrier stage a shuffle-map stage: Spark retries it as a whole when a
      // task fails (a failed barrier result stage would not be retried).
      results = new ArrayList<>(JavaRDD.fromRDD(trained, tag).repartition(1).collect());
    } catch (Exception e) { // SparkException is checked, yet thrown by collect()
      watch.close();
      if (watch.cancelledWithSlots() >= 0) {
        throw new SlotsLost(watch.cancelledWithSlots(), e);
      }
      failFast.rethrowIfNonRetryable(e);
      failFast.rethrowWithTaskError(e);
      throw e;
    } finally {
      watch.close();
      request.delete(sc.hadoopConfiguration());
      sc.removeJobTag(jobTag);
      sc.setLocalProperty("spark.job.interruptOnCancel", previousInterrupt);
      sc.removeSparkListener(failFast);
      sc.setJobDescription(previous);
      sc.clearCallSite();
      hadoop.destroy();
    }
    return results;
  }
}
