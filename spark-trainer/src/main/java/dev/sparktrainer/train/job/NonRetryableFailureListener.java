package dev.sparktrainer.train.job;

import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.train.loop.NonRetryableTrainingException;
import dev.sparktrainer.train.loop.ReplicaMismatchException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkException;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.TaskKilled;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * Fails a training job at once when one of its tasks fails in a way a retry would only repeat (a
 * {@link NonRetryableTrainingException}: diverged replicas, a checkpoint of another model, ...; or
 * a corrupt TFRecord file, a {@code TFRecordCorruptException} however wrapped). Spark would
 * otherwise retry the barrier stage up to {@code spark.stage.maxConsecutiveAttempts} times — each
 * attempt reloading the checkpoint and training until the same failure — before giving up with a
 * generic "stage failure" message.
 *
 * <p>Registered on the driver for one {@code fit}: it follows the stages of the jobs carrying the
 * job's tag, and at the first such task failure records it and cancels the tagged jobs; {@link
 * #rethrowIfNonRetryable} then turns Spark's cancellation into the task's own error.
 */
public final class NonRetryableFailureListener extends SparkListener {
  /** Spark's local property holding a job's tags (comma-separated), as in {@code SparkContext}. */
  private static final String JOB_TAGS = "spark.job.tags";

  private static final String BASE = NonRetryableTrainingException.class.getName();
  private static final String REPLICA = ReplicaMismatchException.class.getName();

  /** A corrupt input file: every attempt would read the same bytes (named by the exception). */
  private static final String CORRUPT = TFRecordCorruptException.class.getName();

  private final SparkContext sc;
  private final String tag;
  private final Set<Integer> stages = ConcurrentHashMap.newKeySet();
  private final AtomicReference<ExceptionFailure> failure = new AtomicReference<>();

  /**
   * The last task error of the job's stages (an exception preferred to a lost executor), for the
   * message.
   */
  private final AtomicReference<String> lastTaskError = new AtomicReference<>();

  private final AtomicBoolean lastIsException = new AtomicBoolean();

  NonRetryableFailureListener(SparkContext sc, String tag) {
    this.sc = sc;
    this.tag = tag;
  }

  @Override
  public void onStageSubmitted(SparkListenerStageSubmitted event) {
    String tags = event.properties() == null ? null : event.properties().getProperty(JOB_TAGS);
    if (tags != null && Set.of(tags.split(",")).contains(tag)) {
      stages.add(event.stageInfo().stageId());
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd event) {
    if (stages.contains(event.stageId())
        && event.reason() instanceof TaskFailedReason r
        && !(r instanceof TaskKilled)) {
      // Peers of a failed rank fail too: keep the exceptions (which name ranks and addresses) over
      // bare "executor lost" reasons, the latest of each kind.
      boolean exception = r instanceof ExceptionFailure;
      if (exception || !lastIsException.get()) {
        lastTaskError.set(
            exception
                ? ((ExceptionFailure) r).className() + ": " + ((ExceptionFailure) r).description()
                : firstLine(r.toErrorString()));
        lastIsException.set(exception);
      }
    }
    if (stages.contains(event.stageId())
        && event.reason() instanceof ExceptionFailure f
        && isNonRetryable(f)
        && failure.compareAndSet(null, f)) {
      // Posts a cancellation to the scheduler: the job fails now, the other tasks are killed.
      sc.cancelJobsWithTag(tag);
    }
  }

  /** The first non-retryable task failure seen, if any. */
  ExceptionFailure failure() {
    return failure.get();
  }

  /**
   * If the job ended because of a non-retryable task failure, throws that failure's error (same
   * exception class, the task's message) with Spark's exception as the cause; otherwise returns.
   */
  void rethrowIfNonRetryable(Exception sparkError) {
    ExceptionFailure f = failure.get();
    if (f == null) {
      return;
    }
    String message =
        f.description()
            + " [a task failed with "
            + f.className()
            + ": the job was cancelled instead of retried]";
    if (isClass(f, REPLICA)) {
      throw new ReplicaMismatchException(message, sparkError);
    }
    throw new NonRetryableTrainingException(message, sparkError);
  }

  /**
   * If a training task failed before Spark gave up on the job, throws a {@link
   * TrainingFailedException} leading with that task's error, with Spark's exception as the cause;
   * otherwise returns.
   */
  void rethrowWithTaskError(Exception sparkError) {
    if (!(sparkError instanceof SparkException)) {
      return;
    }
    try {
      // Listener events are delivered asynchronously: the failed task's end may still be queued.
      sc.listenerBus().waitUntilEmpty(10_000);
    } catch (Exception e) { // a TimeoutException: report what has arrived
      System.getLogger(NonRetryableFailureListener.class.getName())
          .log(System.Logger.Level.DEBUG, "Listener bus not drained: " + e);
    }
    String task = lastTaskError.get();
    if (task == null || !(sparkError instanceof SparkException)) {
      return;
    }
    TrainingFailedException.throwUnchecked(
        new TrainingFailedException(
            "Training failed: "
                + firstLine(task)
                + " [the last error of a training task; Spark: "
                + firstLine(String.valueOf(sparkError.getMessage()))
                + "]",
            sparkError));
  }

  private static String firstLine(String s) {
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }

  static boolean isNonRetryable(ExceptionFailure f) {
    return isClass(f, BASE) || isClass(f, REPLICA) || isClass(f, CORRUPT);
  }

  /** The task threw {@code name}, directly or as a cause (wrapped by the task or by Spark). */
  private static boolean isClass(ExceptionFailure f, String name) {
    return name.equals(f.className())
        || (f.fullStackTrace() != null && f.fullStackTrace().contains("Caused by: " + name + ":"));
  }
}
