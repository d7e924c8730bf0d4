package dev.sparktrainer.train.metrics;

import dev.sparktrainer.collective.Communicator;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * One rank's step times of one epoch, kept cheaply for straggler detection: the sums over every
 * step (data wait, compute, communication wait) and a fixed-size reservoir of {@value #CAPACITY}
 * steps' times. The reservoir's random choices come from the job's seed and the epoch, and every
 * rank takes the same number of steps: all ranks keep the <em>same</em> steps, so rank 0 can
 * compare them step by step (who was slowest in each) at the epoch's end.
 *
 * <p>Per step: <b>data wait</b> is the wait for the input pipeline's next batch; <b>communication
 * wait</b> the training thread waiting for the gradient all-reduce (the step's exposed
 * communication); <b>compute</b> the rest of the step (forward, backward, optimizer). A rank's
 * <em>work</em> in a step is data wait + compute: what the others wait for at the all-reduce.
 *
 * <p>The per-step path only writes into preallocated arrays; at the epoch's end {@link #exchange}
 * gathers every rank's record (about 2 KiB each) to build the {@link StragglerReport} on rank 0.
 */
public final class StepTimes {
  /** Steps kept per epoch: exact up to this many steps per epoch, a uniform sample beyond. */
  static final int CAPACITY = 512;

  private final long seed;
  private final String host;
  private final String executorId;

  /** Per kept step: data wait + compute, in seconds. */
  private final float[] work = new float[CAPACITY];

  private SplittableRandom random;
  private int filled;
  private long steps;
  private long dataNanos;
  private long computeNanos;
  private long commWaitNanos;

  /**
   * @param seed the job's seed (the same on every rank)
   * @param host this rank's host, as reported
   * @param executorId this rank's Spark executor id, as reported
   */
  public StepTimes(long seed, String host, String executorId) {
    this.seed = seed;
    this.host = host;
    this.executorId = executorId;
  }

  /** Starts an epoch's record (every rank, the same epoch). */
  public void begin(int epoch) {
    random =
        new SplittableRandom(seed * 0x9E3779B97F4A7C15L + epoch * 0xBF58476D1CE4E5B9L + 0x5EED);
    filled = 0;
    steps = 0;
    dataNanos = 0;
    computeNanos = 0;
    commWaitNanos = 0;
  }

  /**
   * Records one step.
   *
   * @param dataNanos the wait for the batch
   * @param stepNanos the step itself (from having the batch to the updated parameters)
   * @param commWaitNanos the part of {@code stepNanos} spent waiting for the all-reduce
   */
  public void record(long dataNanos, long stepNanos, long commWaitNanos) {
    long computeNs = Math.max(0, stepNanos - commWaitNanos);
    this.dataNanos += dataNanos;
    this.computeNanos += computeNs;
    this.commWaitNanos += commWaitNanos;
    // Reservoir sampling (Vitter's algorithm R): every step is kept with probability
    // CAPACITY/steps.
    int slot = steps < CAPACITY ? (int) steps : (int) random.nextLong(steps + 1);
    steps++;
    if (slot < CAPACITY) {
      work[slot] = (dataNanos + computeNs) / 1e9f;
      filled = Math.max(filled, slot + 1);
    }
  }

  /**
   * Gathers every rank's record (a collective: every rank calls it after the same epoch); on rank 0
   * returns the epoch's report, elsewhere, and for a single worker, null.
   */
  public StragglerReport exchange(Communicator comm, int epoch) {
    if (comm.size() < 2) {
      return null;
    }
    List<byte[]> all = comm.allGather(encode());
    if (comm.rank() != 0) {
      return null;
    }
    List<Sample> samples = new ArrayList<>(all.size());
    for (int r = 0; r < all.size(); r++) {
      samples.add(decode(r, all.get(r)));
    }
    return StragglerReport.analyze(epoch, samples);
  }

  /** One rank's record as rank 0 receives it; work = data wait + compute, per kept step. */
  record Sample(
      int rank,
      String host,
      String executorId,
      long steps,
      double dataWaitSeconds,
      double computeSeconds,
      double commWaitSeconds,
      float[] work) {}

  /** This rank's record, in the order {@link #decode} reads it. */
  byte[] encode() {
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(64 + filled * 8);
      DataOutputStream out = new DataOutputStream(bytes);
      out.writeUTF(host);
      out.writeUTF(executorId);
      out.writeLong(steps);
      out.writeLong(dataNanos);
      out.writeLong(computeNanos);
      out.writeLong(commWaitNanos);
      out.writeInt(filled);
      for (int i = 0; i < filled; i++) {
        out.writeFloat(work[i]);
      }
      out.flush();
      return bytes.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static Sample decode(int rank, byte[] record) {
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(record))) {
      String host = in.readUTF();
      String executor = in.readUTF();
      long steps = in.readLong();
      double data = in.readLong() / 1e9;
      double compute = in.readLong() / 1e9;
      double comm = in.readLong() / 1e9;
      int n = in.readInt();
      if (n < 0 || n > CAPACITY) {
        throw new IOException(n + " kept steps (at most " + CAPACITY + ")");
      }
      float[] work = new float[n];
      for (int i = 0; i < n; i++) {
        work[i] = in.readFloat();
      }
      return new Sample(rank, host, executor, steps, data, compute, comm, work);
    } catch (IOException e) {
      throw new IllegalStateException(
          "rank 0: the step times gathered from rank "
              + rank
              + " are malformed ("
              + record.length
              + " bytes): "
              + e.getMessage(),
          e);
    }
  }
}
