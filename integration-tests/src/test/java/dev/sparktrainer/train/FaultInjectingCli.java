package dev.sparktrainer.train;

import dev.sparktrainer.cli.SparkTrainerCli;
import dev.sparktrainer.train.loop.FaultInjection;
import java.util.Arrays;

/**
 * Testing only: the driver main of the cluster tests that inject faults into a CLI-submitted job.
 * It reads its leading {@code --inject-ring-connect-delay RANK:MILLIS[:WORKERS]} and {@code
 * --inject-checkpoint-rename-delay STEP:MILLIS} arguments, installs them as the {@link
 * FaultInjection} every trainer of this driver starts from (shipped to the executors in the job's
 * configuration), and runs {@link SparkTrainerCli#main} with the rest. It is in this package
 * because {@code FaultInjection} is package-private; it is submitted from its own small jar, loaded
 * by the same class loader as the application jar.
 */
public final class FaultInjectingCli {
  /** Runs a ring-connect delay of {@code RANK:MILLIS}. */
  public static final String RING_CONNECT_DELAY = "--inject-ring-connect-delay";

  /** Runs a checkpoint-rename delay of {@code STEP:MILLIS}. */
  public static final String CHECKPOINT_RENAME_DELAY = "--inject-checkpoint-rename-delay";

  private FaultInjectingCli() {}

  public static void main(String[] args) {
    FaultInjection faults = FaultInjection.NONE;
    int i = 0;
    for (; i < args.length && args[i].startsWith("--inject-"); i += 2) {
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("Missing value of " + args[i]);
      }
      String[] v = args[i + 1].split(":");
      boolean ring = RING_CONNECT_DELAY.equals(args[i]);
      if (v.length != 2 && !(ring && v.length == 3)) {
        throw new IllegalArgumentException(
            "Invalid "
                + args[i]
                + " '"
                + args[i + 1]
                + "': expected N:MILLIS"
                + (ring ? "[:WORKERS]" : ""));
      }
      long n = Long.parseLong(v[0]);
      long millis = Long.parseLong(v[1]);
      switch (args[i]) {
        case RING_CONNECT_DELAY ->
            faults =
                faults.withRingConnectDelay(
                    Math.toIntExact(n), millis, v.length == 3 ? Integer.parseInt(v[2]) : 0);
        case CHECKPOINT_RENAME_DELAY -> faults = faults.withCheckpointRenameDelay(n, millis);
        default ->
            throw new IllegalArgumentException(
                "Unknown fault "
                    + args[i]
                    + ": expected "
                    + RING_CONNECT_DELAY
                    + " or "
                    + CHECKPOINT_RENAME_DELAY);
      }
    }
    FaultInjection.installForTests(faults);
    SparkTrainerCli.main(Arrays.copyOfRange(args, i, args.length));
  }
}
