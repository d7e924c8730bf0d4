package dev.sparktrainer.train.job;

import java.util.function.IntConsumer;
import org.apache.spark.SparkContext;

/**
 * The driver's watch over a running barrier job's slots: Spark retries a failed barrier stage only
 * when all N slots are free at once, and waits for them without end when an executor is gone for
 * good. When the cluster offers fewer than N slots for longer than the pre-flight wait, this
 * cancels the job (by its tag) and records what was offered, so the trainer can fail naming the
 * missing slots or relaunch on fewer workers ({@code optMinWorkers}).
 */
public final class SlotWatch implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(SlotWatch.class.getName());
  private static final long POLL_MILLIS = 250;

  private final SparkContext sc;
  private final int needed;
  private final long waitMillis;
  private final String jobTag;
  private final Thread thread;
  private final IntConsumer moreSlots;
  private volatile int offered = -1;
  private volatile boolean stopped;

  /**
   * @param moreSlots told the slots whenever the cluster offers more than needed (null: not
   *     watched)
   */
  SlotWatch(SparkContext sc, int needed, long waitMillis, String jobTag, IntConsumer moreSlots) {
    this.moreSlots = moreSlots;
    this.sc = sc;
    this.needed = needed;
    this.waitMillis = waitMillis;
    this.jobTag = jobTag;
    this.thread = new Thread(this::run, "spark-trainer-slot-watch");
    thread.setDaemon(true);
    thread.start();
  }

  /**
   * The slots the cluster offered when the job was cancelled for want of them; -1 if it was not.
   */
  int cancelledWithSlots() {
    return offered;
  }

  private void run() {
    long shortSince = -1;
    while (!stopped) {
      int slots;
      try {
        slots = Preflight.slots(sc);
      } catch (RuntimeException e) { // the context is stopping
        return;
      }
      long now = System.nanoTime();
      if (slots >= needed) {
        shortSince = -1;
        if (slots > needed && moreSlots != null) {
          moreSlots.accept(slots);
        }
      } else if (shortSince < 0) {
        shortSince = now;
        LOG.log(
            System.Logger.Level.WARNING,
            "The cluster offers "
                + slots
                + " task slot(s), the training job needs "
                + needed
                + ": waiting up to "
                + waitMillis
                + " ms for them to come back");
      } else if (now - shortSince >= waitMillis * 1_000_000L) {
        offered = slots;
        LOG.log(
            System.Logger.Level.WARNING,
            "The cluster has offered "
                + slots
                + " task slot(s) for "
                + waitMillis
                + " ms, the barrier stage needs "
                + needed
                + ": cancelling the training job");
        sc.cancelJobsWithTag(jobTag);
        return;
      }
      try {
        Thread.sleep(
            POLL_MILLIS); // executors come and go asynchronously: nothing to wait on but the count
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  @Override
  public void close() {
    stopped = true;
    thread.interrupt();
  }
}
