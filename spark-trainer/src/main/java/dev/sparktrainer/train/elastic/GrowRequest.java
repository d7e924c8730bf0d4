package dev.sparktrainer.train.elastic;

import dev.sparktrainer.checkpoint.AsyncCheckpointWriter;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.ReduceOp;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * The file in the checkpoint directory by which the driver asks the workers of a job running on
 * fewer workers than planned to stop at an epoch end, so that it relaunches the job on more ({@code
 * optGrow}). Both sides: the driver deletes it around each barrier job and writes it when the
 * cluster offers more slots ({@link #ask}); at each epoch end rank 0 looks for it and every rank
 * agrees ({@link #agreed}).
 */
public final class GrowRequest {
  private static final System.Logger LOG = System.getLogger(GrowRequest.class.getName());

  /** The request's file name in the checkpoint directory. */
  public static final String FILE = "_grow-request";

  private final Path path;
  private final AtomicBoolean requested = new AtomicBoolean();

  private GrowRequest(Path path) {
    this.path = path;
  }

  /** The request of a job checkpointing to {@code checkpointDir}; without one, it does nothing. */
  public static GrowRequest in(String checkpointDir) {
    return new GrowRequest(checkpointDir == null ? null : new Path(checkpointDir, FILE));
  }

  /** Driver: removes the request (before and after a barrier job); a failure is only logged. */
  public void delete(Configuration conf) {
    if (path == null) {
      return;
    }
    try {
      path.getFileSystem(conf).delete(path, false);
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "Cannot delete the grow request " + path + ": " + e);
    }
  }

  /**
   * Driver: asks the {@code workers} workers to stop at the next epoch end, once per job (again
   * only if writing the request failed), now that the cluster offers {@code slots} slots.
   */
  public void ask(Configuration conf, int slots, int workers) {
    if (requested.getAndSet(true)) {
      return;
    }
    try {
      path.getFileSystem(conf).create(path, true).close();
      LOG.log(
          System.Logger.Level.INFO,
          "The cluster offers "
              + slots
              + " task slots: asking the "
              + workers
              + " workers to stop at the next epoch end to grow (--grow)");
    } catch (IOException e) {
      requested.set(false);
      LOG.log(System.Logger.Level.WARNING, "Cannot write the grow request " + path + ": " + e);
    }
  }

  /**
   * Every rank, at an epoch end: whether the driver asked to grow (rank 0 looks for the file, every
   * rank gets its answer); if so rank 0 first waits until {@code writer} has written the epoch's
   * checkpoint.
   */
  public boolean agreed(Communicator comm, Configuration conf, AsyncCheckpointWriter writer)
      throws IOException {
    double[] flag = new double[1];
    if (comm.rank() == 0) {
      flag[0] = path.getFileSystem(conf).exists(path) ? 1 : 0;
    }
    comm.allReduce(flag, ReduceOp.MAX);
    if (flag[0] == 0) {
      return false;
    }
    if (comm.rank() == 0) {
      writer.awaitIdle();
      LOG.log(
          System.Logger.Level.INFO,
          "rank 0: the driver asks for more workers (--grow): stopping at this epoch end, its checkpoint written");
    }
    return true;
  }
}
